package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
)

// SaveSnapshot stores a snapshot of the state after the record at index:
// write is given a writer for its bytes (opaque to the log). The
// snapshot is written to a temporary file with a checksum; once write
// returns, the log is made durable up to its last record (Sync: the state
// may hold records appended while write ran, and a snapshot must never be
// ahead of the log on the disk); then the file is fsynced, renamed into place and the
// directory fsynced, so that a crash leaves the old snapshot or the new
// one, never half of one. Then older snapshots and every segment whose
// records are all at or below index are removed. It may run while
// Append and Wait go on. Errors: index 0 or above LastIndex, write's
// error, an I/O error (the old snapshot and segments stay), Sync's, or
// ErrClosed.
func (l *Log) SaveSnapshot(index uint64, write func(io.Writer) error) error {
	l.snapMu.Lock()
	defer l.snapMu.Unlock()
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if last := l.LastIndex(); index == 0 || index > last {
		return fmt.Errorf("wal: snapshot index %d: must be between 1 and the last appended record, %d", index, last)
	}
	if first := l.FirstIndex(); first > index+1 {
		// An Install replaced the log since index was read: the state the
		// snapshot would hold is not the one after record index.
		return fmt.Errorf("wal: snapshot index %d: the log begins at %d (replaced by an install)", index, first)
	}
	path := l.path(fileName(index, snapshotExt))
	err := l.writeSnapshot(path, index, func(w io.Writer) error {
		if err := write(w); err != nil {
			return err
		}
		// The state write gave may hold records appended while it ran
		// (the engine dumps each shard at the log's last index then):
		// they are made durable before the snapshot is in place, or a
		// crash could leave a snapshot ahead of the log's end, and the
		// records later written at those indexes would be taken as held
		// by the snapshot and skipped at the next replay.
		return l.Sync()
	})
	if err != nil {
		return err
	}

	// The snapshot is safe: what it replaces can go.
	l.segMu.Lock()
	l.snapIndex = index
	var drop []segment
	for len(l.segs) > 1 && l.segs[1].first <= index+1 {
		drop = append(drop, l.segs[0])
		l.segs = l.segs[1:]
	}
	l.segMu.Unlock()
	// Every older snapshot, including one a crash left behind.
	entries, err := os.ReadDir(l.cfg.Dir)
	for _, e := range entries {
		if i, ok := parseName(e.Name(), snapshotExt); ok && i < index && err == nil {
			err = removeIfExists(l.path(e.Name()))
		}
	}
	for _, s := range drop {
		if rerr := removeIfExists(s.path); err == nil {
			err = rerr
		}
	}
	if err == nil {
		err = syncDir(l.cfg.Dir)
	}
	if err != nil {
		return fmt.Errorf("wal: snapshot %d saved, removing what it replaces: %w", index, err)
	}
	return nil
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// snapshotWriter counts and checksums what goes through it.
type snapshotWriter struct {
	w   io.Writer
	crc hash.Hash32
	n   uint64
}

func (s *snapshotWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.crc.Write(p[:n])
	s.n += uint64(n)
	return n, err
}

// writeSnapshot writes the snapshot file at path whole or not at all.
func (l *Log) writeSnapshot(path string, index uint64, write func(io.Writer) error) error {
	tmp, err := l.writeSnapshotTmp(path, index, write)
	if err != nil {
		return err
	}
	return l.publishSnapshot(tmp, path, index)
}

// writeSnapshotTmp writes the snapshot at index to path's temporary file,
// synced, and returns its name; on an error it removes it.
func (l *Log) writeSnapshotTmp(path string, index uint64, write func(io.Writer) error) (string, error) {
	tmp := path + tmpExt
	of, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return "", fmt.Errorf("wal: snapshot %d: %w", index, err)
	}
	f := l.wrap(path, of)
	bw := bufio.NewWriterSize(f, 256<<10)
	sw := &snapshotWriter{w: bw, crc: crc32.New(castagnoli)}
	_, err = sw.Write(encodeHeader(snapshotMagic, index))
	if err == nil {
		err = write(sw)
	}
	if err == nil {
		footer := binary.LittleEndian.AppendUint64(nil, sw.n-headerSize)
		footer = binary.LittleEndian.AppendUint32(footer, sw.crc.Sum32())
		_, err = bw.Write(append(footer, snapshotEnd...))
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("wal: snapshot %d: %w", index, err)
	}
	return tmp, nil
}

