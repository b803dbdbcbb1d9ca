package cluster_test

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// TestProxyHoldsBackOneLink checks the harness's proxy: a hold on the
// replication stream of one standby, node to client only, keeps that
// connection's answer back while its request still reaches the node and
// while another connection (a poll) goes both ways; release forwards what
// was held; a cut ends a held connection.
func TestProxyHoldsBackOneLink(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 4) // request lines the node received
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					got <- strings.TrimSpace(line)
					if _, err := c.Write([]byte("answer to " + line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	p := newProxy(t, "127.0.0.1:0", ln.Addr().String())
	defer p.close()

	const standby = "http://127.0.0.2:7001"
	p.hold(streamOf(standby), false, true)
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	stream, sr := dial()
	streamLine := "GET /_cluster/stream?from=" + strings.ReplaceAll(strings.ReplaceAll(standby, ":", "%3A"), "/", "%2F") + "&last_token=0 HTTP/1.1"
	if _, err := stream.Write([]byte(streamLine + "\n")); err != nil {
		t.Fatal(err)
	}
	if line := <-got; line != streamLine {
		t.Fatalf("the node received %q, want the stream request %q", line, streamLine)
	}
	poll, pr := dial()
	if _, err := poll.Write([]byte("GET /_cluster/status HTTP/1.1\n")); err != nil {
		t.Fatal(err)
	}
	<-got
	if a, err := pr.ReadString('\n'); err != nil || a != "answer to GET /_cluster/status HTTP/1.1\n" {
		t.Fatalf("poll during the hold: %q %v; want its answer", a, err)
	}
	// The stream's answer was written by the node before the poll's; it
	// has not come through.
	_ = stream.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if a, err := sr.ReadString('\n'); err == nil {
		t.Fatalf("the held stream delivered %q", a)
	}
	_ = stream.SetReadDeadline(time.Time{})
	p.release()
	if a, err := sr.ReadString('\n'); err != nil || a != "answer to "+streamLine+"\n" {
		t.Fatalf("after release the stream read %q %v; want its held answer", a, err)
	}

	// A hold in both directions, then a cut: the held connection ends.
	p.hold(nil, true, true)
	if _, err := stream.Write([]byte("held\n")); err != nil {
		t.Fatal(err)
	}
	p.setCut(true)
	if a, err := sr.ReadString('\n'); err == nil {
		t.Fatalf("the cut connection delivered %q", a)
	}
	select {
	case line := <-got:
		t.Fatalf("the node received %q, held and then cut", line)
	default:
	}
}
