package cluster

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestWatchSilenceEndsOnlyAWaitingStream: a standby's stream ends once a
// read has waited for silenceLimit with nothing coming (a link gone
// silent: TestStandbyStreamResumesAfterALongCut), never while the bytes
// keep coming, nor while the standby itself is busy with what it read
// (a large snapshot to install) and waits for nothing.
func TestWatchSilenceEndsOnlyAWaitingStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &Node{cfg: Config{FailoverTimeout: 600 * time.Millisecond, Heartbeat: 100 * time.Millisecond}}
		body := &countingReader{r: strings.NewReader("")}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var ended atomic.Bool
		go n.watchSilence(ctx, body, func() { ended.Store(true) })

		// Busy for ten limits: no read waits.
		time.Sleep(10 * n.silenceLimit())
		synctest.Wait()
		if ended.Load() {
			t.Fatal("the stream ended while no read waited (the standby busy applying what it read)")
		}
		// A read waits, and bytes come every heartbeat.
		body.waiting.Store(true)
		for range 20 {
			time.Sleep(n.cfg.Heartbeat)
			body.reads.Add(1)
		}
		synctest.Wait()
		if ended.Load() {
			t.Fatal("the stream ended while bytes came every heartbeat")
		}
		// Nothing comes any more.
		time.Sleep(n.silenceLimit() - 2*n.cfg.Heartbeat)
		synctest.Wait()
		if ended.Load() {
			t.Fatalf("the stream ended before %v of silence", n.silenceLimit())
		}
		time.Sleep(3 * n.cfg.Heartbeat)
		synctest.Wait()
		if !ended.Load() {
			t.Fatalf("the stream did not end after %v of silence while a read waited", n.silenceLimit()+n.cfg.Heartbeat)
		}
	})
}
