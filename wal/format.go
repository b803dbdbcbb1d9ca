package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// The byte layout is documented in doc.go, pinned by TestGoldenBytes and
// held to doc.go's tables by TestLayoutMatchesDocGo.
const (
	segmentMagic   = "BATONWAL"
	snapshotMagic  = "BATONSNP"
	snapshotEnd    = "BSNE"
	formatVersion  = 1
	headerSize     = 32 // segment and snapshot header
	frameHeader    = 8  // length u32 + CRC-32C u32
	snapshotFooter = 16 // payload length u64 + CRC-32C u32 + end magic

	// MaxRecordSize is the largest record Append accepts, in bytes: the
	// frame's length field has 24 bits.
	MaxRecordSize = 1<<24 - 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frameCRC is the checksum of one frame: CRC-32C over the length field,
// the record's index (u64 little-endian) and the payload, so that a frame
// found at the wrong index, or with a damaged length, does not verify.
// scratch (8 bytes) holds the index: a caller's buffer, so that nothing
// escapes to the heap per record.
func frameCRC(lenField []byte, index uint64, payload, scratch []byte) uint32 {
	binary.LittleEndian.PutUint64(scratch, index)
	c := crc32.Update(0, castagnoli, lenField)
	c = crc32.Update(c, castagnoli, scratch[:8])
	return crc32.Update(c, castagnoli, payload)
}

// appendFrame appends the frame of the record at index to buf.
func appendFrame(buf []byte, index uint64, rec []byte) []byte {
	start := len(buf)
	n := len(rec)
	buf = append(buf, byte(n), byte(n>>8), byte(n>>16), 0)
	buf[start+3] = crc8(buf[start : start+3])
	// The index goes where the checksum will be, as frameCRC's scratch.
	buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0)
	sum := frameCRC(buf[start:start+4], index, rec, buf[start+4:])
	buf = binary.LittleEndian.AppendUint32(buf[:start+4], sum)
	return append(buf, rec...)
}

// crc8 is the CRC-8 (polynomial x^8+x^2+x+1, 0x07) that guards a frame's
// length on its own, so that a damaged length is seen as damage before
// it is used to find the next frame (a length grown past the end of the
// file would otherwise look like a torn tail and cut good records).
func crc8(b []byte) byte {
	var c byte
	for _, x := range b {
		c = crc8Table[c^x]
	}
	return c
}

