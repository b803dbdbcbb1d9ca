package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/baton-io/baton/internal/durable"
)

const (
	// maxSpare is the largest write buffer kept for reuse between batches.
	maxSpare = 4 << 20
	// flushAt is the pending buffer size at which Append asks the
	// background goroutine to write it, when no Wait did.
	flushAt = 1 << 20
	// retryLogEvery spaces the warnings of a log that stays failed.
	retryLogEvery = 10 * time.Second
	// quickWriteMax is the longest write of records after which the
	// next one may still be a raw system call (see Log.quick).
	quickWriteMax = time.Millisecond
)

// gatherFor is how long a SyncAlways leader waits for the records of a
// batch before its fsync (see gather), given the last fsync's duration:
// twice that, at most 1 ms. A variable for tests.
var gatherFor = func(lastFsync time.Duration) time.Duration {
	return min(2*lastFsync, time.Millisecond)
}

type segment struct {
	path  string
	first uint64 // index of its first record
	// id is the file the log opened for writing, for the active segment
	// (nil for the others): checkActive compares the file under path with
	// it, to see the segment removed while the log writes it.
	id os.FileInfo
}

// Log is baton's ordered log of changes on disk: segments of checksummed
// records, group-committed, plus snapshots. Append and Wait may be called
// from any number of goroutines; Replay, SaveSnapshot and LoadSnapshot
// too. Open starts one goroutine (background flush, fsync and retry),
// stopped by Close.
type Log struct {
	cfg  Config
	log  *slog.Logger
	lock dirLock

	// mu guards the append state and the writer's bookkeeping. It is
	// never held across I/O.
	mu       sync.Mutex
	next     uint64 // index the next Append gets
	buf      []byte // frames of the records [bufFirst, next), not yet handed to a writer
	bufFirst uint64
	spare    []byte
	leading  bool          // a writer (the leader) owns the active file's tail
	notify   chan struct{} // closed and replaced whenever a writer finishes
	closed   bool          // Close began: Append refuses
	shut     bool          // files closed
	failed   error         // the write error while the log is failed
	failedAt time.Time     // when it failed
	// removed: checkActive found the active segment removed from the
	// directory (or replaced). Every write would go into a file no start
	// reads, so the log stays failed (recover writes nothing) until an
	// Install replaces the log.
	removed error
	// installFailed: the last Install failed (a snapshot that could not
	// be written: a full disk), before it removed anything or after. The
	// log is failed until an Install succeeds: recover writes nothing
	// (the records Install dropped are in no file), and checkActive does
	// not take the segments Install removed for ones removed behind the
	// log's back.
	installFailed bool

	// quick: the leader's last write of records took less than
	// quickWriteMax, so its next one is made as a raw system call
	// (quickWriter), which the Go scheduler does not see: a system
	// call it sees wakes its monitor thread (sysmon) if the process was
	// idle just before, and sets it polling every 20 µs again, a thread
	// switch each time (on the project's VM about 20% of the native
	// server's CPU per uncontended cycle). A raw call keeps its
	// processor while it runs (and a stop of the world for the GC waits
	// for it), so a write that was slow is followed by ordinary ones
	// until one is quick again: a disk that stalls holds at most one raw
	// write. Only the leader touches it.
	quick bool

	// lastRetryLog is when a failed retry was last logged.
	lastRetryLog time.Time
	written      uint64 // last index written (write(2) returned)
	synced       uint64 // last index fsynced
	active       File   // the last segment, open for writing
	writeOff     int64  // end of the written bytes in active
	allocEnd     int64  // active's size: zeros from writeOff to it (Config.Preallocate)
	syncOff      int64  // end of the fsynced bytes in active
	retained     []byte // SyncInterval: the bytes [syncOff, writeOff), kept until fsynced
	stats        Stats
	// fillAfter is the count of bytes written (stats.Bytes) before which
	// no zeros are written ahead: a fill that found the file system full
	// was cut back, and the next is tried only Config.Preallocate bytes of
	// records later, not at every write.
	fillAfter uint64
	// waiters counts the goroutines in Wait.
	waiters int
	// waiting holds, in SyncAlways mode, the index each goroutine in Wait
	// waits for, from its Wait's start until a writer's wake finds it
	// done (prunedTo: doneIndex at the last wake) or, if none did, until
	// it leaves: the Waits a finished batch covered leave it when they
	// are woken, not when each gets l.mu back, so that a gathering
	// counts only the Waits its batch will carry (see gather).
	waiting  []uint64
	prunedTo uint64
	// tap sees every appended record (SetTap); nil: none.
	tap func(index uint64, rec []byte)
	// writeTap sees every rise of written (SetWriteTap); nil: none.
	writeTap func(last uint64)
	// SyncAlways group commit (see gather): the Waits expected at the
	// next fsync (those in Wait when the last one ended: the clients it
	// answered, who come back, and those that came during it) and how
	// long the last fsync took; while a leader gathers, gatherCh is closed
	// by the Wait or Append that brings the waiters or the pending records
	// to gatherWant.
	expect     int
	lastFsync  time.Duration
	gatherWant int
	gatherCh   chan struct{}

	// syncMu serializes fsyncs of the active segment with its replacement.
	// Order: syncMu before mu.
	syncMu sync.Mutex

	// newest is the first index of the segment the newestName file
	// names (0: no file); guarded by newestMu.
	newestMu sync.Mutex
	newest   uint64

	segMu     sync.Mutex // guards segs and snapIndex
	segs      []segment  // in index order; the last is active
	snapIndex uint64     // index of the newest snapshot file (0: none)

	snapMu sync.Mutex // serializes SaveSnapshot

	stop      chan struct{}
	kick      chan struct{} // a failure began
	flushNow  chan struct{} // the pending buffer passed flushAt
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Stats are the log's counters since Open, for metrics and benchmarks.
type Stats struct {
	Records        uint64 // records appended
	Writes         uint64 // write(2) calls that carried records
	Fsyncs         uint64 // fsyncs of segment data
	Bytes          uint64 // bytes of frames written
	RecordsWritten uint64 // records carried by those writes
	RecordsSynced  uint64 // records made durable by those fsyncs
	// FsyncTime is the wall time spent in those fsyncs.
	FsyncTime time.Duration
	// GatherTime is the wall time SyncAlways writers waited for the
	// records of a batch before its write and fsync (see gather).
	GatherTime time.Duration
	// GatherTimeouts counts the gatherings that ran out of time
	// (gatherFor) before the Waits or records they expected were there:
	// that batch left without some of the clients of the one before,
	// which then came during its fsync and waited for it to end.
	GatherTimeouts uint64
	Failures       uint64 // times the log went from healthy to failed
	Recoveries     uint64 // times it became healthy again
	Healthy        bool   // writes succeed now
}

// RecordsPerWrite is the mean batch of a write(2).
func (s Stats) RecordsPerWrite() float64 {
	if s.Writes == 0 {
		return 0
	}
	return float64(s.RecordsWritten) / float64(s.Writes)
}

// RecordsPerFsync is the mean batch of an fsync.
func (s Stats) RecordsPerFsync() float64 {
	if s.Fsyncs == 0 {
		return 0
	}
	return float64(s.RecordsSynced) / float64(s.Fsyncs)
}

// Open opens (or creates) the log in cfg.Dir: it takes the directory's
// lock file, checks every segment and truncates a torn last record (with
// a warning naming the file and offset). Errors: ErrNotWritable or
// ErrLocked (wrapped, naming the directory), a *CorruptError for damage
// before the tail (unless cfg.Repair), an invalid cfg field by its key.
func Open(cfg Config) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RepairHint == "" {
		cfg.RepairHint = "set Config.Repair"
	}
	lock, err := lockDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	l := &Log{
		cfg:      cfg,
		log:      cfg.Logger,
		lock:     lock,
		notify:   make(chan struct{}),
		stop:     make(chan struct{}),
		kick:     make(chan struct{}, 1),
		flushNow: make(chan struct{}, 1),
	}
	if err := l.load(); err != nil {
		lock.Close()
		return nil, err
	}
	l.stats.Healthy = true
	l.wg.Add(1)
	go l.run()
	return l, nil
}

