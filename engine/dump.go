package engine

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
)

// DumpMagic begins a state dump: the payload of a node's snapshot in its
// log, and the snapshot a standby installs from the active. After the
// magic, for each shard of the engine in turn:
//
//	uvarint  shard+1
//	records  each: uvarint n (> 0), then n bytes: one record of the
//	         engine's format (record.go), as SnapshotRecords gave it
//	uvarint  0
//	uvarint  the shard's dump index: the log's last index when the shard
//	         was dumped; log records of its keys up to it are in the dump
//
// then uvarint 0. Loading it replays the records, then each log record
// after the dump's lowest index that Dumps.Covers does not cover.
const DumpMagic = "BATONST1"

// maxDumpRecord bounds one record of a dump, as the log bounds its records.
const maxDumpRecord = 1<<24 - 1 // wal.MaxRecordSize

// Dumps maps each shard of a loaded dump to its dump index.
type Dumps map[int]uint64

// Min is the lowest dump index (0 for none): every log record after it
// that Covers does not cover must be replayed after the dump.
func (d Dumps) Min() uint64 {
	var m uint64
	first := true
	for _, i := range d {
		if first || i < m {
			m, first = i, false
		}
	}
	return m
}

// Covers reports whether the log record r at index is in the dump
// already: its key's shard was dumped at index or later. A RecReserve
// never is (replaying one again changes nothing). It is the one rule for
// a restart's replay and a standby's catch-up after a snapshot.
func (e *Engine) Covers(d Dumps, index uint64, r *Record) bool {
	if r.Kind == RecReserve {
		return false
	}
	di, ok := d[e.ShardOf(r.Key)]
	return ok && index <= di
}

// WriteDump writes the engine's state to w as a dump (see DumpMagic):
// each shard under its lock, with index() (the log's last index) read
// there as its dump index. It returns the lowest dump index, or the first
// error writing to w (the dump is then incomplete).
func (e *Engine) WriteDump(w io.Writer, index func() uint64) (uint64, error) {
	bw := bufio.NewWriterSize(w, 256<<10)
	var err error
	var scratch [binary.MaxVarintLen64]byte
	put := func(b []byte) {
		if err == nil {
			_, err = bw.Write(b)
		}
	}
	uv := func(v uint64) { put(binary.AppendUvarint(scratch[:0], v)) }
	put([]byte(DumpMagic))
	cur := -1
	begin := func(shard int) {
		if shard != cur {
			uv(uint64(shard) + 1)
			cur = shard
		}
	}
	low, first := uint64(0), true
	e.SnapshotRecords(func(shard int, rec []byte) {
		begin(shard)
		uv(uint64(len(rec)))
		put(rec)
	}, func(shard int) {
		begin(shard)
		uv(0)
		i := index()
		if first || i < low {
			low, first = i, false
		}
		uv(i)
	})
	uv(0)
	if err == nil {
		err = bw.Flush()
	}
	return low, err
}

// LoadDump replays a dump from r into the engine (a standby) and returns
// the dump index of each shard. Errors name what is wrong and where (the
// byte offset in the dump).
func (e *Engine) LoadDump(r io.Reader) (Dumps, error) {
	br := &countingReader{r: bufio.NewReaderSize(r, 256<<10)}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("snapshot payload at byte %d: %s", br.n, fmt.Sprintf(format, args...))
	}
	magic := make([]byte, len(DumpMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != DumpMagic {
		return nil, fail("not a baton state snapshot (magic %q)", magic)
	}
	dumps := Dumps{}
	var rec []byte
	for {
		v, err := binary.ReadUvarint(br)
		if err != nil {
			return nil, fail("reading a shard number: %v", err)
		}
		if v == 0 {
			return dumps, nil
		}
		shard := int(v - 1)
		if _, dup := dumps[shard]; dup {
			return nil, fail("shard %d twice", shard)
		}
		for {
			size, err := binary.ReadUvarint(br)
			if err != nil {
				return nil, fail("reading a record length: %v", err)
			}
			if size == 0 {
				break
			}
			if size > maxDumpRecord {
				return nil, fail("record of %d bytes", size)
			}
			rec = slices.Grow(rec[:0], int(size))[:size]
			if _, err := io.ReadFull(br, rec); err != nil {
				return nil, fail("reading a record: %v", err)
			}
			r, err := DecodeRecord(rec)
			if err != nil {
				return nil, fail("%v", err)
			}
			if got := e.ShardOf(r.Key); got != shard {
				return nil, fail("key %q is in shard %d's dump, but in shard %d now (the engine's shards changed)", r.Key, shard, got)
			}
			if err := e.Replay(rec); err != nil {
				return nil, fail("%v", err)
			}
		}
		if dumps[shard], err = binary.ReadUvarint(br); err != nil {
			return nil, fail("reading shard %d's dump index: %v", shard, err)
		}
	}
}

// countingReader counts the bytes read through it, for error offsets.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// ReplayAt applies the record rec, at index in the active's log, to a
// standby engine, after logIt has written it to this node's log, both
// under the record's shard lock: a dump of the shard (SnapshotRecords)
// then holds every record of its keys up to the log's last index, as on
// the active. A record the dump d covers (Covers) is logged but not
// applied again. Errors: the decoding's (nothing logged), logIt's
// (nothing applied), or an error on an active engine.
func (e *Engine) ReplayAt(index uint64, rec []byte, d Dumps, logIt func() error) error {
	if e.active.Load() {
		return fmt.Errorf("engine: ReplayAt(%d) on an active engine", index)
	}
	r, err := DecodeRecord(rec)
	if err != nil {
		return fmt.Errorf("record %d: %w", index, err)
	}
	s := e.shard(r.Key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := logIt(); err != nil {
		return err
	}
	if e.Covers(d, index, &r) {
		return nil
	}
	if r.Token != 0 {
		e.tokens.observe(r.Token)
	}
	if r.Kind == RecReserve {
		return nil
	}
	s.apply(nil, &r, e.now())
	s.idle(r.Key)
	return nil
}
