package cluster

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The replication stream (GET /_cluster/stream) is binary, written down
// here once and guarded by a golden test (TestFramesGolden) and one that
// reads this comment's table (TestFramesMatchTheirDocComment). The response
// body begins with the 8 bytes streamMagic ("BTNREPL" and the version
// byte 2), then frames, each a kind byte followed by uvarint fields:
//
//	'B' begin      epoch, last_token, state_token, resume_from
//	               resume_from > 0: records from that index follow, the
//	               standby's log agrees up to it; 0: a snapshot follows
//	'S' snapshot   base, n, then n bytes: a state dump (engine.DumpMagic)
//	               whose lowest shard dump index is base; records from
//	               base+1 follow, each skipped by the standby if the dump
//	               covers it (engine.Engine.Covers), but written to its log
//	'R' record     index, n, then n bytes: the record at index of the
//	               active's log, in the engine's record format unchanged
//	'H' heartbeat  epoch, last_token, last_index (the active's log)
//	'M' moved      epoch, n, then n bytes: the URL of the node this one
//	               handed the active role to, which is the active with
//	               epoch now; the last frame of the stream (version 2)
//
// Records come in index order without gaps. A field added later goes at
// the end of a frame only with a new version byte.
const (
	streamMagic = "BTNREPL\x02"
	// streamType is the stream's Content-Type.
	streamType = "application/x-baton-replication"
	// syncHeader, on the stream's response, is the active's
	// sync_standbys: with 0 nobody waits for the standby's
	// acknowledgements, which it then paces (ackEvery). Without it (an
	// older active) the standby acknowledges every batch.
	syncHeader = "Baton-Sync-Standbys"
	// maxFrameBytes bounds the byte field of a frame a standby accepts (a
	// snapshot of a very large state included).
	maxFrameBytes = 1 << 34
)

// Frame kinds.
const (
	frameBegin     = 'B'
	frameSnapshot  = 'S'
	frameRecord    = 'R'
	frameHeartbeat = 'H'
	frameMoved     = 'M'
)

// frame is one decoded frame; which fields are set depends on kind.
type frame struct {
	kind                         byte
	epoch, lastToken, stateToken uint64
	resumeFrom                   uint64
	index                        uint64 // 'S': base; 'R': the record's; 'H': the active's last
	data                         []byte // 'S': the dump; 'R': the record; 'M': the successor's URL
}

// appendFrame appends f's encoding to b.
func appendFrame(b []byte, f *frame) []byte {
	b = append(b, f.kind)
	uv := func(v uint64) { b = binary.AppendUvarint(b, v) }
	switch f.kind {
	case frameBegin:
		uv(f.epoch)
		uv(f.lastToken)
		uv(f.stateToken)
		uv(f.resumeFrom)
	case frameSnapshot, frameRecord:
		uv(f.index)
		uv(uint64(len(f.data)))
		b = append(b, f.data...)
	case frameMoved:
		uv(f.epoch)
		uv(uint64(len(f.data)))
		b = append(b, f.data...)
	case frameHeartbeat:
		uv(f.epoch)
		uv(f.lastToken)
		uv(f.index)
	}
	return b
}

// errFrame: the stream does not decode.
var errFrame = errors.New("replication stream: bad frame")

// readFrame reads one frame from r into f; f.data reuses its buffer.
func readFrame(r *bufio.Reader, f *frame) error {
	kind, err := r.ReadByte()
	if err != nil {
		return err
	}
	*f = frame{kind: kind, data: f.data[:0]}
	uv := func(v *uint64) {
		if err == nil {
			if *v, err = binary.ReadUvarint(r); errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
		}
	}
	switch kind {
	case frameBegin:
		uv(&f.epoch)
		uv(&f.lastToken)
		uv(&f.stateToken)
		uv(&f.resumeFrom)
	case frameSnapshot, frameRecord, frameMoved:
		var n uint64
		if kind == frameMoved {
			uv(&f.epoch)
		} else {
			uv(&f.index)
		}
		uv(&n)
		if err == nil && n > maxFrameBytes {
			return fmt.Errorf("%w: %c frame of %d bytes", errFrame, kind, n)
		}
		if err == nil {
			if uint64(cap(f.data)) < n {
				f.data = make([]byte, n)
			}
			f.data = f.data[:n]
			_, err = io.ReadFull(r, f.data)
		}
	case frameHeartbeat:
		uv(&f.epoch)
		uv(&f.lastToken)
		uv(&f.index)
	default:
		return fmt.Errorf("%w: unknown kind %q", errFrame, kind)
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // the stream ended inside a frame
	}
	return err
}