func (l *Log) path(name string) string { return filepath.Join(l.cfg.Dir, name) }

func (l *Log) wrap(path string, f *os.File) File {
	if l.cfg.WrapFile != nil {
		return l.cfg.WrapFile(path, newOSFile(f))
	}
	return newOSFile(f)
}

// load reads the directory: snapshots, segments (checked frame by frame),
// and opens the last segment for writing.
func (l *Log) load() error {
	entries, err := os.ReadDir(l.cfg.Dir)
	if err != nil {
		return fmt.Errorf("wal: data_dir %s: %w", l.cfg.Dir, err)
	}
	var segs []segment
	var snaps []uint64 // the snapshot files' indexes
	for _, e := range entries {
		name := e.Name()
		if filepath.Ext(name) == tmpExt {
			// A segment or snapshot whose creation did not finish.
			if err := os.Remove(l.path(name)); err != nil {
				return fmt.Errorf("%w: data_dir %s: %v", ErrNotWritable, l.cfg.Dir, err)
			}
			continue
		}
		if i, ok := parseName(name, segmentExt); ok {
			segs = append(segs, segment{path: l.path(name), first: i})
		} else if i, ok := parseName(name, snapshotExt); ok {
			snaps = append(snaps, i)
			l.snapIndex = max(l.snapIndex, i)
		}
	}
	slices.SortFunc(segs, func(a, b segment) int { return cmpUint(a.first, b.first) })
	if len(segs) == 0 && l.snapIndex == 0 && l.cfg.Existed != "" {
		if !l.cfg.Repair {
			return fmt.Errorf("%w: data_dir %s holds neither a log segment (*%s) nor a snapshot (*%s), although it held a log (%s): they were removed, and the state they held with them; to start anyway with an empty log, %s",
				ErrRemoved, l.cfg.Dir, segmentExt, snapshotExt, l.cfg.Existed, l.cfg.RepairHint)
		}
		l.log.Warn("wal: repair: the log's files are gone (neither a segment nor a snapshot, although the directory held a log); starting with an empty log: the state they held is lost",
			"dir", l.cfg.Dir, "evidence", l.cfg.Existed)
	}
	marked, err := l.readNewest()
	if err != nil {
		if !l.cfg.Repair {
			return err
		}
		l.log.Warn("wal: repair: the file naming the newest segment cannot be read, so a newest segment removed cannot be seen at this start; it is written again, naming the newest segment there is", "dir", l.cfg.Dir, "err", err)
		marked = 0
	}
	l.newest = marked
	have := l.snapIndex + 1 // where the newest segment here begins
	if len(segs) > 0 {
		have = segs[len(segs)-1].first
	}
	if marked > have {
		missing := l.path(fileName(marked, segmentExt))
		if !l.cfg.Repair {
			return fmt.Errorf("%w: data_dir %s: %s, the newest segment the log began (%s names it), is missing, and the records it held, from record %d on, with it; to start anyway with the records before it, %s",
				ErrRemoved, l.cfg.Dir, missing, newestName, marked, l.cfg.RepairHint)
		}
		l.log.Warn("wal: repair: the newest segment the log began is missing; starting with the records before it (those it held are lost)",
			"file", missing, "first_lost_record", marked)
	}
	if len(segs) == 0 && l.snapIndex > 0 && marked != 0 && marked <= l.snapIndex && l.cfg.Existed != "" {
		// Every segment gone, and the newest one began at or before the
		// snapshot: it held the records after it. Only Install leaves a
		// snapshot without a segment at a crash, and a log whose
		// removal Existed marks (a single node's) never installs one.
		missing := l.path(fileName(marked, segmentExt))
		if !l.cfg.Repair {
			return fmt.Errorf("%w: data_dir %s: no log segment is left after the newest snapshot (record %d): %s, the newest segment the log began (%s names it), held the records after it, and is missing with them; to start anyway from the snapshot alone, %s",
				ErrRemoved, l.cfg.Dir, l.snapIndex, missing, newestName, l.cfg.RepairHint)
		}
		l.log.Warn("wal: repair: every log segment is missing; starting from the newest snapshot alone (the records after it are lost)",
			"file", missing, "snapshot", l.snapIndex)
	}
	if len(segs) == 0 && l.snapIndex > 0 {
		// A snapshot is never written without a segment after it but
		// by a crash in Install between the two: otherwise the
		// segments were removed, and with them any record after it.
		l.log.Warn("wal: no log segment after the newest snapshot; starting from the snapshot alone (records written after it, if its segments were removed, are lost)",
			"dir", l.cfg.Dir, "snapshot", l.snapIndex)
	}

	next := l.snapIndex + 1 // index after the last good record
	var end int64           // end of the good frames in the last segment
	for i := 0; i < len(segs); i++ {
		s, last := segs[i], i == len(segs)-1
		var expect uint64
		if i > 0 {
			expect = next
		}
		if i > 0 && expect != s.first && s.first <= l.snapIndex+1 && l.snapshotVerifies() {
			// The records before s.first are needed (and must end where
			// it begins) only where the snapshot does not hold them.
			expect = 0
		}
		off, n, passed, err := scanSegment(s, expect, l.snapIndex)
		if len(passed) > 0 && !l.snapshotVerifies() {
			// Not on the word of a damaged snapshot: the records are
			// needed then (--repair-log starts from the log alone).
			off, n, passed, err = scanSegment(s, expect, 0)
		}
		if len(passed) > 0 {
			l.log.Warn("wal: damaged records that the newest snapshot holds are passed over",
				"file", s.path, "records", passed, "snapshot", l.snapIndex)
		}
		if err == nil {
			next, end = n, off
			continue
		}
		if !last && segs[i+1].first <= l.snapIndex+1 && !isReadError(err) && l.snapshotVerifies() {
			// The snapshot holds every record of s: s is what a process
			// that stopped before removing it after the snapshot (or a
			// removal that failed) left, needed by nothing. It goes, with
			// the older ones, as the snapshot would have removed them.
			for _, old := range segs[:i+1] {
				if err := removeIfExists(old.path); err != nil {
					return fmt.Errorf("%w: data_dir %s: %v", ErrNotWritable, l.cfg.Dir, err)
				}
			}
			if err := syncDir(l.cfg.Dir); err != nil {
				return fmt.Errorf("%w: data_dir %s: %v", ErrNotWritable, l.cfg.Dir, err)
			}
			l.log.Warn("wal: damage in a segment whose records the newest snapshot holds; it and the older segments are removed",
				"file", s.path, "snapshot", l.snapIndex, "reason", err.Error())
			segs, i = segs[i+1:], -1
			continue
		}
		var torn *errTorn
		if errors.As(err, &torn) && last && (n > l.snapIndex || l.cfg.Repair || !l.snapshotVerifies()) {
			attrs := []any{"file", s.path, "offset", torn.offset, "record", n, "reason", torn.reason}
			b, _ := os.ReadFile(s.path) // unread: counted as no whole record after
			if whole, first := wholeAfter(b, torn.offset, n); whole > 0 {
				// Whole records after the torn one: what a power loss
				// leaves of writes not yet fsynced (their sectors land in
				// any order), and what a sector zeroed after its fsync
				// leaves too (wal/doc.go). Nothing in the file tells the
				// two apart, so the cut is made as for a torn write, and
				// the bytes cut off are kept beside the segment, with the
				// count in the warning, for an operator who knows those
				// records were fsynced.
				kept, err := unusedName(fmt.Sprintf("%s.cut-%d", s.path, torn.offset))
				if err == nil {
					err = durable.WriteFile(kept, b[torn.offset:])
				}
				if err != nil {
					return fmt.Errorf("%w: data_dir %s: keeping the bytes a torn record is cut with: %v", ErrNotWritable, l.cfg.Dir, err)
				}
				attrs = append(attrs, "whole_records_after", whole, "first_whole_record", first, "kept_in", kept)
			}
			l.log.Warn("wal: torn last record truncated (a write cut by a crash or power loss)", attrs...)
			if err := truncateFile(s.path, torn.offset); err != nil {
				return fmt.Errorf("%w: data_dir %s: %v", ErrNotWritable, l.cfg.Dir, err)
			}
			next, end = n, torn.offset
			continue
		}
		var reason string
		var d *errDamage
		switch {
		case errors.As(err, &d):
			off, reason = d.offset, d.reason
		case errors.As(err, &torn) && last:
			// Every record the snapshot holds was fsynced before it was
			// written (SaveSnapshot): no crash tears one.
			off, reason = torn.offset, fmt.Sprintf("%s, in record %d, which the newest snapshot (record %d) holds: it was on the disk before the snapshot was written, so no crash or power loss cut it", torn.reason, n, l.snapIndex)
		case errors.As(err, &torn):
			off, reason = torn.offset, torn.reason+", in a segment that is not the last"
		default:
			if pe := (*os.PathError)(nil); errors.As(err, &pe) {
				return fmt.Errorf("wal: %w", err) // names the file already
			}
			return fmt.Errorf("wal: read %s: %w", s.path, err)
		}
		if !l.cfg.Repair {
			return &CorruptError{File: s.path, Offset: off, Index: n, Reason: reason, Hint: l.cfg.RepairHint}
		}
		// Repair: keep what precedes the damage, drop the rest, loudly.
		var dropped []string
		later := segs[i+1:]
		if off < headerSize {
			err = os.Remove(s.path)
			dropped = append(dropped, s.path)
			segs, next = segs[:i], n
		} else {
			err = truncateFile(s.path, off)
			dropped = append(dropped, fmt.Sprintf("%s from offset %d", s.path, off))
			segs, next, end = segs[:i+1], n, off
		}
		for _, s := range later {
			if err == nil {
				err = os.Remove(s.path)
				dropped = append(dropped, s.path)
			}
		}
		if err == nil {
			err = syncDir(l.cfg.Dir)
		}
		if err != nil {
			return fmt.Errorf("%w: data_dir %s: repair: %v", ErrNotWritable, l.cfg.Dir, err)
		}
		l.log.Warn("wal: repair: the log is cut at damage; the records from there on are dropped",
			"file", s.path, "offset", off, "first_dropped_record", n, "reason", reason, "dropped", dropped)
		break
	}
	if len(segs) > 0 && segs[0].first > l.snapIndex+1 {
		ce := &CorruptError{File: segs[0].path, Offset: 0, Index: l.snapIndex + 1,
			Reason: fmt.Sprintf("records %d to %d are missing: the log starts at record %d and the newest snapshot covers records up to %d",
				l.snapIndex+1, segs[0].first-1, segs[0].first, l.snapIndex)}
		if !l.cfg.Repair {
			return ce
		}
		// Repair: the log begins where its first segment does (Replay
		// from FirstIndex); what the missing records held is lost.
		l.log.Warn("wal: repair: records are missing before the log's first segment; starting from the snapshot, if any, and the records after the gap",
			"file", ce.File, "missing_from", ce.Index, "missing_to", segs[0].first-1, "snapshot", l.snapIndex)
	}
	verifies := next <= l.snapIndex && l.snapshotVerifies() // read once: it reads the whole file
	if next <= l.snapIndex && len(segs) > 0 && !l.cfg.Repair && verifies {
		// The log was on the disk up to the snapshot's index before the
		// snapshot was written (SaveSnapshot; Install begins a segment
		// after it), so no crash leaves it ending below: it was cut.
		s := segs[len(segs)-1]
		return &CorruptError{File: s.path, Offset: end, Index: next,
			Reason: fmt.Sprintf("the log ends at record %d, before the newest snapshot's record %d, although those records were on the disk before the snapshot was written: the log was cut short, and any records after the snapshot are lost",
				next-1, l.snapIndex),
			Hint: l.cfg.RepairHint}
	}
	if next <= l.snapIndex && !verifies {
		// A snapshot newer than the log's end that does not verify: the
		// log's records are all that is left, and nothing of them goes.
		// Without Repair the start stops at the snapshot (LoadSnapshot
		// refuses it, naming it); with Repair the node starts from the
		// log alone, the snapshot moved aside, so that later snapshots
		// (below its index) are the newest again.
		if l.cfg.Repair {
			path := l.path(fileName(l.snapIndex, snapshotExt))
			aside := path + damagedExt
			err := os.Rename(path, aside)
			if err == nil {
				err = syncDir(l.cfg.Dir)
			}
			if err != nil {
				return fmt.Errorf("%w: data_dir %s: repair: %v", ErrNotWritable, l.cfg.Dir, err)
			}
			l.log.Warn("wal: repair: the newest snapshot is damaged and newer than the log's end; it is moved aside, and the log's records are kept",
				"file", path, "moved_to", aside, "log_end", next-1)
			moved := l.snapIndex
			l.snapIndex = 0
			for _, i := range snaps {
				if i != moved {
					l.snapIndex = max(l.snapIndex, i)
				}
			}
		}
	} else if next <= l.snapIndex {
		// The snapshot is newer than the log's end, repaired: start after
		// it.
		l.log.Warn("wal: the log ends before the newest snapshot; continuing after the snapshot",
			"dir", l.cfg.Dir, "log_end", next-1, "snapshot", l.snapIndex)
		for _, s := range segs {
			if err := os.Remove(s.path); err != nil {
				return fmt.Errorf("%w: data_dir %s: %v", ErrNotWritable, l.cfg.Dir, err)
			}
		}
		segs, next = nil, l.snapIndex+1
	}
	if len(segs) == 0 {
		f, seg, err := l.createSegment(next)
		if err != nil {
			return err
		}
		segs, l.active, end = []segment{seg}, f, headerSize
		l.allocEnd = headerSize
	} else {
		path := segs[len(segs)-1].path
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		var st os.FileInfo
		if err == nil {
			// What a crashed process wrote may still be only in the page
			// cache: make it durable before anything is built on it.
			if err = (osFile{File: f}).Sync(); err == nil {
				st, err = f.Stat()
			}
			if err != nil {
				f.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("%w: data_dir %s: %v", ErrNotWritable, l.cfg.Dir, err)
		}
		l.active = l.wrap(path, f)
		segs[len(segs)-1].id = st
		l.allocEnd = max(st.Size(), end) // zeros after end: written ahead before a crash
	}
	if err := l.setNewest(segs[len(segs)-1].first); err != nil {
		return fmt.Errorf("%w: data_dir %s: %v", ErrNotWritable, l.cfg.Dir, err)
	}
	l.segs = segs
	l.next, l.bufFirst = next, next
	l.written, l.synced = next-1, next-1
	l.writeOff, l.syncOff = end, end
	return nil
}

// damagedExt is added to the name of a snapshot a repair moved aside.
const damagedExt = ".damaged"

// snapshotVerifies reports whether the newest snapshot file is whole
// (LoadSnapshot's check): only then may what it holds be removed.
func (l *Log) snapshotVerifies() bool {
	path := l.path(fileName(l.snapIndex, snapshotExt))
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = verifySnapshot(f, path, l.snapIndex)
	return err == nil
}

// isReadError reports whether err, from scanSegment, is an error of the
// file system rather than a judgement of the bytes read.
func isReadError(err error) bool {
	var torn *errTorn
	var d *errDamage
	return !errors.As(err, &torn) && !errors.As(err, &d)
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// scanSegment checks one segment. expect, when not 0, is the index its
// first record must have (the end of the previous segment); records up
// to skip (the snapshot's) whose payload is damaged are passed over
// (frameReader.skip). It returns the end of its good frames, the index
// after its last good record, the records passed over, and nil at a
// clean end, an *errTorn, an *errDamage, or a read error.
func scanSegment(s segment, expect, skip uint64) (end int64, next uint64, passed []uint64, err error) {
	if expect == 0 {
		expect = s.first
	}
	f, err := os.Open(s.path)
	if err != nil {
		return 0, expect, nil, err
	}
	defer f.Close()
	first, err := readSegmentHeader(f, s)
	if err != nil {
		return 0, expect, nil, err
	}
	if first != expect {
		return 0, expect, nil, &errDamage{0, fmt.Sprintf("segment starts at record %d, the previous one ends before record %d", first, expect)}
	}
	fr := newFrameReader(f, headerSize, first)
	fr.skip, fr.ra = skip, f
	for {
		if _, _, err := fr.next(); err != nil {
			if err == io.EOF {
				err = nil
			}
			return fr.off, fr.index, fr.skipped, err
		}
	}
}

// readSegmentHeader reads and checks the header of s from r.
func readSegmentHeader(r io.Reader, s segment) (uint64, error) {
	h := make([]byte, headerSize)
	n, err := io.ReadFull(r, h)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return 0, err
	}
	first, err := decodeHeader(segmentMagic, h[:n])
	if err != nil {
		return 0, &errDamage{0, "segment header: " + err.Error()}
	}
	if first != s.first {
		return 0, &errDamage{0, fmt.Sprintf("segment header: first record %d, the file name says %d", first, s.first)}
	}
	return first, nil
}

// wholeAfter counts the whole, verifying frames that follow the torn frame
// at off (its record n) in b, its segment's bytes, with the records after
// n in order from the first one findFrame finds past the torn frame's end
// (past off when its length does not verify). It returns their count and
// the first one's record (0, 0: none).
func wholeAfter(b []byte, off int64, n uint64) (int, uint64) {
	if off+frameHeader > int64(len(b)) {
		return 0, 0
	}
	from := off + 1
	if length, ok := frameLength(b[off:]); ok {
		from = off + frameHeader + length
	}
	at, first, ok := findFrame(b, from, n+1)
	if !ok {
		return 0, 0
	}
	whole := 0
	for idx := first; ; idx++ {
		end, ok := wholeFrame(b, at, idx)
		if !ok {
			return whole, first
		}
		whole++
		at = end
	}
}

// unusedName is base when no file has that name, else the first of
// base.2, base.3, … that none has: the bytes a start cuts off are kept
// under a name no earlier cut used, so that a second cut at the same
// offset (a sector that went blank twice) never overwrites the first's.
// Errors: one from os.Lstat other than the name being free.
func unusedName(base string) (string, error) {
	name := base
	for i := 2; ; i++ {
		_, err := os.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			return name, nil
		}
		if err != nil {
			return "", err
		}
		name = fmt.Sprintf("%s.%d", base, i)
	}
}

func truncateFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = osFile{File: f}.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// createSegment creates the segment whose first record is first, whole or
// not at all: header written and fsynced under a temporary name, renamed,
// directory fsynced. The file is returned open for writing, with its
// segment (id set).
func (l *Log) createSegment(first uint64) (File, segment, error) {
	path := l.path(fileName(first, segmentExt))
	tmp := path + tmpExt
	tf, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return nil, segment{}, fmt.Errorf("%w: data_dir %s: %v", ErrNotWritable, l.cfg.Dir, err)
	}
	_, err = tf.WriteAt(encodeHeader(segmentMagic, first), 0)
	if err == nil {
		err = osFile{File: tf}.Sync()
	}
	if cerr := tf.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(l.cfg.Dir)
	}
	var of *os.File
	if err == nil {
		// Opened again under its final name, which errors then quote.
		of, err = os.OpenFile(path, os.O_RDWR, 0)
	}
	var st os.FileInfo
	if err == nil {
		if st, err = of.Stat(); err != nil {
			of.Close()
		}
	}
	if err != nil {
		// Neither name may stay: records meant for this segment go on in
		// the current one, and an empty segment after them would be a gap.
		os.Remove(tmp)
		os.Remove(path)
		return nil, segment{}, fmt.Errorf("wal: create segment %s: %w", path, err)
	}
	return l.wrap(path, of), segment{path: path, first: first, id: st}, nil
}

