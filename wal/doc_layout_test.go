package wal

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The byte layout is written down once, in doc.go's tables (segment
// header, frame, snapshot file); TestGoldenBytes pins the bytes, this test
// pins the tables to them: each row's offset and size, and what it says
// the bytes hold (a magic, a version, zeros, an index, a length, a CRC of
// the bytes named, the payload), against what the code writes. A row
// changed in doc.go, or a layout changed in the code, fails here.
func TestLayoutMatchesDocGo(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src)

	const index = 7
	payload := []byte("grant")
	hdr := encodeHeader(segmentMagic, index)
	rows := docTable(t, doc, "Segment header")
	if want := docSize(t, doc, `# Segment header \((\d+) bytes\)`); len(hdr) != want || headerSize != want {
		t.Errorf("doc.go: a %d-byte segment header; encodeHeader writes %d, headerSize %d", want, len(hdr), headerSize)
	}
	checkRows(t, "segment header", rows, hdr, index, nil)

	frame := appendFrame(nil, index, payload)
	rows = docTable(t, doc, "Frame")
	if want := docSize(t, doc, `# Frame \(one record; (\d+) bytes \+ payload`); len(frame)-len(payload) != want || frameHeader != want {
		t.Errorf("doc.go: %d bytes + payload a frame; appendFrame writes %d + payload, frameHeader %d", want, len(frame)-len(payload), frameHeader)
	}
	if m := regexp.MustCompile(`MaxRecordSize \(2\^(\d+)-1\)`).FindStringSubmatch(doc); m == nil || strconv.Itoa(MaxRecordSize) != strconv.Itoa(1<<atoi(t, m[1])-1) {
		t.Errorf("doc.go's MaxRecordSize %v, the code's %d", m, MaxRecordSize)
	}
	checkRows(t, "frame", rows, frame, index, payload)

	snap := snapshotOfState(t, t.TempDir())
	checkRows(t, "snapshot", docTable(t, doc, "Snapshot file"), snap, 1, []byte("state"))
}

// docRow is one row of a layout table: its offset (-1: right after the
// row before), its size (-1: "n", the payload's) and what it says.
type docRow struct {
	off, size int
	what      string
}

// docTable returns the rows of the table under doc.go's heading "# name".
func docTable(t *testing.T, doc, name string) []docRow {
	t.Helper()
	i := strings.Index(doc, "// # "+name)
	if i < 0 {
		t.Fatalf("doc.go has no heading %q", name)
	}
	section := doc[i+1:]
	section = section[:strings.Index(section, "\n// #")]
	withOff := regexp.MustCompile(`^//\t(\d+) +(\d+|n) +(.*)$`)
	noOff := regexp.MustCompile(`^//\t +(\d+|n) +(.*)$`)
	more := regexp.MustCompile(`^//\t +(\D.*)$`)
	size := func(s string) int {
		if s == "n" {
			return -1
		}
		return atoi(t, s)
	}
	var rows []docRow
	for _, line := range strings.Split(section, "\n") {
		if m := withOff.FindStringSubmatch(line); m != nil {
			rows = append(rows, docRow{atoi(t, m[1]), size(m[2]), m[3]})
		} else if m := noOff.FindStringSubmatch(line); m != nil {
			rows = append(rows, docRow{-1, size(m[1]), m[2]})
		} else if m := more.FindStringSubmatch(line); m != nil && len(rows) > 0 {
			rows[len(rows)-1].what += " " + m[1]
		}
	}
	if len(rows) == 0 {
		t.Fatalf("doc.go's %q has no table", name)
	}
	return rows
}

