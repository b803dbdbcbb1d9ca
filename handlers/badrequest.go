package handlers

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/jsonw"
)

// Go's HTTP/1.1 server refuses a request it cannot parse before any
// handler sees it: a target with a `%` that two hex digits do not follow
// (/locks/100%, /locks/%zz) or a control character, a header line that is
// not a field or has a control character in its value, no Host. Its answer
// is a plain-text 400 that names nothing. BadRequestListener gives that
// answer baton's own error body instead, naming the field (the key of a
// /locks path, the header): its connections replace the server's one
// write of that answer (fmt.Fprintf to the connection, which is then
// closed) with baton's, found from the bytes in the server's read buffer
// (it reads no more after the request it failed). HTTP/1.1 without TLS
// only: over TLS the server must see its *tls.Conn, and HTTP/2 refuses
// such a :path with a reset stream, below anything a listener sees.

// goBadRequest and goErrorHeaders make the whole answer net/http writes
// for a request it cannot parse (server.go, conn.serve):
// goBadRequest+goErrorHeaders+"400 Bad Request", or with ": <reason>"
// after both "Bad Request"s ("missing required Host header", "invalid
// header name", ...).
const (
	goBadRequest   = "HTTP/1.1 400 Bad Request"
	goErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
)

// goBadRequestReason reports whether b is net/http's answer to a request
// it cannot parse, and the reason it gives ("" for none). A handler's 400
// never matches: net/http puts Content-Length or Date before its other
// headers.
func goBadRequestReason(b []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(goBadRequest))
	if !ok {
		return "", false
	}
	i := bytes.Index(rest, []byte(goErrorHeaders))
	if i < 0 {
		return "", false
	}
	reason, body := string(rest[:i]), string(rest[i+len(goErrorHeaders):])
	if body != "400 Bad Request"+reason || (reason != "" && !strings.HasPrefix(reason, ": ")) {
		return "", false
	}
	return strings.TrimPrefix(reason, ": "), true
}

// BadRequestListener wraps ln (plain TCP, not TLS) so that the answer of
// net/http to a request line it cannot parse is baton's error body.
func BadRequestListener(ln net.Listener) net.Listener { return badRequestListener{ln} }

type badRequestListener struct{ net.Listener }

func (l badRequestListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &badRequestConn{Conn: c}, nil
}

type badRequestConn struct {
	net.Conn
	// buf is the buffer of the connection's first Read, to its capacity:
	// net/http's bufio.Reader's, which every read of a request line
	// fills (net/http's first read is a 14-byte look for the HTTP/2
	// preface, the rest of the line comes in the next). buf[:end] is what
	// the reads into it have filled: the request line that net/http
	// failed to parse ends there (it reads no more after it). Written
	// only by the goroutine that reads requests, and read by Write only
	// once a read failed; the background read that watches a connection
	// during a handler reads into a buffer of its own, which Read leaves
	// alone.
	buf []byte
	end int
}

