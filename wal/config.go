package wal

import (
	"fmt"
	"log/slog"
	"time"
)

// SyncMode says when the log is flushed to the disk (SPEC section 5, fsync).
type SyncMode int

const (
	// SyncInterval writes (write(2)) a record before Wait returns and
	// fsyncs in the background at most every Config.SyncInterval, when
	// something was written since the last fsync. The default.
	SyncInterval SyncMode = iota
	// SyncAlways fsyncs a record before Wait returns; concurrent Waits
	// share one write and one fsync (group commit).
	SyncAlways
	// SyncNever writes a record before Wait returns and leaves flushing to
	// the operating system (segments are still fsynced when cut and on Close).
	SyncNever
)

// String returns the config spelling: "interval", "always" or "never".
func (m SyncMode) String() string {
	switch m {
	case SyncInterval:
		return "interval"
	case SyncAlways:
		return "always"
	case SyncNever:
		return "never"
	}
	return fmt.Sprintf("SyncMode(%d)", int(m))
}

// ParseSyncMode reads the config value of fsync: "always", "interval" or
// "never"; anything else is an error naming the key.
func ParseSyncMode(s string) (SyncMode, error) {
	switch s {
	case "interval":
		return SyncInterval, nil
	case "always":
		return SyncAlways, nil
	case "never":
		return SyncNever, nil
	}
	return 0, fmt.Errorf("fsync: must be always, interval or never, got %q", s)
}

// Config configures a Log. Start from DefaultConfig.
type Config struct {
	// Dir is the directory of the segments, snapshots and lock file
	// (data_dir); created if missing.
	Dir string
	// Sync is the fsync policy.
	Sync SyncMode
	// SyncInterval is, in SyncInterval mode, the longest time between a
	// write and its fsync. It is also how often records appended but not
	// waited for are written, in every mode.
	SyncInterval time.Duration
	// SegmentSize is the size in bytes at which a segment is closed and
	// the next one begun (a segment may exceed it by one write).
	SegmentSize int64
	// Preallocate is how many bytes of zeros the writer keeps written
	// ahead of the records in the segment it appends to, up to
	// SegmentSize (0: none), so that
	// most fsyncs flush data only, not a file size grown by the write
	// (etcd preallocates its segments for the same reason). The zeros are
	// the end of the log when it is read (doc.go); a segment is cut back
	// to its records when the next one begins and when the log is closed.
	Preallocate int64
	// Repair makes Open keep the records that precede damage in a segment
	// and drop the damaged record and everything after it (with a warning
	// naming what was dropped), instead of returning a *CorruptError.
	Repair bool
	// Existed, when not empty, is the caller's evidence that Dir held this
	// log before (baton: its token-hwm, written only once the log was
	// open), quoted in Open's error: a Dir with neither a segment nor a
	// snapshot then had them removed, and Open returns ErrRemoved
	// (wrapped) instead of beginning a new log, unless Repair. It also
	// says that the log never installs a snapshot (Install), so that a
	// snapshot left without any segment had its segments removed too
	// (see newestName). baton sets it on a single node only.
	Existed string
	// RepairHint is how a user turns on Repair, quoted in a CorruptError
	// (for example "start with --repair-log"); default "set Config.Repair".
	RepairHint string
	// FailTimeout is how long Wait waits for a failed log to recover
	// before it returns ErrUnavailable.
	FailTimeout time.Duration
	// RetryInterval is how often a failed log tries to write again.
	RetryInterval time.Duration
	// Logger receives warnings (torn tails, repairs) and errors (write
	// failures, recoveries); default slog.Default().
	Logger *slog.Logger
	// OnHealth, if set, is called from the log's own goroutine with the
	// error when writes start failing and with nil when they succeed again.
	// It must not call back into the Log.
	OnHealth func(err error)
	// WrapFile, if set, wraps every file the log writes (segments,
	// snapshots) after it is opened; name is the file's final path. For
	// fault injection in tests.
	WrapFile func(name string, f File) File
}

// DefaultConfig returns the defaults of SPEC section 5 for dir:
// fsync interval every 100ms, 64 MiB segments, 1 MiB of zeros written
// ahead of the records.
func DefaultConfig(dir string) Config {
	return Config{
		Dir:           dir,
		Sync:          SyncInterval,
		SyncInterval:  100 * time.Millisecond,
		SegmentSize:   64 << 20,
		Preallocate:   1 << 20,
		RepairHint:    "set Config.Repair",
		FailTimeout:   time.Second,
		RetryInterval: 500 * time.Millisecond,
	}
}

// Validate reports the first invalid field, by its config key: an error
// "<key>: must be ..., got <value>"; nil when every field is valid.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return fmt.Errorf("data_dir: must not be empty")
	case c.Sync != SyncInterval && c.Sync != SyncAlways && c.Sync != SyncNever:
		return fmt.Errorf("fsync: must be always, interval or never, got %v", c.Sync)
	case c.SyncInterval <= 0:
		return fmt.Errorf("fsync_interval: must be > 0, got %v", c.SyncInterval)
	case c.SegmentSize < 4096:
		return fmt.Errorf("segment size: must be at least 4096 bytes, got %d", c.SegmentSize)
	case c.Preallocate < 0:
		return fmt.Errorf("preallocate: must be >= 0 bytes, got %d", c.Preallocate)
	case c.FailTimeout <= 0:
		return fmt.Errorf("fail timeout: must be > 0, got %v", c.FailTimeout)
	case c.RetryInterval <= 0:
		return fmt.Errorf("retry interval: must be > 0, got %v", c.RetryInterval)
	}
	return nil
}