// Append adds a record to the log and returns its index (1, 2, 3...). It
// does no I/O: it copies rec into the pending buffer under a short lock,
// so it may be called with an engine shard locked. The record is on the
// disk only once Wait(index) has returned nil. Errors: ErrUnavailable
// while the log is failed (refuse the change), ErrClosed, ErrEmptyRecord,
// ErrRecordTooLarge.
func (l *Log) Append(rec []byte) (uint64, error) { return l.add(rec, false) }

// add is Append, and with whileFailed AppendPending: the record is taken
// while the log is failed too (not once it is closed).
func (l *Log) add(rec []byte, whileFailed bool) (uint64, error) {
	if err := checkRecord(rec); err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	if err := l.appendable(); err != nil && !whileFailed {
		return 0, err
	}
	index := l.next
	l.appendLocked(index, rec)
	return index, nil
}

// AppendPending is Append, also while the log fails to write (not once
// it is closed): rec waits behind the records the failure left pending
// and goes with them, in the recovery's write (in the write right after
// it when it is appended while that write is under way); a log that never
// recovers writes neither. It is for a change that must be on the disk
// whenever a pending record is: the take-back of a grant the failure
// caught (engine.PendingAppender). Errors: ErrClosed, and Append's for
// the record itself (empty, too large).
func (l *Log) AppendPending(rec []byte) (uint64, error) { return l.add(rec, true) }

// AppendAt adds a record at index, which must be the next one
// (LastIndex()+1): a standby writes the active's records at the active's
// indexes. Errors: ErrIndexGap (wrapped, with both indexes) for any other
// index, and Append's.
func (l *Log) AppendAt(index uint64, rec []byte) error {
	if err := checkRecord(rec); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.appendable(); err != nil {
		return err
	}
	if index != l.next {
		return fmt.Errorf("%w: record %d offered, the next is %d", ErrIndexGap, index, l.next)
	}
	l.appendLocked(index, rec)
	return nil
}