// publishSnapshot renames the written snapshot tmp to path and syncs the
// directory; on an error it removes tmp.
func (l *Log) publishSnapshot(tmp, path string, index uint64) error {
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("wal: snapshot %d: %w", index, err)
	}
	if err := syncDir(l.cfg.Dir); err != nil {
		return fmt.Errorf("wal: snapshot %d: %w", index, err)
	}
	return nil
}

// snapshotReader is the payload of a verified snapshot file.
type snapshotReader struct {
	*io.SectionReader
	f *os.File
}

func (r snapshotReader) Close() error { return r.f.Close() }

// LoadSnapshot opens the newest snapshot and checks it whole (header,
// length, checksum) before returning the index it covers and a reader of
// its bytes, which the caller closes. Replay from index+1 then brings the
// state up to date. Errors: ErrNoSnapshot, a *CorruptError naming the
// file and offset for a damaged one.
func (l *Log) LoadSnapshot() (index uint64, r io.ReadCloser, err error) {
	l.segMu.Lock()
	index = l.snapIndex
	l.segMu.Unlock()
	if index == 0 {
		return 0, nil, ErrNoSnapshot
	}
	path := l.path(fileName(index, snapshotExt))
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, fmt.Errorf("wal: snapshot: %w", err)
	}
	payload, err := verifySnapshot(f, path, index)
	if err != nil {
		f.Close()
		return 0, nil, err
	}
	return index, snapshotReader{payload, f}, nil
}

// verifySnapshot checks the file of the snapshot at index and returns a
// reader of its payload.
func verifySnapshot(f *os.File, path string, index uint64) (*io.SectionReader, error) {
	corrupt := func(off int64, format string, args ...any) error {
		return &CorruptError{File: path, Offset: off, Reason: "snapshot: " + fmt.Sprintf(format, args...)}
	}
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("wal: snapshot: %w", err)
	}
	size := st.Size()
	if size < headerSize+snapshotFooter {
		return nil, corrupt(0, "%d bytes, shorter than a header and a footer", size)
	}
	h := make([]byte, headerSize)
	if _, err := f.ReadAt(h, 0); err != nil {
		return nil, fmt.Errorf("wal: snapshot: %w", err)
	}
	got, err := decodeHeader(snapshotMagic, h)
	if err != nil {
		return nil, corrupt(0, "header: %v", err)
	}
	if got != index {
		return nil, corrupt(0, "header says index %d, the file name %d", got, index)
	}
	foot := make([]byte, snapshotFooter)
	footAt := size - snapshotFooter
	if _, err := f.ReadAt(foot, footAt); err != nil {
		return nil, fmt.Errorf("wal: snapshot: %w", err)
	}
	if string(foot[12:]) != snapshotEnd {
		return nil, corrupt(footAt, "no end mark (cut short?)")
	}
	if n := binary.LittleEndian.Uint64(foot); n != uint64(footAt-headerSize) {
		return nil, corrupt(footAt, "footer says %d bytes of content, the file holds %d", n, footAt-headerSize)
	}
	c := crc32.New(castagnoli)
	if _, err := io.Copy(c, io.NewSectionReader(f, 0, footAt)); err != nil {
		return nil, fmt.Errorf("wal: snapshot: %w", err)
	}
	if c.Sum32() != binary.LittleEndian.Uint32(foot[8:]) {
		return nil, corrupt(headerSize, "checksum mismatch over bytes %d to %d", 0, footAt)
	}
	return io.NewSectionReader(f, headerSize, footAt-headerSize), nil
}
