package cluster

import (
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-io/baton/engine"
)

// ackNode is a Node with only what waiting for acknowledgements uses:
// sync_standbys need, sync_timeout 1 s, and one stream per URL in urls,
// each sent up to index 100.
func ackNode(need int, urls ...string) *Node {
	n := &Node{cfg: Config{SyncStandbys: need, SyncTimeout: time.Second}, hub: newHub(need),
		quit: make(chan struct{}), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	n.watch = time.AfterFunc(time.Hour, n.watchAcks)
	n.watch.Stop()
	for _, u := range urls {
		f := newFollower(u)
		f.synced, f.sent = true, 100
		n.hub.add(f)
	}
	return n
}

// waiting starts waitAcked(index, nil) and returns a flag set when it returns.
func waiting(n *Node, index uint64) *atomic.Bool {
	var done atomic.Bool
	go func() {
		n.waitAcked(index, nil)
		done.Store(true)
	}()
	return &done
}

// An acknowledgement wakes the changes it covers and no other; each
// standby counts once, whatever its streams; a change waits no longer
// than sync_timeout, then the node degrades and nothing waits.
func TestAckWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := ackNode(1, "http://a")
		w3, w5, w8 := waiting(n, 3), waiting(n, 5), waiting(n, 8)
		synctest.Wait()
		n.hub.ack("http://a", 5)
		n.wakeAcked()
		synctest.Wait()
		if !w3.Load() || !w5.Load() || w8.Load() {
			t.Fatalf("acknowledged up to 5: index 3 done %v, 5 done %v, 8 done %v; want true, true, false", w3.Load(), w5.Load(), w8.Load())
		}
		if len(n.ackWaits) != 1 {
			t.Fatalf("%d changes wait, want 1", len(n.ackWaits))
		}
		n.waitAcked(4, nil) // acknowledged already: returns at once
		n.hub.ack("http://a", 8)
		n.wakeAcked()
		synctest.Wait()
		if !w8.Load() || n.degraded.Load() {
			t.Fatalf("acknowledged up to 8: index 8 done %v, degraded %v", w8.Load(), n.degraded.Load())
		}
		n.stopAcks()
	})
	synctest.Test(t, func(t *testing.T) {
		// Two streams of one standby (a reconnection) are one standby.
		n := ackNode(2, "http://a", "http://a", "http://b")
		w := waiting(n, 7)
		synctest.Wait()
		n.hub.ack("http://a", 9)
		n.wakeAcked()
		synctest.Wait()
		if w.Load() {
			t.Fatal("sync_standbys 2: answered with one standby's acknowledgement (on two streams)")
		}
		n.hub.ack("http://b", 7)
		n.wakeAcked()
		synctest.Wait()
		if !w.Load() {
			t.Fatal("sync_standbys 2: not answered with both standbys' acknowledgements")
		}
		n.stopAcks()
	})
	synctest.Test(t, func(t *testing.T) {
		n := ackNode(1, "http://a")
		start := time.Now()
		w1 := waiting(n, 10)
		time.Sleep(600 * time.Millisecond)
		w2 := waiting(n, 11)
		synctest.Wait()
		time.Sleep(399 * time.Millisecond)
		synctest.Wait()
		if w1.Load() || w2.Load() || n.degraded.Load() {
			t.Fatalf("before sync_timeout: done %v %v, degraded %v", w1.Load(), w2.Load(), n.degraded.Load())
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if !w1.Load() || !w2.Load() || !n.degraded.Load() {
			t.Fatalf("sync_timeout after the first wait began: done %v %v, degraded %v", w1.Load(), w2.Load(), n.degraded.Load())
		}
		if d := time.Since(start); d != time.Second {
			t.Fatalf("degraded after %v, want sync_timeout (1s)", d)
		}
		n.waitAcked(12, nil) // degraded: returns at once
		n.stopAcks()
	})
	synctest.Test(t, func(t *testing.T) {
		// Close: a change waiting goes on.
		n := ackNode(1, "http://a")
		w := waiting(n, 10)
		synctest.Wait()
		close(n.quit)
		n.stopAcks()
		synctest.Wait()
		if !w.Load() || n.degraded.Load() {
			t.Fatalf("after Close: done %v, degraded %v", w.Load(), n.degraded.Load())
		}
	})
}

// A handoff demotes the engine before the successor applies the stream
// through the last record and promotes itself: the changes made just
// before, still waiting for their acknowledgements, are woken by the
// acknowledgements that come meanwhile, as on an active, instead of
// waiting sync_timeout and degrading the node for nothing.
func TestAckWakesTheChangesOfADemotedEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := ackNode(1, "http://a")
		eng, err := engine.New(engine.Config{Standby: true, DataDir: ""}) // as Demote leaves it
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		n.eng = eng
		w := waiting(n, 5)
		synctest.Wait()
		n.ack("http://a", 5)
		synctest.Wait()
		if !w.Load() || n.degraded.Load() {
			t.Errorf("acknowledged up to 5 after the engine was demoted: done %v, degraded %v; want done, not degraded", w.Load(), n.degraded.Load())
		}
		close(n.quit) // a change still waiting goes on
		n.stopAcks()
		synctest.Wait()
	})
}