// SetTap makes tap see every record appended from now on (Append,
// AppendAt), with its index, in index order: it is called under the
// log's append mutex, so it must be quick (a copy) and must not call the
// Log. rec is valid during the call only. nil removes it.
func (l *Log) SetTap(tap func(index uint64, rec []byte)) {
	l.mu.Lock()
	l.tap = tap
	l.mu.Unlock()
}

// SetWriteTap makes tap see the log's last written index each time the
// records up to it are written (and fsynced in SyncAlways mode: as Wait
// reports them), or the log is replaced by Install: a replication stream
// that passes on only what this log has written follows it (a record the
// log then fails to write was answered as not made, and must not reach a
// standby that a failover may promote). It is called under the log's
// append mutex, in order with SetTap's calls, so it must be quick and
// must not call the Log. nil removes it.
func (l *Log) SetWriteTap(tap func(last uint64)) {
	l.mu.Lock()
	l.writeTap = tap
	l.mu.Unlock()
}

// setWritten records that the records up to last are written. l.mu held.
func (l *Log) setWritten(last uint64) {
	l.written = last
	if l.writeTap != nil {
		l.writeTap(last)
	}
}

// Written is the index of the last record written (and fsynced in
// SyncAlways mode): what Wait reports as done.
func (l *Log) Written() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.doneIndex()
}

// WriteSoon asks the log's goroutine to write the records appended so
// far that nobody waits for, and returns at once. A writer at work
// writes only the batch it took; what was appended after it waits for
// the next write, so a caller waiting for a record asks again until the
// written index reaches it (a replication stream waiting for them does).
func (l *Log) WriteSoon() {
	select {
	case l.flushNow <- struct{}{}:
	default:
	}
}

func checkRecord(rec []byte) error {
	if len(rec) == 0 {
		return ErrEmptyRecord
	}
	if len(rec) > MaxRecordSize {
		return ErrRecordTooLarge
	}
	return nil
}

// appendable reports why a record cannot be appended now. l.mu held.
func (l *Log) appendable() error {
	if l.closed {
		return ErrClosed
	}
	if l.failed != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, l.failed)
	}
	return nil
}

// appendLocked adds rec at index (== l.next). l.mu held.
func (l *Log) appendLocked(index uint64, rec []byte) {
	l.next++
	before := len(l.buf)
	l.buf = appendFrame(l.buf, index, rec)
	l.stats.Records++
	if l.tap != nil {
		l.tap(index, rec)
	}
	if l.gatherCh != nil && int(l.next-l.bufFirst) >= l.gatherWant {
		close(l.gatherCh)
		l.gatherCh = nil
	}
	if before < flushAt && len(l.buf) >= flushAt {
		// Nobody waits for these: have them written before the buffer
		// grows further.
		select {
		case l.flushNow <- struct{}{}:
		default:
		}
	}
}

// Wait blocks until the record at index is written (SyncInterval,
// SyncNever) or written and fsynced (SyncAlways). The first waiter to find
// no writer at work becomes the writer of everything pending (one write,
// one fsync in SyncAlways mode) and wakes the others it covered: no
// goroutine handoff when uncontended. While the log is failed, Wait waits
// for it to recover until Config.FailTimeout has passed since the failure
// (at once, once it has), then returns ErrUnavailable (the record stays
// pending and is written on recovery).
// A write that hangs (a stalled disk) holds Wait as long as it hangs.
// Other errors: ErrClosed, or an error for an index never appended.
func (l *Log) Wait(index uint64) error { return l.waitFor(index, true) }

// WaitGathered is Wait for a caller that has gathered the changes it
// waits for itself (the native protocol server, which waits once for a
// batch of answers): a waiter that becomes the writer writes what is
// pending at once, without first yielding to the goroutines about to
// append (Wait's batching in SyncInterval and SyncNever modes; a yield
// with an idle processor wakes a thread). SyncAlways gathers as Wait
// does. Its results are Wait's.
func (l *Log) WaitGathered(index uint64) error { return l.waitFor(index, false) }

// waitFor is Wait (yield true) and WaitGathered (yield false).
func (l *Log) waitFor(index uint64, yield bool) error {
	l.mu.Lock()
	l.waiters++
	tracked := l.cfg.Sync == SyncAlways && index > l.doneIndex()
	if tracked {
		l.waiting = append(l.waiting, index)
		if l.gatherCh != nil && len(l.waiting) >= l.gatherWant {
			close(l.gatherCh)
			l.gatherCh = nil
		}
	}
	err := l.wait(index, yield)
	l.waiters--
	if tracked && index > l.prunedTo {
		// Not found done by a wake (an error, or a Sync's fsync): still
		// in waiting.
		if i := slices.Index(l.waiting, index); i >= 0 {
			l.waiting = slices.Delete(l.waiting, i, i+1)
		}
	}
	l.mu.Unlock()
	return err
}

// wait is Wait's loop, with l.mu held on entry and on return; yield is
// lead's.
func (l *Log) wait(index uint64, yield bool) error {
	var timer *time.Timer
	var timeout <-chan time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if l.doneIndex() >= index {
			return nil
		}
		if index >= l.next {
			return fmt.Errorf("wal: wait for record %d: the last appended is %d", index, l.next-1)
		}
		if l.shut {
			return ErrClosed
		}
		if l.failed == nil && !l.leading {
			l.lead(yield)
			continue
		}
		if l.failed != nil && timer == nil {
			// Counted from the failure, not from this Wait: a caller
			// that waits for its records one after another (the native
			// server, each grant of a batch) waits it once, not once
			// each.
			timer = time.NewTimer(max(0, time.Until(l.failedAt.Add(l.cfg.FailTimeout))))
			timeout = timer.C
		}
		ch := l.notify
		l.mu.Unlock()
		select {
		case <-ch:
		case <-timeout:
			l.mu.Lock()
			if err := l.failed; err != nil && l.doneIndex() < index {
				return fmt.Errorf("%w: record %d not yet written: %w", ErrUnavailable, index, err)
			}
			// Recovered meanwhile: wait on as a healthy log's waiter does.
			timer, timeout = nil, nil
			continue
		}
		l.mu.Lock()
	}
}

// awaitNoWriter waits until no writer is at work (l.leading unset),
// releasing l.mu meanwhile. l.mu held; returns with l.mu held, so that the
// caller may become the writer before anyone else can.
func (l *Log) awaitNoWriter() {
	for l.leading {
		ch := l.notify
		l.mu.Unlock()
		<-ch
		l.mu.Lock()
	}
}

// doneIndex is the last index Wait may report. l.mu held.
func (l *Log) doneIndex() uint64 {
	if l.cfg.Sync == SyncAlways {
		return l.synced
	}
	return l.written
}

