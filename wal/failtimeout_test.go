package wal

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

// TestFailTimeoutCountsFromTheFailure: Config.FailTimeout bounds how long
// a record appended before the failure waits for the log to recover,
// counted from the failure (FailTimeout's and ErrUnavailable's docs). Each
// Wait counted it from its own start, so a caller that waits for its
// records one after another (the native server settling a batch's grants,
// each by its own wait) waited FailTimeout for each: 4,350 acquires on one
// connection went unanswered for as long as the disk stayed full
// (breaker). A Wait that begins after FailTimeout has passed since the
// failure returns ErrUnavailable at once.
func TestFailTimeoutCountsFromTheFailure(t *testing.T) {
	fs := &faults{}
	cfg := testConfig(t, t.TempDir())
	cfg.WrapFile = fs.wrap
	cfg.FailTimeout = time.Hour // what each Wait would wait, counted from itself
	l := mustOpen(t, cfg)
	defer l.Close()
	appendWait(t, l, rec(1))

	fs.set(syscall.ENOSPC, nil)
	var idx []uint64
	for i := 2; i <= 4; i++ {
		n, err := l.Append(rec(i))
		if err != nil {
			t.Fatal(err)
		}
		idx = append(idx, n)
	}
	// The first write of them fails: the log is failed.
	l.mu.Lock()
	for l.failed == nil {
		if !l.leading {
			l.lead(false)
			continue
		}
		ch := l.notify
		l.mu.Unlock()
		<-ch
		l.mu.Lock()
	}
	// As if the failure were older than FailTimeout.
	l.failedAt = time.Now().Add(-2 * time.Hour)
	l.mu.Unlock()

	for _, i := range idx {
		done := make(chan error, 1)
		go func() { done <- l.Wait(i) }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Wait(%d) on a log failed longer than FailTimeout ago: %v, want ErrUnavailable", i, err)
			}
		case <-time.After(30 * time.Second):
			// The bound only turns the hour's wait into a failure.
			t.Fatalf("Wait(%d) on a log failed longer than FailTimeout ago is still waiting: it counts FailTimeout from its own start", i)
		}
	}
	fs.set(nil, nil)
}
