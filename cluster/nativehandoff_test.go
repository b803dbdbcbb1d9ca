package cluster_test

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/testproc"
)

// TestNativeHandoffAnswersTheSuccessor: a native acquire parked on the
// active when it is stopped (SIGINT: a graceful handoff, SPEC section 3)
// is answered M with the successor's native address, as an HTTP waiter is
// redirected there, and repeated there with its id it keeps its place.
// Before, it was answered "E unavailable" the moment the old active was
// demoted, a few milliseconds before the successor served, and the Go
// client paused a second before it asked again (HTTP's redirect waits
// for the successor: handlers' Gate.ActiveURL).
func TestNativeHandoffAnswersTheSuccessor(t *testing.T) {
	c := newCluster(t, 2, false)
	native := []string{freeAddr(t, nodeHost(0)), freeAddr(t, nodeHost(1))}
	c.args = map[int][]string{0: {"--native-listen", native[0]}, 1: {"--native-listen", native[1]}}
	c.startAll()
	c.waitActive(0, 1)
	held := c.acquire(0, "nh", "lease=60")

	w := dialLine(t, native[0])
	w.send("A nh 60 - id=parked")
	deadline := time.Now().Add(15 * time.Second)
	for c.waitersOn(0, "nh") != 1 || c.waitersOn(1, "nh") != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the native waiter is not queued on both nodes (active %d, standby %d)", c.waitersOn(0, "nh"), c.waitersOn(1, "nh"))
		}
		time.Sleep(20 * time.Millisecond)
	}

	c.signal(0, syscall.SIGINT)
	if line := w.read(); line != "A nh M "+native[1] {
		t.Fatalf("the acquire parked on the active at its handoff was answered %q, want A nh M %s (the successor)", line, native[1])
	}
	c.waitActive(1)
	r := dialLine(t, native[1])
	r.send("A nh 60 - id=parked")
	// The reader answers P after it has queued the acquire before it: the
	// count below is taken after the repeat, not before (when the kept
	// place alone makes it 1 too).
	r.send("P queued")
	if line := r.read(); line != "P queued OK" {
		t.Fatalf("got %q, want P queued OK", line)
	}
	if n := c.waitersOn(1, "nh"); n != 1 {
		t.Fatalf("%d waiters on the successor after the repeat, want the one place kept", n)
	}
	c.release(1, "nh", held.Token)
	f := strings.Fields(r.read())
	if len(f) != 6 || f[0] != "A" || f[1] != "nh" || f[2] != "OK" {
		t.Fatalf("the repeat on the successor got %q, want a grant", strings.Join(f, " "))
	}
	if tok, err := strconv.ParseUint(f[3], 10, 64); err != nil || tok <= held.Token {
		t.Fatalf("granted token %s, want one above the holder's %d", f[3], held.Token)
	}
}

// lineConn is a raw native protocol connection.
type lineConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialLine(t *testing.T, addr string) *lineConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &lineConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *lineConn) send(line string) {
	c.t.Helper()
	if _, err := c.nc.Write([]byte(line + "\n")); err != nil {
		c.t.Fatal(err)
	}
}

// read returns the next line; a bound turns a hang into a failure.
func (c *lineConn) read() string {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	line, err := c.br.ReadString('\n')
	if err != nil {
		c.t.Fatalf("native read: %v (%q)", err, line)
	}
	return strings.TrimSuffix(line, "\n")
}

// TestNativeHandoffLeavesNoGhost: a native acquire without an id parked
// on the active at its handoff cannot keep its place (M names only the
// successor's address; HTTP's 307 carries the waiter's ticket), so its
// repeat queues anew there. Its old place must not stay behind as a
// ghost that no repeat can ever claim: granted to nobody, it held the
// lock idle for poll_grace (5 s) when the holder released, ahead of the
// repeat and of every waiter behind it.
func TestNativeHandoffLeavesNoGhost(t *testing.T) {
	c := newCluster(t, 2, false)
	native := []string{freeAddr(t, nodeHost(0)), freeAddr(t, nodeHost(1))}
	c.args = map[int][]string{0: {"--native-listen", native[0]}, 1: {"--native-listen", native[1]}}
	c.startAll()
	c.waitActive(0, 1)
	held := c.acquire(0, "ng", "lease=60")

	w := dialLine(t, native[0])
	w.send("A ng 60 -")
	deadline := time.Now().Add(15 * time.Second)
	for c.waitersOn(0, "ng") != 1 || c.waitersOn(1, "ng") != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the native waiter is not queued on both nodes (active %d, standby %d)", c.waitersOn(0, "ng"), c.waitersOn(1, "ng"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.signal(0, syscall.SIGINT)
	if line := w.read(); !strings.HasPrefix(line, "A ng M ") {
		t.Fatalf("the parked acquire got %q at the handoff, want M", line)
	}
	c.waitActive(1)
	r := dialLine(t, native[1])
	r.send("A ng 60 -")
	// The reader answers P after it has queued the acquire before it (a
	// count of 1 before the repeat would be the ghost alone).
	r.send("P queued")
	if line := r.read(); line != "P queued OK" {
		t.Fatalf("got %q, want P queued OK", line)
	}
	if n := c.waitersOn(1, "ng"); n != 1 {
		t.Fatalf("%d waiters on the successor after the repeat without an id, want 1 (the repeat; the moved place, which no repeat can claim, gone)", n)
	}
	c.release(1, "ng", held.Token)
	st := c.lockStatus(1, "ng")
	f := strings.Fields(r.read())
	if len(f) != 6 || f[2] != "OK" || st.Holder == nil || f[3] != strconv.FormatUint(st.Holder.Token, 10) {
		t.Fatalf("after the release the holder is %+v and the repeat got %q; want the repeat granted first", st.Holder, strings.Join(f, " "))
	}
}

