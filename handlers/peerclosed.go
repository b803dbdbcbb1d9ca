package handlers

import (
	"context"
	"net"
	"net/http"

	"github.com/baton-io/baton/internal/rawio"
)

// connKey is the request context key of the client's connection, set by
// NewHTTPServer's ConnContext.
type connKey struct{}

// withConn is NewHTTPServer's ConnContext: every request on c carries c.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// clientGone reports whether r's client went away: its request's context
// ended (net/http saw the connection close, or the HTTP/2 stream reset),
// or the socket already holds the client's close, which net/http's reader
// of the connection may not have seen yet (rawio.ConnPeerGone: on a loaded
// machine, milliseconds later). A grant answered to a client gone would be
// held by nobody until its lease's end.
func clientGone(r *http.Request) bool {
	if r.Context().Err() != nil {
		return true
	}
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	return c != nil && rawio.ConnPeerGone(c)
}
