package cluster

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A peer whose polls fail was taken for dead without a word in the log:
// a node serving TLS listed as http:// (its polls answered 400 "Client
// sent an HTTP request to an HTTPS server."), another service at a
// peer's address, or a peer cut off. Each node says once, per peer, that
// the peer counts as dead and why, telling a wrong URL (the peer answers
// something else than a baton status) from silence; and says when a
// silent peer answers again.
func TestMemPeerPollFailuresAreLogged(t *testing.T) {
	tlsPeer := httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsPeer.Config.ErrorLog = log.New(io.Discard, "", 0) // its handshake errors
	tlsPeer.StartTLS()
	defer tlsPeer.Close()
	junkPeer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "<html>another service</html>")
	}))
	defer junkPeer.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := ln.Addr().String()
	ln.Close()
	tlsAsHTTP := "http://" + strings.TrimPrefix(tlsPeer.URL, "https://")
	closedURL := "http://" + closedAddr
	outside := map[string]bool{strings.TrimPrefix(tlsPeer.URL, "https://"): true, strings.TrimPrefix(junkPeer.URL, "http://"): true, closedAddr: true}

	var lines logLines
	c := newMemCluster(t, 2, func(cfg *Config) {
		cfg.Peers = append(cfg.Peers[:2:2], tlsAsHTTP, junkPeer.URL, closedURL)
		cfg.Logger = slog.New(slog.NewTextHandler(&lines, &slog.HandlerOptions{Level: slog.LevelInfo})).With("self", cfg.Self)
		// The links know the memCluster's nodes only: the outside
		// peers are dialled directly.
		tr := cfg.Transport.(*http.Transport)
		inner := tr.DialContext
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if outside[addr] {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}
			return inner(ctx, network, addr)
		}
	})
	self := "self=" + c.urls[0]
	c.start(0, 1)
	c.waitFor("node 0's lines about the outside peers", func() bool {
		return lines.count(self, "level=WARN", "peer answers, but not as a baton node", "peer="+tlsAsHTTP, "HTTPS server") == 1 &&
			lines.count(self, "level=WARN", "peer answers, but not as a baton node", "peer="+junkPeer.URL) == 1 &&
			lines.count(self, "level=WARN", "peer does not answer", "peer="+closedURL) == 1
	})
	c.waitActive(0, 1)
	if n := lines.count(self, "peer="+c.urls[1], "level=WARN"); n != 0 {
		t.Fatalf("node 0 logged %d warnings about its live peer node 1:\n%s", n, lines.buf.String())
	}
	c.links.setCut(0, 1, true)
	c.waitFor("node 0's line about node 1 cut off", func() bool {
		return lines.count(self, "level=WARN", "peer does not answer", "peer="+c.urls[1]) == 1
	})
	c.links.setCut(0, 1, false)
	c.waitFor("node 0's line about node 1 back", func() bool {
		return lines.count(self, "level=INFO", "peer answers again", "peer="+c.urls[1]) == 1
	})
	for _, u := range []string{tlsAsHTTP, junkPeer.URL, closedURL} {
		if n := lines.count(self, "peer="+u); n != 1 {
			t.Errorf("node 0 logged %d lines about %s, want 1", n, u)
		}
	}
}

// A node with another cluster_secret was shown by GET /cluster, on
// either side, as live with no role, like a node still starting: only
// the logs said that the two refuse each other. The view says so
// (refused), on both sides.
func TestMemViewShowsARefusingPeer(t *testing.T) {
	c := newMemCluster(t, 2, func(cfg *Config) {
		if cfg.Self == cfg.Peers[1] {
			cfg.Secret = "another-secret"
		}
	})
	c.start(0, 1)
	refused := func(i, j int) bool {
		for _, p := range c.nodes[i].node.View().Peers {
			if p.URL == c.urls[j] {
				return p.Refused && p.Live
			}
		}
		return false
	}
	c.waitFor("both nodes' views of the other as refusing", func() bool {
		return refused(0, 1) && refused(1, 0)
	})
	for _, p := range c.nodes[0].node.View().Peers {
		if p.URL == c.urls[0] && p.Refused {
			t.Fatalf("node 0 shows itself refused: %+v", p)
		}
	}
}