// lead writes every pending record in one write (and fsyncs it in
// SyncAlways mode) as the log's single writer. It is called with l.mu
// held, no writer at work and the log healthy; it returns with l.mu held,
// having woken the waiters. On failure the batch goes back in front of
// the pending buffer: nothing appended is dropped. yield: in SyncInterval
// and SyncNever modes, let other goroutines run once first (see Wait).
func (l *Log) lead(yield bool) {
	l.leading = true
	if l.cfg.Sync == SyncAlways {
		l.gather()
	} else if yield {
		// Let the goroutines about to append and wait (other requests
		// answered by the same cores) run once: their records then share
		// this write(2).
		l.mu.Unlock()
		runtime.Gosched()
		l.mu.Lock()
	}
	batch, first, last := l.buf, l.bufFirst, l.next-1
	l.buf, l.spare, l.bufFirst = l.spare[:0], nil, l.next
	f, off, alloc := l.active, l.writeOff, l.allocEnd
	fill := l.cfg.Preallocate > 0 && l.stats.Bytes >= l.fillAfter
	l.mu.Unlock()
	var err error
	var took time.Duration
	op := "write"
	fillFailed := false
	if len(batch) > 0 {
		if end := off + int64(len(batch)); fill && end > alloc {
			// Zeros ahead first (up to the segment's size, where it is
			// cut), so that the fsyncs of the next batches do not change
			// the file's size. A failure here is only a missed
			// optimisation: the batch's own write reports it. A fill that
			// did not reach its end (a full file system) is cut back, so
			// that the zeros never take the last free space from the
			// files beside the log (baton's token high-water mark, without
			// which nothing is granted), and tried again only later.
			want := min(end+l.cfg.Preallocate, l.cfg.SegmentSize)
			got := fillZeros(f, end, want)
			switch {
			case got >= want:
				alloc = got
			case f.Truncate(alloc) != nil:
				fillFailed, alloc = true, max(alloc, got)
			default:
				fillFailed = true
			}
		}
		start := time.Now()
		if qw, ok := f.(quickWriter); ok && l.quick {
			_, err = qw.writeAtQuick(batch, off)
		} else {
			_, err = f.WriteAt(batch, off)
		}
		l.quick = err == nil && time.Since(start) < quickWriteMax
		if err == nil && l.cfg.Sync == SyncAlways {
			op = "fsync"
			start := time.Now()
			err = f.Sync()
			took = time.Since(start)
		}
		if err != nil && dropFailed(l.log, f, off, l.cfg.Dir) {
			alloc = off
		}
	}
	l.mu.Lock()
	l.allocEnd = alloc
	if fillFailed {
		l.fillAfter = l.stats.Bytes + uint64(l.cfg.Preallocate)
	}
	cut := false
	if err != nil {
		l.spare = l.buf[:0]
		l.buf, l.bufFirst = append(batch, l.buf...), first
		l.setFailed(err, op)
	} else if len(batch) > 0 {
		n := last - first + 1
		l.writeOff += int64(len(batch))
		l.allocEnd = max(l.allocEnd, l.writeOff)
		l.setWritten(last)
		l.stats.Writes++
		l.stats.RecordsWritten += n
		l.stats.Bytes += uint64(len(batch))
		switch l.cfg.Sync {
		case SyncAlways:
			l.syncOff, l.synced = l.writeOff, last
			l.stats.Fsyncs++
			l.stats.FsyncTime += took
			l.stats.RecordsSynced += n
			l.expect, l.lastFsync = len(l.waiting), took
		case SyncInterval:
			l.retained = append(l.retained, batch...)
		}
		if cap(batch) <= maxSpare {
			l.spare = batch[:0]
		}
		cut = l.writeOff >= l.cfg.SegmentSize
	}
	if cut {
		l.mu.Unlock()
		l.cut()
		l.mu.Lock()
	}
	l.leading = false
	l.wake()
}

// gather is the SyncAlways leader's wait before it takes the pending
// records: while both fewer Waits are for records not yet done
// (waiting) and fewer records are pending than there were Waits when the
// last fsync ended (those it answered, whose clients come back with their
// next change, and those that came during it), it waits for them (Wait
// and Append signal when they are there), at most twice as long as the
// last fsync took (gatherFor). The Waits the last batch answered are not
// counted, even before they have left Wait (a goroutine woken is not yet
// run): taken for the clients coming back, they ended the gathering with
// part of its batch. Without it, the first request to come back after a batch
// was answered fsyncs alone while its peers' next changes queue behind
// it, and batches alternate between one record and all the others.
// Waits are expected, not records, because a change nobody waits for (a
// waiter's place) brings no client back; pending records end it too,
// because one change may bring two records and two Waits (a release and
// the grant to the next waiter), both pending before the second Wait. The wait costs at most two
// fsyncs' time and ends at once when the batch is complete; a lone client
// (one Wait in flight) never waits, nor does a background flush that
// nobody waits for. l.mu held, l.leading set; returns with l.mu held.
func (l *Log) gather() {
	if n := len(l.waiting); l.expect <= 1 || n == 0 || n >= l.expect ||
		int(l.next-l.bufFirst) >= l.expect || l.lastFsync <= 0 {
		return
	}
	ch := make(chan struct{})
	l.gatherWant, l.gatherCh = l.expect, ch
	start := time.Now()
	t := time.NewTimer(gatherFor(l.lastFsync))
	l.mu.Unlock()
	timedOut := false
	select {
	case <-ch:
	case <-t.C:
		timedOut = true
	case <-l.stop:
	}
	t.Stop()
	l.mu.Lock()
	l.stats.GatherTime += time.Since(start)
	if timedOut {
		l.stats.GatherTimeouts++
	}
	if l.gatherCh == ch {
		l.gatherCh = nil
	}
}

// zeros is the source of fillZeros.
var zeros = make([]byte, 64<<10)

// replayHook, if set (tests only), is called by Replay between its reads
// of the last written index and of the segment list.
var replayHook func()

// fillZeros writes zero bytes to f from off to end and returns the offset
// where they stop: end, or where a write failed.
func fillZeros(f File, off, end int64) int64 {
	for off < end {
		n, err := f.WriteAt(zeros[:min(int64(len(zeros)), end-off)], off)
		off += int64(n)
		if err != nil {
			break
		}
	}
	return off
}

// dropFailed cuts f back to end, the end of the records written before a
// write or fsync failed (in SyncAlways mode, written and fsynced): the
// records of the failed batch are kept in the log's buffer, not in the
// file, until a retry writes them. Part of a failed write may have
// reached the file (a disk that fills up in the middle of a batch), and
// a failed fsync leaves the written pages in the page cache: a process
// that stops while the log is failed would otherwise come back with
// records no Wait was told are written, such as a grant its client was
// answered 503 for without the release the engine appended to take it
// back. It reports whether the cut succeeded (else it logs why: it is
// the best that can be done on a failing disk). l.mu not held.
func dropFailed(log *slog.Logger, f File, end int64, dir string) bool {
	if err := f.Truncate(end); err != nil {
		log.Warn("wal: cannot cut a failed write back out of the log; a process stopped now may replay records that were refused",
			"dir", dir, "offset", end, "err", err)
		return false
	}
	return true
}

// wake tells every waiter that a writer finished, and takes the Waits
// it finds done out of waiting. l.mu held.
func (l *Log) wake() {
	done := l.doneIndex()
	if len(l.waiting) > 0 {
		l.waiting = slices.DeleteFunc(l.waiting, func(i uint64) bool { return i <= done })
	}
	l.prunedTo = done
	close(l.notify)
	l.notify = make(chan struct{})
}

