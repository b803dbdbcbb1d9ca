package wal

import (
	"errors"
	"fmt"
)

var (
	// ErrUnavailable is returned by Append while the log cannot write (disk
	// full, I/O error), and by Wait for a record that was not written within
	// Config.FailTimeout of the failure. The log retries in the background
	// and becomes healthy again by itself; nothing appended is dropped.
	ErrUnavailable = errors.New("wal: the log cannot write to its disk")
	// ErrClosed is returned by calls on a closed Log.
	ErrClosed = errors.New("wal: log closed")
	// ErrLocked is returned by Open when another process (or another Log
	// in this one) holds the directory's lock file.
	ErrLocked = errors.New("wal: data directory in use by another process")
	// ErrNotWritable is returned by Open when the directory cannot be
	// created or written (permissions, read-only file system).
	ErrNotWritable = errors.New("wal: data directory not writable")
	// ErrUnsupported is returned by Open on an operating system where the
	// log cannot be kept safe (Windows); the error names what is missing.
	ErrUnsupported = errors.New("wal: the log cannot be kept safe on this operating system")
	// ErrRemoved is returned (wrapped, naming the directory, the
	// evidence and Config.RepairHint) by Open for a directory that holds
	// neither a segment nor a snapshot although Config.Existed says it
	// held the log: its files were removed, and the state they held.
	ErrRemoved = errors.New("wal: the log's files are gone")
	// ErrNoSnapshot is returned by LoadSnapshot when the directory holds none.
	ErrNoSnapshot = errors.New("wal: no snapshot")
	// ErrCompacted is returned by Replay when asked for records that a
	// snapshot has replaced.
	ErrCompacted = errors.New("wal: records removed after a snapshot")
	// ErrEmptyRecord is returned by Append for a record of zero bytes.
	ErrEmptyRecord = errors.New("wal: empty record")
	// ErrIndexGap: AppendAt was given an index other than the next one.
	ErrIndexGap = errors.New("wal: record index is not the next one")
	// ErrRecordTooLarge is returned by Append for a record above MaxRecordSize.
	ErrRecordTooLarge = fmt.Errorf("wal: record above %d bytes", MaxRecordSize)
)

// CorruptError reports damage in a segment or snapshot file that is not a
// torn last write: something was written whole and later changed. Open and
// LoadSnapshot return it; Open with Config.Repair keeps what precedes the
// damage instead (for segments).
type CorruptError struct {
	File   string // path of the damaged file
	Offset int64  // byte offset in File where the damage starts
	Index  uint64 // index of the first record that cannot be read (0 for a snapshot)
	Reason string // what is wrong there
	Hint   string // how to start anyway (from Config.RepairHint); empty for a snapshot
	// Anyway says what starting anyway (Hint) does; "" = what it does for
	// a segment: keeps the records before the damage, drops the rest.
	Anyway string
}

// Error names the file, the offset (and record), what is wrong, and the
// Hint to start anyway when there is one.
func (e *CorruptError) Error() string {
	msg := fmt.Sprintf("wal: %s is damaged at offset %d", e.File, e.Offset)
	if e.Index != 0 {
		msg += fmt.Sprintf(" (record %d)", e.Index)
	}
	msg += ": " + e.Reason
	if e.Hint != "" {
		anyway := e.Anyway
		if anyway == "" {
			anyway = "to start anyway with the records before it (and drop it and all after it)"
		}
		msg += "; " + anyway + ", " + e.Hint
	}
	return msg
}
