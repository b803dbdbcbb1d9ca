package cluster

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The stream's format is written down once, in frames.go's comment; this
// test holds the code to it: the magic and its version byte, and for each
// frame kind of the table its letter and its fields in order (each a
// uvarint; "n, then n bytes" a length and the bytes), against what
// appendFrame writes and readFrame reads back. A kind the table lacks, or
// one the code does not know, fails too.
func TestFramesMatchTheirDocComment(t *testing.T) {
	src, err := os.ReadFile("frames.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src)
	doc = doc[strings.Index(doc, "// The replication stream"):]
	doc = doc[:strings.Index(doc, "\nconst (")]

	m := regexp.MustCompile(`"(\w+)"\)?,? and the version\s+// byte (\d+)`).FindStringSubmatch(doc)
	if m == nil {
		t.Fatal("frames.go's comment no longer names the magic and its version byte")
	}
	if v, _ := strconv.Atoi(m[2]); streamMagic != m[1]+string(rune(v)) {
		t.Errorf("streamMagic %q; the comment says %q and version byte %s", streamMagic, m[1], m[2])
	}

	// Distinct values per field, so that a field out of place shows.
	values := map[string]uint64{"epoch": 3, "last_token": 300, "state_token": 299, "resume_from": 42, "base": 41, "index": 42, "last_index": 43}
	fieldOf := map[string]func(*frame) *uint64{
		"epoch": func(f *frame) *uint64 { return &f.epoch }, "last_token": func(f *frame) *uint64 { return &f.lastToken },
		"state_token": func(f *frame) *uint64 { return &f.stateToken }, "resume_from": func(f *frame) *uint64 { return &f.resumeFrom },
		"base": func(f *frame) *uint64 { return &f.index }, "index": func(f *frame) *uint64 { return &f.index },
		"last_index": func(f *frame) *uint64 { return &f.index },
	}
	row := regexp.MustCompile(`(?m)^//\t'(.)' (\w+) +(.*)$`)
	kinds := map[byte]bool{}
	for _, r := range row.FindAllStringSubmatch(doc, -1) {
		kind, name := r[1][0], r[2]
		kinds[kind] = true
		text := regexp.MustCompile(`\s*\([^)]*\)`).ReplaceAllString(strings.SplitN(r[3], ":", 2)[0], "")
		fields := strings.Split(text, ",")
		f := frame{kind: kind}
		want := []byte{kind}
		for _, fl := range fields {
			fl = strings.TrimSpace(fl)
			switch {
			case fl == "n":
				f.data = []byte(name)
				want = binary.AppendUvarint(want, uint64(len(f.data)))
			case strings.HasPrefix(fl, "then n bytes"):
				want = append(want, f.data...)
			default:
				get, ok := fieldOf[fl]
				if !ok {
					t.Fatalf("%c %s: field %q of the comment is unknown to this test", kind, name, fl)
				}
				*get(&f) = values[fl]
				want = binary.AppendUvarint(want, values[fl])
			}
		}
		if got := appendFrame(nil, &f); !bytes.Equal(got, want) {
			t.Errorf("%c %s: appendFrame writes %x; the comment's fields %q make %x", kind, name, got, fields, want)
			continue
		}
		var back frame
		if err := readFrame(bufio.NewReader(bytes.NewReader(want)), &back); err != nil {
			t.Errorf("%c %s: readFrame of the comment's bytes %x: %v", kind, name, want, err)
		} else if back.kind != f.kind || back.epoch != f.epoch || back.lastToken != f.lastToken || back.stateToken != f.stateToken ||
			back.resumeFrom != f.resumeFrom || back.index != f.index || !bytes.Equal(back.data, f.data) {
			t.Errorf("%c %s: readFrame gives %+v, want %+v", kind, name, back, f)
		}
	}
	for _, k := range []byte{frameBegin, frameSnapshot, frameRecord, frameHeartbeat, frameMoved} {
		if !kinds[k] {
			t.Errorf("frame kind %q has no row in frames.go's comment", k)
		}
	}
	if len(kinds) != 5 {
		t.Errorf("frames.go's comment has %d kinds, the code 5", len(kinds))
	}
}
