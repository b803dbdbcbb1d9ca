package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// progress draws one self-overwriting status line on stderr while a run
// goes on, when stderr is a terminal (or --progress=on).
type progress struct {
	out     io.Writer
	enabled bool
	ops     atomic.Int64
	errs    atomic.Int64
	phase   atomic.Pointer[string]

	mu    sync.Mutex
	label string
	start time.Time
	stopc chan struct{}
	done  chan struct{}
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// newProgress returns a progress line; mode is "auto", "on" or "off".
func newProgress(mode string) *progress {
	en := mode == "on" || (mode == "auto" && isTerminal(os.Stderr))
	return &progress{out: os.Stderr, enabled: en}
}

// setPhase names what the run is doing now ("queueing", "draining"...).
func (p *progress) setPhase(s string) { p.phase.Store(&s) }

// begin starts the line for one run.
func (p *progress) begin(label string) {
	p.ops.Store(0)
	p.errs.Store(0)
	p.setPhase("")
	if !p.enabled {
		return
	}
	p.mu.Lock()
	p.label, p.start = label, time.Now()
	p.stopc, p.done = make(chan struct{}), make(chan struct{})
	p.mu.Unlock()
	go p.loop(p.stopc, p.done)
}

func (p *progress) loop(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	var lastOps int64
	last := time.Now()
	for {
		select {
		case <-stop:
			fmt.Fprint(p.out, "\r\033[K")
			return
		case nt := <-t.C:
			ops := p.ops.Load()
			rate := float64(ops-lastOps) / nt.Sub(last).Seconds()
			lastOps, last = ops, nt
			fmt.Fprintf(p.out, "\r\033[K%s  %5.1fs  ops=%d (%.0f/s)  errors=%d  %s",
				p.label, time.Since(p.start).Seconds(), ops, rate, p.errs.Load(), *p.phase.Load())
		}
	}
}

// end erases the line.
func (p *progress) end() {
	if !p.enabled {
		return
	}
	close(p.stopc)
	<-p.done
}
