package handlers_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// h2Frame is one HTTP/2 frame as read off the wire.
type h2Frame struct {
	typ, flags byte
	stream     uint32
	payload    []byte
}

// HTTP/2 frame types, flags and error codes (RFC 9113).
const (
	h2Data        = 0x0
	h2Headers     = 0x1
	h2RSTStream   = 0x3
	h2Settings    = 0x4
	h2Ping        = 0x6
	h2GoAway      = 0x7
	h2Ack         = 0x1
	h2EndStream   = 0x1
	h2EndHeaders  = 0x4
	h2ProtocolErr = 0x1
	h2RefusedErr  = 0x7
)

// rawH2 is a bare h2c connection that writes frames by hand, so that it
// can do what no HTTP/2 library does: open more streams than the node's
// SETTINGS allow.
type rawH2 struct {
	t      *testing.T
	conn   net.Conn
	frames chan h2Frame
}

func dialRawH2(t *testing.T, addr string) *rawH2 {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := &rawH2{t: t, conn: conn, frames: make(chan h2Frame, 4096)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(r.frames)
		br := bufio.NewReader(conn)
		for {
			var h [9]byte
			if _, err := io.ReadFull(br, h[:]); err != nil {
				return
			}
			f := h2Frame{typ: h[3], flags: h[4], stream: binary.BigEndian.Uint32(h[5:]) & 0x7fffffff}
			f.payload = make([]byte, int(h[0])<<16|int(h[1])<<8|int(h[2]))
			if _, err := io.ReadFull(br, f.payload); err != nil {
				return
			}
			r.frames <- f
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		<-done
	})
	if _, err := io.WriteString(conn, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r.write(h2Settings, 0, 0, nil)
	return r
}

func (r *rawH2) write(typ, flags byte, stream uint32, payload []byte) {
	r.t.Helper()
	b := make([]byte, 9, 9+len(payload))
	b[0], b[1], b[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	b[3], b[4] = typ, flags
	binary.BigEndian.PutUint32(b[5:], stream)
	if _, err := r.conn.Write(append(b, payload...)); err != nil {
		r.t.Fatal(err)
	}
}

// post opens stream with POST path (HPACK: indexed :method POST and
// :scheme http, literal :path and :authority with indexed names).
func (r *rawH2) post(stream uint32, path string) {
	r.t.Helper()
	block := []byte{0x83, 0x86, 0x04, byte(len(path))}
	block = append(block, path...)
	block = append(block, 0x01, 4, 'n', 'o', 'd', 'e')
	r.write(h2Headers, h2EndStream|h2EndHeaders, stream, block)
}

// next returns the next frame that match accepts, failing on a GOAWAY
// (the node gave up the connection) or after bound.
func (r *rawH2) next(what string, match func(h2Frame) bool) h2Frame {
	r.t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case f, ok := <-r.frames:
			if !ok {
				r.t.Fatalf("%s: the node closed the connection", what)
			}
			if f.typ == h2GoAway {
				r.t.Fatalf("%s: GOAWAY, error code %d", what, binary.BigEndian.Uint32(f.payload[4:8]))
			}
			if match(f) {
				return f
			}
		case <-timeout:
			r.t.Fatalf("%s: no such frame", what)
		}
	}
}

func (r *rawH2) reset(stream uint32) uint32 {
	r.t.Helper()
	f := r.next("RST_STREAM", func(f h2Frame) bool { return f.typ == h2RSTStream && f.stream == stream })
	return binary.BigEndian.Uint32(f.payload)
}

// What a node does with a stream past its limit of concurrent streams per
// connection (MaxConcurrentStreams of NewHTTPServer), as Go's HTTP/2
// server decides it (RFC 9113 section 5.1.2 allows either code): while the
// client has not acknowledged the node's SETTINGS, it refuses the stream
// with REFUSED_STREAM, which clients retry (the only way a client that
// follows the protocol can exceed the limit: it did not know it yet);
// once the client has acknowledged the limit and still exceeds it, a
// PROTOCOL_ERROR reset of that stream. Either way only that stream ends:
// the connection and its parked acquires stay.
func TestStreamPastTheLimit(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	e.acquire("/locks/held?lease=60")
	limit := uint32(e.srv.Config.HTTP2.MaxConcurrentStreams)
	if limit != 1000 {
		t.Fatalf("MaxConcurrentStreams %d, want 1000", limit)
	}
	r := dialRawH2(t, e.srv.Listener.Addr().String())

	// The node's SETTINGS not acknowledged yet: limit acquires park, the
	// next stream is refused.
	for i := range limit + 1 {
		r.post(2*i+1, "/locks/held")
	}
	past := 2*limit + 1
	if code := r.reset(past); code != h2RefusedErr {
		t.Fatalf("stream %d past the limit (SETTINGS not acknowledged): reset code %d, want REFUSED_STREAM (7)", limit+1, code)
	}
	e.waitWaiters("held", int(limit))

	// Acknowledged: a stream past the limit now is a protocol error of
	// that stream alone.
	r.write(h2Settings, h2Ack, 0, nil)
	r.post(past+2, "/locks/held")
	if code := r.reset(past + 2); code != h2ProtocolErr {
		t.Fatalf("stream past the acknowledged limit: reset code %d, want PROTOCOL_ERROR (1)", code)
	}
	r.write(h2Ping, 0, 0, []byte("baton-ok"))
	r.next("PING ack", func(f h2Frame) bool { return f.typ == h2Ping && f.flags&h2Ack != 0 })
	if st := e.status("held"); st.Waiters != int(limit) {
		t.Fatalf("%d waiters after the refusals, want %d", st.Waiters, limit)
	}
}

// A grant over HTTP/2 is a HEADERS frame, then one DATA frame that holds
// the whole body and ends the stream: the node flushes the headers alone
// (a client gone is seen there) and leaves the body to the handler's end.
// Flushing the whole answer sent the body in a DATA frame that did not end
// the stream and an empty one after the handler returned: one more wait
// for the connection's writer per answer, and the client's answer
// complete only at the third frame (issue 14, a batch of readers granted
// at once on one connection).
func TestGrantOverHTTP2EndsWithItsBody(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	r := dialRawH2(t, e.srv.Listener.Addr().String())
	r.post(1, "/locks/k?lease=60")
	hdr := r.next("the grant's HEADERS", func(f h2Frame) bool { return f.typ == h2Headers && f.stream == 1 })
	if hdr.flags&h2EndStream != 0 {
		t.Fatal("the grant's HEADERS frame ends the stream: no body")
	}
	data := r.next("the grant's DATA", func(f h2Frame) bool { return f.typ == h2Data && f.stream == 1 })
	if data.flags&h2EndStream == 0 || !bytes.Contains(data.payload, []byte(`"token":`)) {
		t.Fatalf("the grant's first DATA frame: flags %#x, %q; want the whole body, ending the stream", data.flags, data.payload)
	}
	if st := e.status("k"); st.Holder == nil {
		t.Fatalf("status %+v: the grant is not held", st)
	}
}
