package wal

import (
	"fmt"
	"io"
	"os"
	"time"
)

// Install replaces the whole log by a snapshot: every segment and
// snapshot is removed, the snapshot write gives is stored at index (none
// when index is 0: an empty state), and the log continues empty after it,
// its next record being index+1 (see AppendAt). A standby installs the
// active's snapshot so that its log holds the active's records at the
// active's indexes, and restarts from it. Records appended but not
// written are dropped (the caller must not wait for them). The new
// snapshot is written whole and synced before anything is removed, so
// that one that cannot be written (a full disk) leaves the log on disk as
// it was, for the next start to replay; the order of the removals is
// chosen so that a crash at any point leaves a log that starts at a
// snapshot this node held (the old, the new or none), never an old log's
// records after the new snapshot. Errors: ErrClosed, write's error, an
// I/O error: the log is then failed (Append refuses) until an Install
// succeeds.
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

	touched, err := l.install(index, write)

	l.mu.Lock()
	if err != nil {
		l.failed, l.failedAt = err, time.Now()
		l.installFailed = true
		l.stats.Healthy = false
	}
	l.leading = false
	l.wake()
	l.mu.Unlock()
	if old != nil && touched {
		_ = old.Close()
	}
	return err
}

// install does Install's file work; l.mu is not held, this goroutine is
// the writer. touched reports whether it removed any of the log's files
// (the active segment's among them): an error before leaves the log, its
// open segment too, as it was.
func (l *Log) install(index uint64, write func(io.Writer) error) (touched bool, err error) {
	l.segMu.Lock()
	segs := l.segs
	l.segMu.Unlock()
	entries, err := os.ReadDir(l.cfg.Dir)
	if err != nil {
		return false, fmt.Errorf("wal: install: %w", err)
	}
	// The new snapshot first, under its temporary name: nothing is
	// removed for one that cannot be written.
	snap, snapPath, tmp := uint64(0), l.path(fileName(index, snapshotExt)), ""
	if index > 0 {
		if tmp, err = l.writeSnapshotTmp(snapPath, index, write); err != nil {
			return false, err
		}
		snap = index
	}
	fail := func(err error) (bool, error) {
		if tmp != "" {
			os.Remove(tmp)
		}
		return true, err
	}
	// The newest segment named no higher than the one that begins the
	// new log, before any segment goes: a crash from here on must not
	// leave it naming one removed (see newestName).
	if err := l.lowerNewest(index + 1); err != nil {
		if tmp != "" {
			os.Remove(tmp)
		}
		return false, fmt.Errorf("wal: install: %w", err)
	}
	// Segments first, then snapshots: a crash in between leaves the old
	// snapshot alone, the state this node had at it. The new one is
	// renamed into place only after both.
	for _, s := range segs {
		if err := removeIfExists(s.path); err != nil {
			return fail(fmt.Errorf("wal: install: %w", err))
		}
	}
	for _, e := range entries {
		if _, ok := parseName(e.Name(), snapshotExt); ok {
			if err := removeIfExists(l.path(e.Name())); err != nil {
				return fail(fmt.Errorf("wal: install: %w", err))
			}
		}
	}
	if err := syncDir(l.cfg.Dir); err != nil {
		return fail(fmt.Errorf("wal: install: %w", err))
	}
	if tmp != "" {
		if err := l.publishSnapshot(tmp, snapPath, index); err != nil {
			return true, err
		}
	}
	f, seg, err := l.createSegment(index + 1)
	if err != nil {
		return true, err
	}
	if err := l.setNewest(index + 1); err != nil {
		l.log.Warn("wal: install: cannot name the new segment as the newest; were it removed, the next start would not see it", "dir", l.cfg.Dir, "file", seg.path, "err", err)
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
	return true, nil
}