// A change waiting for its acknowledgements when the node steps down goes
// on at once, without degrading the node, and is answered ErrSteppedDown:
// the acknowledgements of the term the node may take back, at the same
// indexes, are no acknowledgement of it (found by a tester: a renewal
// pending at a SIGSTOP of the active was answered 200 after the node took
// the role back by a handoff). A change whose wait begins after the
// step-down, and is acknowledged, is answered as made.
func TestAckWaitSpanningAStepDownIsNotWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := ackNode(1, "http://a")
		eng, err := engine.New(engine.Config{Shards: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		n.eng = eng
		l := &SyncLog{}
		l.node.Store(n)
		var before atomic.Value
		go func() { before.Store(errBox{l.acked(5, l.term())}) }()
		synctest.Wait()
		n.eng.Diverged() // as stepDownLocked does
		n.releaseAcks()
		synctest.Wait()
		got, _ := before.Load().(errBox)
		if got.err != ErrSteppedDown || n.degraded.Load() {
			t.Fatalf("a wait spanning a step-down: %v (degraded %v), want ErrSteppedDown at once, not degraded", got.err, n.degraded.Load())
		}
		var after atomic.Value
		go func() { after.Store(errBox{l.acked(5, l.term())}) }()
		synctest.Wait()
		n.hub.ack("http://a", 5)
		n.wakeAcked()
		synctest.Wait()
		if got, ok := after.Load().(errBox); !ok || got.err != nil {
			t.Fatalf("a wait of the new term, acknowledged: %v (answered %v), want nil", got.err, ok)
		}
		n.stopAcks()
	})
}

// A change made before a step-down whose wait for acknowledgements
// begins only after it (after releaseAcks: the log wait took that long)
// does not wait: it is answered ErrSteppedDown at once, without waiting
// sync_timeout for acknowledgements that will not come, and without
// degrading the node for nothing.
func TestAckWaitBegunAfterAStepDownDoesNotWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := ackNode(1, "http://a")
		eng, err := engine.New(engine.Config{Shards: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		n.eng = eng
		l := &SyncLog{}
		l.node.Store(n)
		term := l.term() // the change's wait began (its log write)
		n.eng.Diverged() // as stepDownLocked does
		n.releaseAcks()
		var got atomic.Value
		go func() { got.Store(errBox{l.acked(5, term)}) }()
		synctest.Wait()
		res, ok := got.Load().(errBox)
		if !ok || res.err != ErrSteppedDown || n.degraded.Load() {
			t.Fatalf("a wait for acknowledgements begun after the step-down: answered %v, %v (degraded %v); want ErrSteppedDown at once, not degraded", ok, res.err, n.degraded.Load())
		}
		n.stopAcks()
	})
}

// errBox lets an atomic.Value hold a nil error.
type errBox struct{ err error }

// A handoff ends the streams (moveAll) once the successor has promoted
// itself; an acknowledgement a standby sent before that may arrive after.
// It was dropped (no stream of that URL any more), so the changes made
// just before the engine was demoted waited sync_timeout and degraded the
// node for nothing. It counts now, and the successor's promotion counts
// as its acknowledgement through the index it applied.
func TestAckArrivingAfterAHandoffMovedTheStreamsCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := ackNode(2, "http://a", "http://b")
		eng, err := engine.New(engine.Config{Standby: true, DataDir: ""}) // as Demote leaves it
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		n.eng = eng
		n.ack("http://b", 3)
		w := waiting(n, 5)
		synctest.Wait()
		n.hub.moveAll("http://a", 2, 5) // a promoted with everything through 5
		n.wakeAcked()
		synctest.Wait()
		if w.Load() {
			t.Fatalf("woken with one standby of two at 5")
		}
		n.ack("http://b", 5) // sent before the handoff ended, read after
		synctest.Wait()
		if !w.Load() || n.degraded.Load() {
			t.Errorf("acknowledged by b after the streams moved, and by a's promotion: done %v, degraded %v; want done, not degraded", w.Load(), n.degraded.Load())
		}
		close(n.quit)
		n.stopAcks()
		synctest.Wait()
	})
}

// A stream that passed serveStream's active check just before this node
// handed off or stepped down is refused (hub.add reports false) until the
// node is promoted again: before, it was added to the hub after moveAll,
// cleared what the handoff left (the successor's acknowledgement, so the
// changes made before the demotion waited sync_timeout and degraded the
// node for nothing) and streamed on from a node no longer the active.
func TestStreamAddedAfterTheHubEndedIsRefused(t *testing.T) {
	n := ackNode(1, "http://a")
	n.hub.moveAll("http://a", 2, 50)
	if n.hub.add(newFollower("http://b")) {
		t.Errorf("a stream added after the handoff moved the streams: accepted, want refused")
	}
	if got := n.hub.ackedTo.Load(); got != 50 {
		t.Errorf("after the late stream: acknowledged to %d, want 50 (the successor's promotion still counts)", got)
	}
	n.hub.newTerm()
	if !n.hub.add(newFollower("http://b")) {
		t.Errorf("a stream added once promoted again: refused, want accepted")
	}
	n.hub.closeAll()
	if n.hub.add(newFollower("http://b")) {
		t.Errorf("a stream added after a step-down closed the streams: accepted, want refused")
	}
}