// TestHandoffDeliversTheNativeAnswersQueuedAtIt: a native client that
// pipelined acquires of free keys and was not reading when the active
// handed off (SIGINT) still gets, once it reads, the grants queued for
// it on the old active: the successor holds them. Before, the old
// active's role loop had ended with the handoff, and a failover timeout
// later the node took itself for one resumed from a pause: the grants
// still queued (2,048, the queue's half) were answered "E unavailable"
// and their locks stayed held on the successor for nobody (a verifier's
// report).
func TestHandoffDeliversTheNativeAnswersQueuedAtIt(t *testing.T) {
	c := newCluster(t, 2, false)
	native := []string{freeAddr(t, nodeHost(0)), freeAddr(t, nodeHost(1))}
	c.args = map[int][]string{0: {"--native-listen", native[0]}, 1: {"--native-listen", native[1]}}
	c.startAll()
	c.waitActive(0, 1)
	nc := testproc.DialSmallReceive(t, native[0], 4096)
	flood := testproc.AcquireLines("qh-", 100_000, 60)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer nc.Close() // before the wait: it ends a write still blocked
	wg.Go(func() {
		_ = nc.SetWriteDeadline(time.Now().Add(60 * time.Second))
		_, _ = nc.Write(flood)
	})
	// Not reading: the node's answers back up, in its socket and in the
	// connection's queue, and it stops taking lines (its count of keys
	// stops growing); then the handoff, before the node's second of
	// patience with a client that does not read runs out.
	ac0, err := api.NewClient(api.Config{Addresses: []string{"http://" + c.nodes[0].listen}})
	if err != nil {
		t.Fatal(err)
	}
	defer ac0.Close()
	deadline := time.Now().Add(60 * time.Second)
	for last, same := -1, 0; same < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("the node never stopped taking the pipelined acquires (%d keys)", last)
		}
		time.Sleep(100 * time.Millisecond)
		page, err := ac0.ListPage(context.Background(), api.ListOptions{Prefix: "qh-", Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if page.Total == last && last > 0 {
			same++
		} else {
			last, same = page.Total, 0
		}
	}
	c.signal(0, syscall.SIGINT)
	c.waitActive(1)
	// Past the failover timeout (1 s) from the handoff, within the 2 s the
	// old active keeps writing and holding its connections as it closes.
	time.Sleep(1500 * time.Millisecond)
	got, refused := testproc.ReadAcquireAnswers(nc, time.Now().Add(30*time.Second))
	held := 0
	var lost []string
	ac, err := api.NewClient(api.Config{Addresses: []string{"http://" + c.nodes[1].listen}})
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	for after := ""; ; {
		page, err := ac.ListPage(context.Background(), api.ListOptions{Prefix: "qh-", After: after, Limit: 10_000})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range page.Locks {
			if l.Holder == nil {
				continue
			}
			held++
			if !got[l.Key] {
				lost = append(lost, l.Key)
			}
		}
		if len(page.Locks) < 10_000 {
			break
		}
		after = page.Locks[len(page.Locks)-1].Key
	}
	t.Logf("read %d grants, %d refusals; the successor holds %d of the keys", len(got), len(refused), held)
	if len(lost) > 0 {
		t.Errorf("the successor holds %d locks whose grants the client never read, e.g. %s", len(lost), lost[0])
	}
	for _, r := range refused[:min(len(refused), 3)] {
		t.Errorf("an acquire granted before the handoff was answered %q", r)
	}
	if len(got) == 0 {
		t.Error("the client read no grant")
	}
}
