// Package wal is baton's ordered log of changes on disk: every change the
// engine makes is an opaque record appended here and written before any
// client hears of it (SPEC section 1, "Durability"). It knows nothing of
// the engine, HTTP or the cluster.
//
// # Use
//
//	l, err := wal.Open(wal.DefaultConfig(dir)) // lock, check, repair a torn tail
//	index, snap, err := l.LoadSnapshot()      // or ErrNoSnapshot
//	err = l.Replay(index+1, apply)            // the records after it
//	i, err := l.Append(rec)                   // with a shard locked: no I/O
//	err = l.Wait(i)                           // after unlocking: group commit
//	err = l.SaveSnapshot(i, writeState)       // then old segments go
//	err = l.Close()
//
// # Files in the directory
//
//	LOCK                        flock(2)ed by the open Log; holds its pid
//	                            (the directory is flock(2)ed too)
//	00000000000000000001.wal    a segment: records from index 1 on
//	00000000000000004097.wal    the next segment, begun at 64 MiB
//	00000000000000004000.snap   the newest snapshot: the state after record 4000
//	newest-segment              the newest segment's file name and a newline
//	                            (a lower bound: see below)
//	*.tmp                       a segment or snapshot being made; removed at Open
//
// Names are the index in 20 decimal digits. Integers are little-endian.
// Checksums are CRC-32C (Castagnoli).
//
// # Segment header (32 bytes)
//
//	0   8  magic "BATONWAL"
//	8   4  format version, 1
//	12  4  flags, 0
//	16  8  index of the segment's first record (equals the file name)
//	24  4  CRC-32C of bytes 0..23
//	28  4  reserved, 0
//
// A segment is created under a temporary name with its header, fsynced,
// then renamed: a segment file always has a whole header.
//
// The writer keeps zeros written ahead of the records in the last
// segment (Config.Preallocate, 1 MiB): when a write would pass them it
// first writes that many more (up to the segment size), so that most fsyncs flush data only and
// not a file size changed by the write (an fdatasync that grows the file
// commits its size to the file system's journal too; etcd preallocates
// its segments for the same reason). Zeros after the last record are the
// end of the log. Before the next segment is begun, and when the log is
// closed, the segment is cut back to its records (and fsynced): only the
// last segment may end in zeros.
//
// # Frame (one record; 8 bytes + payload, frames follow the header back to back)
//
//	0   3  n, the length of the payload, 1..MaxRecordSize (2^24-1)
//	3   1  CRC-8 (polynomial 0x07) of bytes 0..2, so that a damaged length
//	       (any 1- or 2-bit error, 255 in 256 others) is seen as damage, not
//	       as a frame cut off by the end of the file
//	4   4  CRC-32C of: bytes 0..3, the record's index
//	       (8 bytes, not stored: the segment's first index plus the frame's
//	       position), the payload
//	8   n  payload: the record, opaque to the log
//
// Each frame carries its own checksum (not a running one as in etcd), so
// damage is pinned to one frame and a torn last frame is judged by itself.
// Because the index is in the checksum, a frame copied to the wrong place
// does not verify.
//
// # Torn tail or damage
//
// A frame header of zeros (length 0, checksum 0) followed by nothing but
// zeros is the end of the log: the zeros written ahead, or those a file
// system leaves when it extended a file before the data reached the disk.
// Open keeps them, without a warning.
//
// At Open the last segment may end in a torn frame: the file ends inside
// it, and the bytes after its header do not hold the next record's frame
// whole and verifying (they would be the frame's own payload after a
// crash; when they hold it, the length was damaged: one damaged length
// in 256 passes its check byte); or it does not verify and either only zero bytes follow it
// and its own last byte is a zero (the write was cut inside it: what
// follows the cut never landed; a frame whose last byte is not a zero was
// written to its end, and a mismatch in it is damage), or one
// of the 512-byte sectors it lies in holds only zeros from the frame's
// start (or the sector's) to the sector's end. The sectors of a write not
// yet fsynced may reach the disk in any order before a power loss, and
// with zeros ahead the file's size does not hide a missing one, so a
// blank sector may be followed by sectors of the same write that landed
// (as in etcd, such a frame is taken for the torn end; a frame's header
// is never all zeros). The price: damage that zeroes a whole sector of
// the last segment after it was fsynced is read the same way, and the
// records from there on are dropped with that warning instead of
// stopping the start; the warning counts the records whole after the
// torn one, and the bytes cut off are kept beside the segment (its name
// and ".cut-" and the offset, then ".2", ".3", … when a cut at that
// offset was kept before), which Open never reads (not for a frame
// the newest snapshot holds, when its
// file verifies: the log was fsynced up to the snapshot's index before
// the snapshot was written, so no crash tears such a frame, nor leaves
// the log ending below that index: both are damage). That is what a
// crash in the middle of a write
// leaves; it is cut off with a warning naming the file and offset, and
// every record before it is kept. Anything else — a checksum mismatch
// followed by more data and with no blank sector, a length of 0 with data
// after it in its sector, a length failing its check byte, a bad header,
// a gap between segments, a torn frame in a segment that is not the
// last — cannot come from an interrupted append: Open returns a
// *CorruptError and starts nothing, unless Config.Repair, which keeps the
// records before the damage and drops the rest, with a warning that names
// what it dropped. Segments whose records the newest snapshot holds all
// of (a process that stopped between a snapshot and the removal of what
// it replaces leaves them) are needed by nothing: damage in one removes
// it and the older ones, with a warning, and a gap between them is no
// damage. A record the snapshot holds whose payload fails its checksum
// while its length verifies (the next frame is found) is passed over,
// with a warning, in the segment that goes on past the snapshot too; so
// does Replay with records below the index it starts from. Open takes
// the snapshot's word for these only when its file verifies whole
// (LoadSnapshot's check, made then and only then).
//
// A newest segment removed as a whole leaves nothing to see in the
// others (each ends where the next begins), so newest-segment names it:
// written (durably: to a temporary file, fsynced, renamed, the directory
// fsynced) once a new segment is begun, and lowered before an Install
// removes segments, so that it never names one that was not made. Open
// refuses a directory whose newest segment begins below the one it
// names (wal.ErrRemoved, naming the missing file), and, with
// Config.Existed (a log that never installs), a snapshot left without any
// segment when the one named began at or before it, unless Config.Repair;
// a directory without the file (a new log, or one older than it) is not
// checked, and gets it. A removal at a record's boundary inside the
// newest segment, or of its last records, cannot be told from a crash.
//
// # Snapshot file
//
//	0   32 header as a segment's, magic "BATONSNP", index = the last
//	       record the snapshot includes
//	32  n  payload (the engine's bytes, opaque to the log)
//	    8  n, the payload length
//	    4  CRC-32C of the header and the payload
//	    4  end mark "BSNE"
//
// Written to a temporary file, fsynced, renamed, directory fsynced. Once
// it is in place, older snapshots and every segment wholly at or below its
// index are removed, so the disk holds the live state plus the records
// since the last snapshot.
//
// # Writing: group commit
//
// Append copies a frame into a shared buffer under a short lock and
// returns the next index. Wait makes the first waiter that finds no writer
// at work the writer of the whole buffer: one write(2) (and one fsync in
// always mode) for every record appended so far; the others wait for it
// and are woken when their index is covered. Under load a batch grows to
// whatever arrived during the previous write and fsync. Before it takes
// the buffer the writer lets the goroutines about to wait run once
// (runtime.Gosched), so that they share its write(2). In always mode it
// also gathers: when fewer Waits are for records not yet fsynced than
// were when the last fsync ended (the clients it answered come back with
// their next change; the Waits it answered no longer count, even before
// their goroutines have run), it waits for them, at most twice the last
// fsync's duration and 1 ms, so that the first one back does not fsync
// alone while the others queue behind it. A lone client never waits.
//
// # What a failure can lose (Config.Sync; SPEC section 5, fsync)
//
//	mode      Wait returns after     process crash   power loss / kernel crash
//	always    write(2) and fsync     nothing         nothing
//	interval  write(2)               nothing         the records of the last SyncInterval (default 100ms) and of the fsync under way
//	never     write(2)               nothing         what the OS had not flushed (Linux: typically up to 30 s)
//
// A process crash (kill -9, OOM) loses nothing in any mode: the records
// are in the kernel's page cache once write(2) returned.
//
// # Write errors
//
// When a write or fsync fails (disk full, EIO) the log keeps every record
// it was given, refuses new ones (Append returns ErrUnavailable), and
// retries in the background every Config.RetryInterval: it writes again
// everything after the segment's last fsynced offset, over what is there,
// and cuts the segment at its end (in interval mode it keeps the written
// but not yet fsynced bytes for that, since a failed fsync may have
// dropped them from the page cache). What a failed write or fsync (or a
// failed retry) put in the file past the records written before the
// failure is cut back out (a disk that fills up in the middle of a batch
// leaves its first records whole): a retry that fails leaves the file as
// it was, so a process that stops while the log is failed keeps what was
// written before the failure, and no record whose Wait failed. When a retry succeeds the log is healthy
// again. Healthy, Stats
// and Config.OnHealth report it; errors and recoveries are logged.
//
// # The segment removed while the log writes it
//
// A write into a segment that was removed from the directory (an rm of
// the directory or of its files while the log is open) succeeds, into a
// file that no Open will read. At every tick (Config.SyncInterval) the
// log checks that the file under the active segment's name is still the
// one it writes; when it is not, the log fails for good (Append returns
// ErrUnavailable naming the file, OnHealth is called) and no retry
// writes into the removed file: only an Install, which begins a new
// segment, makes it healthy again. Records written in the tick before
// the check are in the removed file only.
package wal