// setFailed marks the log failed by err (l.mu held): Append refuses, the
// background goroutine retries.
func (l *Log) setFailed(err error, op string) {
	if l.failed != nil {
		return
	}
	l.failed = err
	l.failedAt, l.lastRetryLog = time.Now(), time.Now()
	l.stats.Failures++
	l.stats.Healthy = false
	l.log.Error("wal: "+op+" failed; refusing changes until the log can write again",
		"dir", l.cfg.Dir, "pending_from", l.written+1, "err", err)
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// checkActive fails the log for good when the active segment is no longer
// the file under its name in the directory: removed (an operator's rm of
// data_dir or of its files, a cleaner), or replaced. The log would go on
// writing into a file that no start reads, and every change answered
// from then on would be lost at the next start. Called every tick (the
// removal is seen within Config.SyncInterval; records written before
// that are in the removed file only); l.syncMu held (cut and Install,
// which replace the active segment, hold it), l.mu not held.
func (l *Log) checkActive() {
	l.segMu.Lock()
	var s segment
	if len(l.segs) > 0 {
		s = l.segs[len(l.segs)-1]
	}
	l.segMu.Unlock()
	if s.id == nil {
		return
	}
	st, err := os.Stat(s.path)
	switch {
	case err == nil && os.SameFile(st, s.id):
		return
	case err == nil:
		err = fmt.Errorf("%s was replaced by another file while the log wrote it", s.path)
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		err = fmt.Errorf("%s was removed while the log wrote it", s.path)
	default:
		return // cannot tell; a failing disk shows in the writes
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.removed != nil || l.shut || l.installFailed {
		return
	}
	l.removed = err
	if l.failed == nil {
		l.failed = err
		l.failedAt = time.Now()
		l.stats.Failures++
		l.stats.Healthy = false
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	l.lastRetryLog = time.Now()
	l.log.Error("wal: the log's segment is gone from data_dir; refusing changes until the node is restarted (records written since it went are in no file a restart reads)",
		"dir", l.cfg.Dir, "file", s.path, "last_record", l.written, "err", err)
}

// cut fsyncs the active segment and starts the next one. Called by the
// writer, l.mu not held. If the new segment cannot be created, the log
// goes on in the current one and tries again after the next write.
func (l *Log) cut() {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if err := l.syncLocked(); err != nil {
		return
	}
	l.mu.Lock()
	first := l.written + 1
	f, off, alloc := l.active, l.writeOff, l.allocEnd
	l.mu.Unlock()
	if alloc > off {
		// Only the last segment may end in zeros: cut them off, durably,
		// before a segment follows this one.
		err := f.Truncate(off)
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			l.log.Warn("wal: cannot cut a full segment back to its records; writing on in it", "dir", l.cfg.Dir, "err", err)
			return
		}
		l.mu.Lock()
		l.allocEnd = off
		l.mu.Unlock()
	}
	f, seg, err := l.createSegment(first)
	if err != nil {
		l.log.Warn("wal: cannot begin a new segment; writing on in the current one", "dir", l.cfg.Dir, "err", err)
		return
	}
	l.mu.Lock()
	old := l.active
	l.active, l.writeOff, l.syncOff, l.retained = f, headerSize, headerSize, l.retained[:0]
	l.allocEnd = headerSize
	l.mu.Unlock()
	l.segMu.Lock()
	l.segs[len(l.segs)-1].id = nil // no longer written
	l.segs = append(l.segs, seg)
	l.segMu.Unlock()
	if err := old.Close(); err != nil {
		l.log.Warn("wal: close segment", "err", err)
	}
	if err := l.setNewest(first); err != nil {
		// The file still names the segment before: only a removal of
		// this one goes unseen at the next start.
		l.log.Warn("wal: cannot name the new segment as the newest; were it removed, the next start would not see it", "dir", l.cfg.Dir, "file", seg.path, "err", err)
	}
}

// syncLocked fsyncs the active segment if anything was written since
// the last fsync. l.syncMu held, l.mu not held.
func (l *Log) syncLocked() error {
	l.mu.Lock()
	if l.failed != nil {
		err := l.failed
		l.mu.Unlock()
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	f, off, kept, last := l.active, l.writeOff, len(l.retained), l.written
	if off == l.syncOff {
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	start := time.Now()
	err := f.Sync()
	took := time.Since(start)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.setFailed(err, "fsync")
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	l.stats.Fsyncs++
	l.stats.FsyncTime += took
	l.stats.RecordsSynced += last - l.synced
	l.syncOff, l.synced = off, last
	l.retained = l.retained[:copy(l.retained, l.retained[kept:])]
	return nil
}

// Sync writes every record appended so far and fsyncs it, whatever the
// mode. Errors as Wait.
func (l *Log) Sync() error {
	l.mu.Lock()
	last := l.next - 1
	l.mu.Unlock()
	if err := l.Wait(last); err != nil {
		return err
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	return l.syncLocked()
}

// flush writes what was appended but not waited for, if no writer is at
// work. From the background goroutine.
func (l *Log) flush() {
	l.mu.Lock()
	if len(l.buf) > 0 && !l.leading && l.failed == nil && !l.shut {
		l.lead(true)
	}
	l.mu.Unlock()
}

// recover tries once to make a failed log healthy: as the writer, it
// writes again every byte not known to be on the disk, from the active
// segment's last good offset, cuts the segment at their end, then fsyncs.
// Reports whether the log is healthy.
func (l *Log) recover() bool {
	l.mu.Lock()
	l.awaitNoWriter()
	if l.failed == nil {
		l.mu.Unlock()
		return true
	}
	if l.shut || l.removed != nil || l.installFailed {
		// (After a failed Install the records it dropped are in no file:
		// only an Install that succeeds makes a log again.)
		l.mu.Unlock()
		return false
	}
	l.leading = true
	base := l.syncOff
	if l.cfg.Sync == SyncNever {
		base = l.writeOff // nothing retained: written bytes are the OS's
	}
	kept := len(l.retained)
	data := append(slices.Clip(l.retained), l.buf...)
	first, last := l.bufFirst, l.next-1
	l.buf, l.bufFirst = l.buf[:0], l.next
	f := l.active
	l.mu.Unlock()

	// Written over first, then cut at the end of what was written: a
	// write that fails again leaves the file as it was, with the records
	// written before the failure (answered, in interval and never modes),
	// where cutting back to base first would drop them until a retry
	// succeeds, and for good if the process stops meanwhile. The bytes
	// written over are the same records at the same offsets; what a
	// failed retry wrote past them is cut off again (dropFailed).
	l.syncMu.Lock()
	var err error
	if len(data) > 0 {
		_, err = f.WriteAt(data, base)
	}
	if err == nil {
		err = f.Truncate(base + int64(len(data)))
	}
	var took time.Duration
	if err == nil && l.cfg.Sync != SyncNever {
		start := time.Now()
		err = f.Sync()
		took = time.Since(start)
	}
	dropped := err != nil && dropFailed(l.log, f, base+int64(kept), l.cfg.Dir)
	l.syncMu.Unlock()

	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.wake()
	l.leading = false
	if err != nil {
		if dropped {
			l.allocEnd = base + int64(kept) // = l.writeOff
		}
		l.buf, l.bufFirst = append(data[kept:len(data):len(data)], l.buf...), first
		l.failed = err
		if now := time.Now(); now.Sub(l.lastRetryLog) >= retryLogEvery {
			l.lastRetryLog = now
			l.log.Warn("wal: still failing; refusing changes", "dir", l.cfg.Dir, "since", l.failedAt, "err", err)
		}
		return false
	}
	l.writeOff = base + int64(len(data))
	l.allocEnd = l.writeOff // the truncation took the zeros ahead
	l.setWritten(last)
	l.stats.Writes++
	l.stats.RecordsWritten += last - first + 1
	l.stats.Bytes += uint64(len(data) - kept)
	if l.cfg.Sync != SyncNever {
		l.stats.Fsyncs++
		l.stats.FsyncTime += took
		l.stats.RecordsSynced += last - l.synced
		l.syncOff, l.synced, l.retained = l.writeOff, last, l.retained[:0]
	}
	l.failed = nil
	l.stats.Recoveries++
	l.stats.Healthy = true
	l.log.Info("wal: writes succeed again; accepting changes", "dir", l.cfg.Dir, "last_record", last, "failed_for", time.Since(l.failedAt).Round(time.Millisecond))
	return true
}

// run is the log's goroutine: it writes what nobody waited for, fsyncs
// in SyncInterval mode, and retries after a failure. Stopped by Close.
func (l *Log) run() {
	defer l.wg.Done()
	tick := time.NewTicker(l.cfg.SyncInterval)
	defer tick.Stop()
	var retry *time.Timer
	var retryC <-chan time.Time
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		select {
		case <-l.stop:
			return
		case <-l.kick:
			l.mu.Lock()
			err := l.failed
			l.mu.Unlock()
			if err != nil && l.cfg.OnHealth != nil {
				l.cfg.OnHealth(err)
			}
			if retry == nil {
				retry = time.NewTimer(l.cfg.RetryInterval)
				retryC = retry.C
			}
		case <-retryC:
			if l.recover() {
				retry, retryC = nil, nil
				if l.cfg.OnHealth != nil {
					l.cfg.OnHealth(nil)
				}
			} else {
				retry.Reset(l.cfg.RetryInterval)
			}
		case <-l.flushNow:
			l.flush()
		case <-tick.C:
			l.flush()
			l.syncMu.Lock()
			l.checkActive()
			if l.cfg.Sync == SyncInterval {
				_ = l.syncLocked() // a failure is reported through setFailed
			}
			l.syncMu.Unlock()
		}
	}
}

// Dir is the log's directory (Config.Dir).
func (l *Log) Dir() string { return l.cfg.Dir }

// FailTimeout is Config.FailTimeout: once the log fails, every Wait for a
// record appended before the failure has returned within it.
func (l *Log) FailTimeout() time.Duration { return l.cfg.FailTimeout }

// Healthy reports whether the log can write now.
func (l *Log) Healthy() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed == nil
}

// InstallFailed reports whether the last Install failed: the log then
// takes no record (Append and AppendAt refuse) until an Install succeeds,
// however much room the disk has again; the records it dropped are in no
// file, so only a new snapshot makes a log again.
func (l *Log) InstallFailed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.installFailed
}

// Stats returns the counters.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// LastIndex is the index of the last record appended (0: none ever, or
// the snapshot's index after a restart with an empty log).
func (l *Log) LastIndex() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next - 1
}

// FirstIndex is the index of the oldest record the log still holds (the
// ones before it are in the snapshot).
func (l *Log) FirstIndex() uint64 {
	l.segMu.Lock()
	defer l.segMu.Unlock()
	return l.segs[0].first
}

// Replay calls fn for every written record from index from on, in order.
// rec is valid only during the call. It reads what was written when it
// began. Errors: ErrCompacted when from is below FirstIndex (load the
// snapshot first), or when a snapshot removed a segment it was about to
// read (ask again: from is then below FirstIndex, or what follows is
// still held), a *CorruptError if a file changed since Open (a
// record below from whose payload is damaged, its length verifying, is
// passed over: it is not asked for), or fn's error, which stops it.
func (l *Log) Replay(from uint64, fn func(index uint64, rec []byte) error) error {
	from = max(from, 1)
	// written before the segments: a segment a record up to last is in
	// is listed before that record is written (cut lists it while it is
	// the writer), so the copy holds it. Read the other way round, a cut
	// and a write between the two reads left last past the copy's final
	// segment, taken for a segment that ends too soon.
	l.mu.Lock()
	last := l.written
	l.mu.Unlock()
	if replayHook != nil {
		replayHook()
	}
	l.segMu.Lock()
	segs := slices.Clone(l.segs)
	l.segMu.Unlock()
	if from > last {
		return nil
	}
	if from < segs[0].first {
		return fmt.Errorf("%w: records from %d asked, the log begins at %d", ErrCompacted, from, segs[0].first)
	}
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].first <= from {
			continue
		}
		if err := replaySegment(s, from, last, i == len(segs)-1, fn, l.cfg.RepairHint); err != nil {
			if errors.Is(err, fs.ErrNotExist) && l.FirstIndex() > s.first {
				// A snapshot removed the segment since the list was read.
				return fmt.Errorf("%w: %w", ErrCompacted, err)
			}
			return err
		}
	}
	return nil
}