var crc8Table = func() (t [256]byte) {
	for i := range t {
		c := byte(i)
		for range 8 {
			if c&0x80 != 0 {
				c = c<<1 ^ 0x07
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// encodeHeader returns the 32-byte header of a segment (magic segmentMagic)
// or a snapshot (snapshotMagic) whose index is index.
func encodeHeader(magic string, index uint64) []byte {
	h := make([]byte, headerSize)
	copy(h, magic)
	binary.LittleEndian.PutUint32(h[8:], formatVersion)
	// h[12:16]: flags, zero in version 1.
	binary.LittleEndian.PutUint64(h[16:], index)
	binary.LittleEndian.PutUint32(h[24:], crc32.Checksum(h[:24], castagnoli))
	// h[28:32]: reserved, zero.
	return h
}

// decodeHeader checks a header read from file and returns its index; the
// error says what is wrong with it (the caller wraps it in a CorruptError).
func decodeHeader(magic string, h []byte) (uint64, error) {
	switch {
	case len(h) < headerSize:
		return 0, fmt.Errorf("header cut short: %d of %d bytes", len(h), headerSize)
	case string(h[:8]) != magic:
		return 0, fmt.Errorf("bad magic %q, want %q", h[:8], magic)
	case crc32.Checksum(h[:24], castagnoli) != binary.LittleEndian.Uint32(h[24:]):
		return 0, errors.New("header checksum mismatch")
	case binary.LittleEndian.Uint32(h[8:]) != formatVersion:
		return 0, fmt.Errorf("format version %d, this build reads %d", binary.LittleEndian.Uint32(h[8:]), formatVersion)
	}
	return binary.LittleEndian.Uint64(h[16:]), nil
}

// errTorn reports an unfinished last frame: the file ends inside it, or it
// does not verify, ends in zeros and only zeros follow it, or a sector of
// it is blank (a write cut by a crash).
type errTorn struct {
	offset int64
	reason string
}

func (e *errTorn) Error() string {
	return fmt.Sprintf("torn frame at offset %d: %s", e.offset, e.reason)
}

// errDamage reports a frame that is wrong and is followed by more data:
// never the effect of an interrupted append.
type errDamage struct {
	offset int64
	reason string
}

func (e *errDamage) Error() string { return fmt.Sprintf("offset %d: %s", e.offset, e.reason) }

// frameReader reads the frames of one segment, after its header. It
// yields only records whose checksum verifies; it never allocates more
// than MaxRecordSize for one record.
type frameReader struct {
	r     *bufio.Reader
	off   int64  // offset of the next frame in the file
	index uint64 // index of the next record
	buf   []byte
	h     [frameHeader]byte
	idx   [8]byte // frameCRC's scratch
	// skip: a record at or below it whose payload fails its checksum
	// while its length verifies (so that the next frame is found) is
	// passed over, its index appended to skipped: nobody needs it (the
	// snapshot holds it, or the reader's caller asked for later ones).
	skip    uint64
	skipped []uint64
	// ra, when set, reads the file at its offsets (off's), so that damage
	// in records at or below skip whose frame's length cannot be read (a
	// blank sector) is passed over too (resync).
	ra io.ReaderAt
}

// errPassed is next's own signal that it passed over a record (skip).
var errPassed = errors.New("wal: record passed over")

func newFrameReader(r io.Reader, off int64, first uint64) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10), off: off, index: first}
}

// next returns the next record and its index. rec is valid until the next
// call. At the clean end of the data it returns io.EOF; otherwise an
// *errTorn or *errDamage (whose offset is the frame's start), or the read
// error of the underlying reader.
func (fr *frameReader) next() (index uint64, rec []byte, err error) {
	for {
		index, rec, err = fr.frame()
		switch {
		case err == errPassed:
		case err != nil && err != io.EOF && fr.index <= fr.skip && fr.resync():
		default:
			return index, rec, err
		}
	}
}

// resync passes over damage in a record at or below skip that frame could
// not pass over (its length unreadable: a blank sector, a zeroed header):
// it finds the next whole frame (findFrame, from just after the damaged
// frame's start) and goes on from there, when every record before it is
// at or below skip, appending their indexes to skipped. It reports
// whether it did; false leaves the reader as it was (the damage is then
// reported).
func (fr *frameReader) resync() bool {
	if fr.ra == nil {
		return false
	}
	b := make([]byte, frameSearch+1<<20) // the window, and a whole frame of up to 1 MiB
	n, err := fr.ra.ReadAt(b, fr.off)
	if err != nil && err != io.EOF {
		return false
	}
	b = b[:n]
	o, idx, ok := findFrame(b, 1, fr.index+1)
	if !ok || idx-1 > fr.skip {
		return false
	}
	for i := fr.index; i < idx; i++ {
		fr.skipped = append(fr.skipped, i)
	}
	fr.off += o
	fr.index = idx
	fr.r.Reset(io.NewSectionReader(fr.ra, fr.off, 1<<62))
	return true
}

// frame is next for one frame; errPassed when it passed over a record.
func (fr *frameReader) frame() (index uint64, rec []byte, err error) {
	h := fr.h[:]
	n, err := io.ReadFull(fr.r, h)
	switch {
	case err == io.EOF:
		return 0, nil, io.EOF
	case err == io.ErrUnexpectedEOF:
		return 0, nil, &errTorn{fr.off, fmt.Sprintf("file ends %d bytes into the frame header", n)}
	case err != nil:
		return 0, nil, err
	}
	length := uint32(h[0]) | uint32(h[1])<<8 | uint32(h[2])<<16
	sum := binary.LittleEndian.Uint32(h[4:])
	if crc8(h[:3]) != h[3] {
		if torn, err := fr.unfinished(h, nil); err != nil {
			return 0, nil, err
		} else if torn != "" {
			return 0, nil, &errTorn{fr.off, "damaged length in the last frame (" + torn + ")"}
		}
		return 0, nil, &errDamage{fr.off, "frame length fails its check byte"}
	}
	if length == 0 {
		// Append refuses empty records, so a zero length is the zeros
		// written ahead of the records (Config.Preallocate) or left by a
		// file system after a crash, or damage. A header across a sector
		// boundary whose first sector never reached the disk reads as a
		// zero length too, with the checksum that did (its first bytes are
		// the zeros written ahead): blank from its start to the sector's
		// end, a torn write.
		blank := fr.blankSector(h, nil)
		if sum == 0 {
			if zeros, err := fr.onlyZerosFollow(); err != nil {
				return 0, nil, err
			} else if zeros {
				return 0, nil, io.EOF // the end of the log
			}
		}
		if blank {
			return 0, nil, &errTorn{fr.off, "a sector of the last write is blank"}
		}
		return 0, nil, &errDamage{fr.off, "frame of length 0"}
	}
	if cap(fr.buf) < int(length) {
		fr.buf = make([]byte, length)
	}
	rec = fr.buf[:length]
	if n, err := io.ReadFull(fr.r, rec); err == io.EOF || err == io.ErrUnexpectedEOF {
		if fr.successorIn(rec[:n]) {
			return 0, nil, &errDamage{fr.off, fmt.Sprintf("frame length %d runs past the end of the file, over the next record, whole", length)}
		}
		return 0, nil, &errTorn{fr.off, fmt.Sprintf("file ends %d of %d bytes into the record", n, length)}
	} else if err != nil {
		return 0, nil, err
	}
	if frameCRC(h[:4], fr.index, rec, fr.idx[:]) != sum {
		if fr.index <= fr.skip {
			fr.skipped = append(fr.skipped, fr.index)
			fr.index++
			fr.off += frameHeader + int64(length)
			return 0, nil, errPassed
		}
		if torn, err := fr.unfinished(h, rec); err != nil {
			return 0, nil, err
		} else if torn != "" {
			return 0, nil, &errTorn{fr.off, fmt.Sprintf("checksum mismatch in the last frame (record %d; %s)", fr.index, torn)}
		}
		return 0, nil, &errDamage{fr.off, fmt.Sprintf("checksum mismatch (record %d)", fr.index)}
	}
	index = fr.index
	fr.index++
	fr.off += frameHeader + int64(length)
	return index, rec, nil
}

// frameSearch is how far findFrame looks for a whole frame past damage:
// a blank sector and the frames it ate, with room to spare.
const frameSearch = 8 << 10

// frameSearchRecords is how many records past damage findFrame tries:
// more than the frames of the smallest records a blank sector can hold.
const frameSearchRecords = 64

// frameLength returns the length in the frame header at the start of b,
// when its check byte verifies and it is not 0.
func frameLength(b []byte) (int64, bool) {
	if len(b) < frameHeader || crc8(b[:3]) != b[3] {
		return 0, false
	}
	length := int64(b[0]) | int64(b[1])<<8 | int64(b[2])<<16
	return length, length > 0
}

// wholeFrame reports whether the frame at o in b is whole and verifies
// as record idx, and where it ends.
func wholeFrame(b []byte, o int64, idx uint64) (end int64, ok bool) {
	length, ok := frameLength(b[min(o, int64(len(b))):])
	if !ok || o+frameHeader+length > int64(len(b)) {
		return 0, false
	}
	var scratch [8]byte
	end = o + frameHeader + length
	return end, frameCRC(b[o:o+4], idx, b[o+frameHeader:end], scratch[:]) == binary.LittleEndian.Uint32(b[o+4:o+8])
}

// findFrame finds the first offset at or after from, within frameSearch
// bytes, where a frame whole and verifying as one of the
// frameSearchRecords records from first on begins: the first one past
// damage (its index is in its checksum, so nothing else verifies there
// but once in 2^32).
func findFrame(b []byte, from int64, first uint64) (off int64, idx uint64, ok bool) {
	for o := from; o < min(from+frameSearch, int64(len(b))); o++ {
		if _, ok := frameLength(b[o:]); !ok {
			continue
		}
		for idx := first; idx < first+frameSearchRecords; idx++ {
			if _, ok := wholeFrame(b, o, idx); ok {
				return o, idx, true
			}
		}
	}
	return 0, 0, false
}

// successorIn reports whether b, what follows the header of the frame
// at fr.off up to the end of the file, holds the next record's frame
// whole and verifying (its index is in its checksum). The frame's length
// then cannot be that of a write cut by a crash, whose bytes after the
// header are a prefix of its own payload: the length was damaged after
// it was written (a damaged length passes its check byte once in 256),
// and cutting the log there would drop records written before it.
func (fr *frameReader) successorIn(b []byte) bool {
	for o := int64(0); o+frameHeader < int64(len(b)); o++ {
		if _, ok := wholeFrame(b, o, fr.index+1); ok {
			return true
		}
	}
	return false
}

// sectorSize is the unit a disk writes whole or not at all.
const sectorSize = 512

// unfinished judges a frame that does not verify, whose header and
// payload (nil if its length is not to be trusted) were just read: it
// says why the frame is the end of a write cut by a crash ("" if it is
// not: damage). That is so when only zeros follow it and its own last
// byte is a zero (the part of the write from the cut on never landed:
// a whole frame whose last byte is not zero was written to its end, and
// a mismatch in it is damage, not a crash), or when one of the sectors it
// lies in is blank (see blankSector). It consumes the reader.
func (fr *frameReader) unfinished(h, payload []byte) (string, error) {
	blank := fr.blankSector(h, payload)
	zeros, err := fr.onlyZerosFollow()
	last := h[len(h)-1]
	if len(payload) > 0 {
		last = payload[len(payload)-1]
	}
	switch {
	case err != nil:
		return "", err
	case zeros && last == 0:
		return "only zeros follow", nil
	case blank:
		return "a sector of it is blank", nil
	}
	return "", nil
}

// blankSector reports whether a sector that the frame at fr.off lies in
// (its header, and its payload if given) holds only zeros from the
// frame's start, or the sector's start, to the sector's end: a sector of
// its write that never reached the disk. After a power loss the sectors
// of a write that was not yet fsynced may be on the disk in any order,
// and with zeros written ahead (Config.Preallocate) the file's size does
// not hide the missing ones. As in etcd's log, such a frame is taken for
// the torn end of the log; a valid header is never all zeros, nor is
// the start of any frame. It reads ahead without consuming.
func (fr *frameReader) blankSector(h, payload []byte) bool {
	start := fr.off
	n := int64(len(h) + len(payload))
	// Read on to the end of the frame's last sector (or of the file).
	ahead, _ := fr.r.Peek(int((sectorSize - (start+n)%sectorSize) % sectorSize))
	at := func(i int64) byte { // byte i of the frame and what follows it
		switch {
		case i < int64(len(h)):
			return h[i]
		case i < n:
			return payload[i-int64(len(h))]
		}
		return ahead[i-n]
	}
	avail := n + int64(len(ahead))
	for lo := int64(0); lo < n; {
		hi := min((start+lo)/sectorSize*sectorSize+sectorSize-start, avail)
		blank := true
		for i := lo; i < hi && blank; i++ {
			blank = at(i) == 0
		}
		if blank && hi > lo {
			return true
		}
		lo = hi
	}
	return false
}

// onlyZerosFollow consumes the rest of the reader and reports whether it
// held nothing but zero bytes.
func (fr *frameReader) onlyZerosFollow() (bool, error) {
	var b [4096]byte
	for {
		n, err := fr.r.Read(b[:])
		for _, c := range b[:n] {
			if c != 0 {
				return false, nil
			}
		}
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return false, err
		}
	}
}
