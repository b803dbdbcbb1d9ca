package main

import (
	"errors"
	"io"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/baton-io/baton/wal"
)

// Snapshot policy of a node's log: a snapshot is taken once the log has
// grown by snapshotMinBytes and by as much as the last snapshot's size
// since it, checked every snapshotCheck. The disk then holds the newest
// snapshot, about as much log again, and the segment being written: it is
// bounded by the live state, not by history. Variables for tests only.
var (
	snapshotMinBytes uint64 = 16 << 20
	snapshotCheck           = time.Second
)

// segmentSize is the size of the log's segments: that of the growth that
// allows a snapshot, so that the segments a snapshot covers, which it
// removes, free the disk in steps of that size. A variable for tests only.
var segmentSize int64 = 16 << 20

// snapshotter saves snapshots of a node's state into its log in the
// background (wal.Log.SaveSnapshot, which then removes the segments the
// snapshot replaces). It is owned by the Node: started by OpenNode,
// stopped by Close before the log is closed.
type snapshotter struct {
	l        *wal.Log
	dump     func(w io.Writer) error // writes the state that holds every record up to the log's last index
	log      *slog.Logger
	minBytes uint64        // growth of the log that allows a snapshot
	every    time.Duration // how often the growth is checked

	mu       sync.Mutex // one snapshot at a time; guards the fields below
	index    uint64     // the log index of the last snapshot (0: none yet)
	atBytes  uint64     // wal Stats.Bytes when it was taken
	lastSize uint64     // its size in bytes
	// failedSince is when the first of the snapshots failing since the
	// last one saved failed (zero: the last one did not fail); failures
	// counts them. Only the first failure and the recovery are logged.
	failedSince time.Time
	failures    int
	// need is, after a snapshot failed for want of space (ENOSPC), the
	// room in the log's directory the next one waits for: the state's
	// size, measured once, and some slack (0: none awaited). An attempt
	// fills the disk the log writes to until it fails: tried at every
	// check, each one failed the log's writes beside it (503s) and none
	// could succeed while the log kept growing.
	need uint64

	stop chan struct{}
	done chan struct{}
}

// snapshotStart is where a node's log stands when its snapshotter starts.
type snapshotStart struct {
	index   uint64 // the index of the snapshot loaded at start (0: none)
	size    uint64 // its size in bytes
	pending uint64 // bytes of log records after it, replayed at start
	// reach is the highest shard dump index of that snapshot: its state
	// holds the records of some shards up to there (0: none).
	reach uint64
}

// startSnapshotter starts the background snapshots of l from the state at
// start; dump writes the state (see snapshotter.dump). Stop it with close.
func startSnapshotter(l *wal.Log, dump func(io.Writer) error, log *slog.Logger, minBytes uint64, every time.Duration, at snapshotStart) *snapshotter {
	s := &snapshotter{l: l, dump: dump, log: log, minBytes: minBytes, every: every,
		index: at.index, lastSize: at.size, atBytes: l.Stats().Bytes - at.pending, // wraps below 0: unsigned differences stay right
		stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *snapshotter) run() {
	defer close(s.done)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if s.due() {
				_ = s.save()
			}
		}
	}
}

// due reports whether the log grew enough since the last snapshot.
func (s *snapshotter) due() bool {
	grown := s.l.Stats().Bytes
	s.mu.Lock()
	grown -= s.atBytes
	need := max(s.minBytes, s.lastSize)
	s.mu.Unlock()
	return grown >= need
}

// save takes a snapshot now at the log's last index, unless the last
// snapshot is already there. Errors are returned; the log and its older
// snapshot stay as they were. Of a run of failures only the first is
// logged, and the save that ends it (run calls save every check while
// the log is failed).
func (s *snapshotter) save() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	bytes := s.l.Stats().Bytes
	index := s.l.LastIndex() // every record up to it is in the state dump sees
	if index == 0 || index == s.index {
		return nil
	}
	if s.need > 0 {
		if free, ok := diskFree(s.l.Dir()); ok && free < s.need {
			return nil // still no room for it
		}
	}
	var size countWriter
	start := time.Now()
	err := s.l.SaveSnapshot(index, func(w io.Writer) error {
		return s.dump(io.MultiWriter(w, &size))
	})
	if err != nil {
		full := errors.Is(err, syscall.ENOSPC)
		s.need = 0
		if full {
			var state countWriter
			if s.dump(&state) == nil {
				s.need = uint64(state) + uint64(state)/16 + 64<<10
			}
		}
		if s.failures == 0 {
			s.failedSince = start
			if full {
				s.log.Error("snapshot of the log failed: the disk is full; the log keeps growing until one succeeds (trying again once data_dir has room for it, logged once)", "index", index, "room_awaited", s.need, "err", err)
			} else {
				s.log.Error("snapshot of the log failed; the log keeps growing until one succeeds (trying again every check, logged once)", "index", index, "err", err)
			}
		}
		s.failures++
		return err
	}
	s.need = 0
	s.index, s.atBytes, s.lastSize = index, bytes, uint64(size)
	if s.failures > 0 {
		s.log.Info("snapshot of the log: saving works again", "failed_since", s.failedSince, "failed_attempts", s.failures)
		s.failures, s.failedSince = 0, time.Time{}
	}
	s.log.Info("snapshot of the log saved", "index", index, "bytes", uint64(size), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// close stops the background snapshots and waits for one under way.
func (s *snapshotter) close() {
	close(s.stop)
	<-s.done
}

// countWriter counts the bytes written through it.
type countWriter uint64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

// dumpState writes the engine's state as a snapshot payload to w (the
// format is engine.DumpMagic's): each shard is dumped under its lock, with
// the log's last index read there.
func (n *Node) dumpState(w io.Writer) error {
	_, err := n.eng.WriteDump(w, n.wal.LastIndex)
	return err
}
