package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// FuzzFrameReader feeds arbitrary bytes to the segment reader as the
// frames after a header: it never panics, never yields a record whose
// frame does not verify, and the records it yields are the bytes of the
// input, in order, at consecutive indexes.
func FuzzFrameReader(f *testing.F) {
	var valid []byte
	for i := 1; i <= 5; i++ {
		valid = appendFrame(valid, uint64(i), rec(i))
	}
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add(append(bytes.Clone(valid), make([]byte, 64)...))
	flipped := bytes.Clone(valid)
	flipped[20] ^= 4
	f.Add(flipped)
	f.Add([]byte{})
	f.Add(make([]byte, 8))
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := newFrameReader(bytes.NewReader(data), headerSize, 1)
		pos := 0 // offset in data of the next frame
		for want := uint64(1); ; want++ {
			index, r, err := fr.next()
			if err != nil {
				var torn *errTorn
				var dmg *errDamage
				if err != io.EOF && !errors.As(err, &torn) && !errors.As(err, &dmg) {
					t.Fatalf("unexpected error type %T: %v", err, err)
				}
				return
			}
			if index != want {
				t.Fatalf("record %d yielded as %d", want, index)
			}
			if pos+frameHeader+len(r) > len(data) {
				t.Fatalf("record %d of %d bytes runs past the %d input bytes", index, len(r), len(data))
			}
			h := data[pos : pos+frameHeader]
			if n := int(h[0]) | int(h[1])<<8 | int(h[2])<<16; n != len(r) || crc8(h[:3]) != h[3] {
				t.Fatalf("record %d: length field %x does not verify for %d bytes", index, h[:4], len(r))
			}
			if !bytes.Equal(r, data[pos+frameHeader:pos+frameHeader+len(r)]) {
				t.Fatalf("record %d is not the input's bytes", index)
			}
			if frameCRC(h[:4], index, r, make([]byte, 8)) != binary.LittleEndian.Uint32(h[4:]) || len(r) == 0 {
				t.Fatalf("record %d yielded with a bad checksum", index)
			}
			pos += frameHeader + len(r)
		}
	})
}

// FuzzFrameReaderPassingOver feeds arbitrary bytes to the segment reader
// with records 1 to 3 not needed (skip), so that damage among them is
// passed over (resync): it never panics, and every record it yields
// verifies at its index, above the last.
func FuzzFrameReaderPassingOver(f *testing.F) {
	var valid []byte
	for i := 1; i <= 8; i++ {
		valid = appendFrame(valid, uint64(i), rec(i))
	}
	f.Add(valid)
	blank := bytes.Clone(valid)
	clear(blank[5:40])
	f.Add(blank)
	f.Add(make([]byte, 8))
	f.Fuzz(func(t *testing.T, data []byte) {
		file := append(make([]byte, headerSize), data...)
		fr := newFrameReader(bytes.NewReader(data), headerSize, 1)
		fr.skip, fr.ra = 3, bytes.NewReader(file)
		var last uint64
		for {
			index, r, err := fr.next()
			if err != nil {
				return
			}
			if index <= last {
				t.Fatalf("record %d yielded after %d", index, last)
			}
			last = index
			if len(r) == 0 || !bytes.Contains(data, r) {
				t.Fatalf("record %d is not the input's bytes", index)
			}
		}
	})
}