func docSize(t *testing.T, doc, re string) int {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(doc)
	if m == nil {
		t.Fatalf("doc.go has no %s", re)
	}
	return atoi(t, m[1])
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkRows checks that b, laid out as rows say, holds what each says;
// index is the record's (or the header's) index, payload the bytes of an
// "n" row.
func checkRows(t *testing.T, what string, rows []docRow, b []byte, index uint64, payload []byte) {
	t.Helper()
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	le := func(p []byte) uint64 {
		var v uint64
		for i := len(p) - 1; i >= 0; i-- {
			v = v<<8 | uint64(p[i])
		}
		return v
	}
	quoted := regexp.MustCompile(`"([^"]+)"`)
	span := regexp.MustCompile(`bytes (\d+)\.\.(\d+)`)
	pos := 0
	for _, r := range rows {
		if r.off >= 0 && r.off != pos {
			t.Errorf("%s: doc.go's row %q at offset %d, the row before ends at %d", what, r.what, r.off, pos)
			pos = r.off
		}
		n := r.size
		if n < 0 {
			n = len(payload)
		}
		if pos+n > len(b) {
			t.Errorf("%s: doc.go's row %q ends at %d, the code's bytes at %d", what, r.what, pos+n, len(b))
			return
		}
		field := b[pos : pos+n]
		fail := func(want any) {
			t.Errorf("%s: bytes %d..%d are %x; doc.go's row %q wants %v", what, pos, pos+n-1, field, r.what, want)
		}
		w := r.what
		switch {
		case strings.HasPrefix(w, "header as a segment's"):
			m := quoted.FindStringSubmatch(w)
			if m == nil || string(field) != string(encodeHeader(m[1], index)) {
				fail("a segment's header with that magic")
			}
		case strings.HasPrefix(w, "magic ") || strings.HasPrefix(w, "end mark "):
			if m := quoted.FindStringSubmatch(w); m == nil || string(field) != m[1] {
				fail(w[strings.Index(w, " ")+1:])
			}
		case strings.HasPrefix(w, "format version, "):
			v := regexp.MustCompile(`^format version, (\d+)`).FindStringSubmatch(w)
			if v == nil {
				fail("a version number")
			} else if strconv.FormatUint(le(field), 10) != v[1] {
				fail("version " + v[1])
			}
		case strings.HasPrefix(w, "flags, 0") || strings.HasPrefix(w, "reserved, 0"):
			if le(field) != 0 {
				fail(0)
			}
		case strings.HasPrefix(w, "index of"):
			if le(field) != index {
				fail(index)
			}
		case strings.HasPrefix(w, "n, the length of the payload") || strings.HasPrefix(w, "n, the payload length"):
			if le(field) != uint64(len(payload)) {
				fail(len(payload))
			}
		case strings.HasPrefix(w, "CRC-8 (polynomial 0x07) of bytes"):
			m := span.FindStringSubmatch(w)
			var c byte
			for _, x := range b[atoi(t, m[1]) : atoi(t, m[2])+1] {
				c ^= x
				for range 8 {
					if c&0x80 != 0 {
						c = c<<1 ^ 0x07
					} else {
						c <<= 1
					}
				}
			}
			if field[0] != c {
				fail(c)
			}
		case strings.HasPrefix(w, "CRC-32C of: bytes 0..3, the record's index") && strings.HasSuffix(w, "the payload"):
			var idx [8]byte
			binary.LittleEndian.PutUint64(idx[:], index)
			data := append(append(append([]byte(nil), b[:4]...), idx[:]...), payload...)
			if c := crc32.Checksum(data, castagnoli); le(field) != uint64(c) {
				fail(c)
			}
		case strings.HasPrefix(w, "CRC-32C of bytes "):
			m := span.FindStringSubmatch(w)
			if c := crc32.Checksum(b[atoi(t, m[1]):atoi(t, m[2])+1], castagnoli); le(field) != uint64(c) {
				fail(c)
			}
		case strings.HasPrefix(w, "CRC-32C of the header and the payload"):
			if c := crc32.Checksum(b[:headerSize+len(payload)], castagnoli); le(field) != uint64(c) {
				fail(c)
			}
		case strings.HasPrefix(w, "payload"):
			if string(field) != string(payload) {
				fail(payload)
			}
		default:
			t.Errorf("%s: doc.go's row %q says something this test does not know how to check", what, w)
		}
		pos += n
	}
	if pos != len(b) {
		t.Errorf("%s: doc.go's rows end at byte %d, the code's bytes at %d", what, pos, len(b))
	}
}