// CloseWrite half-closes the connection as net/http does before it
// closes one (a *net.TCPConn's; the wrapper must not hide it).
func (c *badRequestConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// NetConn returns the connection under the wrapper (as a *tls.Conn's
// does): a handler that took the connection over (Hijack) may read and
// write it directly, past the request reading this wrapper watches.
func (c *badRequestConn) NetConn() net.Conn { return c.Conn }

func (c *badRequestConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	switch {
	case c.buf == nil:
		c.buf, c.end = b[:cap(b)], n
	case cap(b) > 0 && cap(b) <= cap(c.buf):
		// b is buf from offset o (a later read of the same buffer) when
		// it starts at buf[o]; net/http moves what it has not consumed
		// to the front before it reads on, so buf[:o] is text read.
		if o := cap(c.buf) - cap(b); &c.buf[o] == &b[:1][0] {
			c.end = o + n
		}
	}
	return n, err
}

func (c *badRequestConn) Write(b []byte) (int, error) {
	reason, ok := goBadRequestReason(b)
	if !ok {
		return c.Conn.Write(b)
	}
	if _, err := c.Conn.Write(badRequestAnswer(c.buf[:c.end], reason)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// badRequestAnswer is the HTTP/1.1 answer to the request line in read
// (the bytes of net/http's read buffer) that net/http could not parse: in
// text when the request's Accept asks for it, as on every /locks call.
func badRequestAnswer(read []byte, reason string) []byte {
	e, hdr := requestLineError(withoutBodies(string(read)), reason)
	ct, body := "application/json; charset=utf-8", []byte(nil)
	if wantsText(&http.Request{Header: hdr}) {
		ct, body = "text/plain; charset=utf-8", []byte(e.Code+": "+e.Message+"\n")
	} else {
		body, _ = jsonw.Marshal(e)
		body = append(body, '\n')
	}
	h := "HTTP/1.1 400 Bad Request\r\nContent-Type: " + ct + "\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n"
	return append([]byte(h), body...)
}

// withoutBodies is read without the bodies (by Content-Length) of the
// requests net/http parsed before the one it failed, so that a body's text
// (a request's JSON, or anything that looks like a request line or a
// header) is not taken for the failed request. A request whose header
// does not end in read is the failed one: it and what follows are kept.
func withoutBodies(read string) string {
	var out strings.Builder
	for read != "" {
		head, rest, ok := strings.Cut(read, "\r\n\r\n")
		if !ok {
			break
		}
		n, chunked := 0, false
		for line := range strings.Lines(head) {
			name, value, ok := strings.Cut(strings.TrimRight(line, "\r\n"), ":")
			name, value = strings.TrimSpace(name), strings.TrimSpace(value)
			switch {
			case !ok:
			case strings.EqualFold(name, "Content-Length"):
				if v, err := strconv.Atoi(value); err == nil && v > 0 {
					n = v
				}
			case strings.EqualFold(name, "Transfer-Encoding"):
				chunked = strings.EqualFold(value, "chunked")
			}
		}
		if chunked {
			n = chunkedLen(rest)
		}
		if n < 0 || n > len(rest) {
			break
		}
		out.WriteString(head + "\r\n\r\n")
		read = rest[n:]
	}
	out.WriteString(read)
	return out.String()
}

// chunkedLen is the length of the chunked body (RFC 9112 section 7.1)
// at the start of s, trailer included, or -1 when s does not hold all of it.
func chunkedLen(s string) int {
	for i := 0; ; {
		line, _, ok := strings.Cut(s[i:], "\r\n")
		if !ok {
			return -1
		}
		i += len(line) + 2
		sizeText, _, _ := strings.Cut(line, ";")
		size, err := strconv.ParseInt(strings.TrimSpace(sizeText), 16, 64)
		if err != nil || size < 0 || size > int64(len(s)) {
			return -1
		}
		if size == 0 {
			for { // the trailer, to its blank line
				line, _, ok := strings.Cut(s[i:], "\r\n")
				if !ok {
					return -1
				}
				i += len(line) + 2
				if line == "" {
					return i
				}
			}
		}
		i += int(size) + 2
		if i > len(s) {
			return -1
		}
	}
}

// requestLineError names what is wrong in the first request line of read
// whose target url.ParseRequestURI refuses, and returns the header lines
// that follow it (those read).
func requestLineError(read, reason string) (api.Error, http.Header) {
	hdr := http.Header{}
	var found *api.Error
	for line := range strings.Lines(read) {
		line = strings.TrimRight(line, "\r\n")
		if found != nil {
			name, value, ok := strings.Cut(line, ":")
			if !ok {
				break // the blank line after the header, or what was not read
			}
			hdr.Add(strings.TrimSpace(name), strings.TrimSpace(value))
			continue
		}
		method, rest, ok := strings.Cut(line, " ")
		if !ok || method == "" || strings.Trim(method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
			continue // not a request line (a header's)
		}
		target, proto, ok := strings.Cut(rest, " ")
		if i := strings.LastIndexByte(rest, ' '); ok && !strings.HasPrefix(proto, "HTTP/") && strings.HasPrefix(rest[i+1:], "HTTP/") {
			// A target with a space in it (a key that is not
			// percent-encoded): the protocol is the last field.
			target, proto = rest[:i], rest[i+1:]
		}
		if !ok || !strings.HasPrefix(proto, "HTTP/") {
			continue
		}
		if _, err := url.ParseRequestURI(target); err == nil && !strings.Contains(target, " ") {
			continue
		}
		e := targetError(target)
		found = &e
	}
	if found == nil {
		return headerError(read, reason), lastHeader(read)
	}
	return *found, hdr
}

// lastHeader is the header of the last request in read (the one net/http
// failed), from the lines that are header fields, so that a header error
// answers in text to Accept: text/plain as a path error does.
func lastHeader(read string) http.Header {
	hdr, inHeader := http.Header{}, false
	for line := range strings.Lines(read) {
		line = strings.TrimRight(line, "\r\n")
		method, rest, _ := strings.Cut(line, " ")
		if _, proto, ok := strings.Cut(rest, " "); ok && strings.HasPrefix(proto, "HTTP/") && method != "" &&
			strings.Trim(method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == "" {
			hdr, inHeader = http.Header{}, true
			continue
		}
		if line == "" {
			inHeader = false
			continue
		}
		if name, value, ok := strings.Cut(line, ":"); ok && inHeader {
			hdr.Add(strings.TrimSpace(name), strings.TrimSpace(value))
		}
	}
	return hdr
}

// headerError names the header line of the last request in read that
// net/http refuses (a control character in its value, a name that is not
// a token), or the request as a whole.
func headerError(read, reason string) api.Error {
	var bad *api.Error
	inHeader := false
	hosts, lengths, sawRequest := 0, map[string]bool{}, false
	for line := range strings.Lines(read) {
		line = strings.TrimRight(line, "\r\n")
		method, rest, _ := strings.Cut(line, " ")
		if _, proto, ok := strings.Cut(rest, " "); ok && strings.HasPrefix(proto, "HTTP/") && method != "" &&
			strings.Trim(method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == "" {
			inHeader, bad = true, nil // a request line: its header follows
			hosts, lengths, sawRequest = 0, map[string]bool{}, true
			continue
		}
		if name, value, ok := strings.Cut(line, ":"); ok && inHeader {
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "host":
				hosts++
			case "content-length":
				lengths[strings.TrimSpace(value)] = true
			}
		}
		if !inHeader || bad != nil {
			continue
		}
		if line == "" {
			inHeader = false
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		switch {
		case !ok || name == "" || strings.ContainsFunc(name, func(r rune) bool { return !isTokenChar(r) }):
			bad = &api.Error{Code: api.CodeInvalidArgument, Field: "header", Message: fmt.Sprintf("header: the line %q is not a header field (name: value)", trimTo(line, 64))}
		default:
			if i := strings.IndexFunc(value, func(r rune) bool { return (r < 0x20 && r != '\t') || r == 0x7f }); i >= 0 {
				bad = &api.Error{Code: api.CodeInvalidArgument, Field: name, Message: fmt.Sprintf("%s: contains the control character %U", name, value[i])}
			}
		}
	}
	switch {
	case bad != nil:
		return *bad
	case reason == "" && hosts > 1:
		return api.Error{Code: api.CodeInvalidArgument, Field: "Host", Message: "Host: is given more than once (HTTP/1.1 needs exactly one)"}
	case reason == "" && len(lengths) > 1:
		return api.Error{Code: api.CodeInvalidArgument, Field: "Content-Length", Message: "Content-Length: is given more than once with different values"}
	case strings.Contains(reason, "Host header"):
		return api.Error{Code: api.CodeInvalidArgument, Field: "Host", Message: "Host: " + reason + " (HTTP/1.1 needs exactly one)"}
	case reason != "":
		return api.Error{Code: api.CodeInvalidArgument, Field: "request", Message: "request: is not a valid HTTP/1.1 request: " + reason}
	}
	if first, _, _ := strings.Cut(read, "\n"); !sawRequest && strings.Contains(first, " HTTP/1.") {
		// The end of a request line longer than the read buffer, whose
		// start net/http read before this (a target with a bad escape
		// or a control character in it).
		return api.Error{Code: api.CodeInvalidArgument, Field: "request", Message: "request: the request line is not valid and too long to name its fault (a key is at most 256 bytes)"}
	}
	return api.Error{Code: api.CodeInvalidArgument, Field: "request", Message: "request: is not a valid HTTP/1.1 request (a malformed request line or header)"}
}

// isTokenChar reports whether r may be in a header field's name (RFC 9110
// section 5.6.2).
func isTokenChar(r rune) bool {
	return r < 0x7f && r > 0x20 && !strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
}

// trimTo shortens s to at most n bytes, for a message.
func trimTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// targetError names what is wrong with a request target that
// url.ParseRequestURI refuses.
func targetError(target string) api.Error {
	path, query, _ := strings.Cut(target, "?")
	field, what := "path", "the path"
	if key, ok := strings.CutPrefix(path, "/locks/"); ok {
		field, what = "key", "the key"
		path = key
	}
	if i := badEscape(path); i >= 0 {
		bad := path[i:min(i+3, len(path))]
		return api.Error{Code: api.CodeInvalidArgument, Field: field, Message: field + ": has a bad percent-encoding (" +
			strconv.Quote(bad) + ": % must be followed by two hex digits; write % itself as %25)"}
	}
	if i := strings.IndexFunc(path, func(r rune) bool { return r < 0x20 || r == 0x7f }); i >= 0 {
		return api.Error{Code: api.CodeInvalidArgument, Field: field, Message: fmt.Sprintf("%s: contains the control character %U", field, path[i])}
	}
	if strings.Contains(path, " ") {
		return api.Error{Code: api.CodeInvalidArgument, Field: field, Message: field + ": contains a space; write it as %20"}
	}
	if strings.Contains(query, " ") {
		return api.Error{Code: api.CodeInvalidArgument, Field: "query", Message: "query: contains a space; write it as %20"}
	}
	return api.Error{Code: api.CodeInvalidArgument, Field: field, Message: field + ": is not a valid URL path (" + what + " must be percent-encoded)"}
}

// badEscape returns the index of the first % in s that two hex digits do
// not follow, or -1.
func badEscape(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && (i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2])) {
			return i
		}
	}
	return -1
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
