package wal

import (
	"fmt"
	"io"
	"os"
)

// Install replaces the whole log by a snapshot: every segment and
// snapshot is removed, the snapshot write gives is stored at index (none
// when index is 0: an empty state), and the log continues empty after it,
// its next record being index+1 (see AppendAt). A standby installs the
// active's snapshot so that its log holds the active's records at the
// active's indexes, and restarts from it. Records appended but not
// written are dropped (the caller must not wait for them). The order of the
// removals is chosen so that a crash at any point leaves a log that
// starts at a snapshot this node held (the old, the new or none), never
// an old log's records after the new snapshot. Errors: ErrClosed, write's
// error, an I/O error: the log is then failed (Append refuses) until an
// Install succeeds.
func (l *Log) Install(index uint64, write func(io.Writer) error) error {
	l.snapMu.Lock()
	defer l.snapMu.Unlock()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	l.awaitNoWriter()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	// This goroutine is the writer from here on: no other writes.
	l.leading = true
	old := l.active
	l.buf, l.bufFirst = l.buf[:0], l.next
	l.mu.Unlock()

	err := l.install(index, write)

	l.mu.Lock()
	if err != nil {
		l.failed = err
		l.installFailed = true
		l.stats.Healthy = false
	}
	l.leading = false
	l.wake()
	l.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	return err
}

// install does Install's file work; l.mu is not held, this goroutine is
// the writer.
func (l *Log) install(index uint64, write func(io.Writer) error) error {
	l.segMu.Lock()
	segs := l.segs
	l.segMu.Unlock()
	entries, err := os.ReadDir(l.cfg.Dir)
	if err != nil {
		return fmt.Errorf("wal: install: %w", err)
	}
	// Segments first, then snapshots: a crash in between leaves the old
	// snapshot alone, the state this node had at it.
	for _, s := range segs {
		if err := removeIfExists(s.path); err != nil {
			return fmt.Errorf("wal: install: %w", err)
		}
	}
	for _, e := range entries {
		if _, ok := parseName(e.Name(), snapshotExt); ok {
			if err := removeIfExists(l.path(e.Name())); err != nil {
				return fmt.Errorf("wal: install: %w", err)
			}
		}
	}
	if err := syncDir(l.cfg.Dir); err != nil {
		return fmt.Errorf("wal: install: %w", err)
	}
	snap := uint64(0)
	if index > 0 {
		if err := l.writeSnapshot(l.path(fileName(index, snapshotExt)), index, write); err != nil {
			return err
		}
		snap = index
	}
	f, seg, err := l.createSegment(index + 1)
	if err != nil {
		return err
	}
	l.segMu.Lock()
	l.segs, l.snapIndex = []segment{seg}, snap
	l.segMu.Unlock()
	l.mu.Lock()
	l.active = f
	l.next, l.bufFirst = index+1, index+1
	l.synced = index
	l.setWritten(index)
	l.writeOff, l.syncOff = headerSize, headerSize
	l.allocEnd = headerSize // a new segment: nothing written ahead yet
	l.retained = l.retained[:0]
	l.failed, l.removed, l.installFailed = nil, nil, false
	l.stats.Healthy = true
	l.mu.Unlock()
	return nil
}