// replaySegment calls fn for the records of s from from to last. A
// segment may end before last unless it is the final one.
func replaySegment(s segment, from, last uint64, final bool, fn func(uint64, []byte) error, hint string) error {
	f, err := os.Open(s.path)
	if err != nil {
		return fmt.Errorf("wal: replay: %w", err)
	}
	defer f.Close()
	first, err := readSegmentHeader(f, s)
	fr := newFrameReader(f, headerSize, first)
	fr.skip = from - 1 // the records before from are not asked for
	fr.ra = f
	for err == nil && fr.index <= last {
		var index uint64
		var rec []byte
		if index, rec, err = fr.next(); err == nil && index >= from {
			if err := fn(index, rec); err != nil {
				return err
			}
		}
	}
	if err == io.EOF && (fr.index > last || !final) {
		err = nil
	}
	var d *errDamage
	var t *errTorn
	switch {
	case err == io.EOF:
		return &CorruptError{File: s.path, Offset: fr.off, Index: fr.index, Reason: "segment ends before the last written record", Hint: hint}
	case errors.As(err, &d):
		return &CorruptError{File: s.path, Offset: d.offset, Index: fr.index, Reason: d.reason, Hint: hint}
	case errors.As(err, &t):
		return &CorruptError{File: s.path, Offset: t.offset, Index: fr.index, Reason: t.reason, Hint: hint}
	case err != nil:
		return fmt.Errorf("wal: replay %s: %w", s.path, err)
	}
	return nil
}

// Close writes and fsyncs every pending record, stops the log's goroutine,
// closes its files and releases the directory lock. Waits blocked on
// records it could not write return ErrClosed. Idempotent: later calls
// return the first call's result.
func (l *Log) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.close() })
	return l.closeErr
}

func (l *Log) close() error {
	l.snapMu.Lock() // a SaveSnapshot under way finishes first
	defer l.snapMu.Unlock()
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	l.wg.Wait()

	var err error
	if !l.recover() { // a healthy log: returns at once, no writer at work
		err = fmt.Errorf("%w: closing with records not written", ErrUnavailable)
	} else {
		err = l.Sync()
	}
	l.segMu.Lock()
	activeFirst := l.segs[len(l.segs)-1].first
	l.segMu.Unlock()
	l.mu.Lock()
	l.awaitNoWriter() // a Wait that began before Close
	l.shut = true
	if l.removed != nil {
		err = fmt.Errorf("wal: close %s: records %d to %d are in no file of it: %w", l.cfg.Dir, activeFirst, l.next-1, l.removed)
	} else if err != nil {
		err = fmt.Errorf("wal: close %s: records %d to %d not on disk: %w", l.cfg.Dir, l.synced+1, l.next-1, err)
	}
	l.wake()
	f, off, alloc := l.active, l.writeOff, l.allocEnd
	l.mu.Unlock()
	if err == nil && alloc > off {
		// A log closed cleanly holds its records and no zeros ahead.
		err = f.Truncate(off)
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			err = fmt.Errorf("wal: close %s: cut the segment back to its records: %w", l.cfg.Dir, err)
		}
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if cerr := l.lock.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}
