package wal

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteAtQuickIsWriteAt: a segment's writeAtQuick (a raw pwrite(2)
// on Linux) writes what WriteAt writes, where it writes it, and fails as
// it does on a closed file, naming the file.
func TestWriteAtQuickIsWriteAt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seg")
	of, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	f := newOSFile(of)
	for _, w := range []struct {
		b   string
		off int64
	}{{"hello", 0}, {"world", 8}, {"HE", 0}, {"", 3}} {
		n, err := f.writeAtQuick([]byte(w.b), w.off)
		if n != len(w.b) || err != nil {
			t.Fatalf("writeAtQuick(%q, %d) = %d, %v", w.b, w.off, n, err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "HEllo\x00\x00\x00world"; string(got) != want {
		t.Fatalf("file holds %q, want %q", got, want)
	}
	of.Close()
	_, err = f.writeAtQuick([]byte("x"), 0)
	_, werr := of.WriteAt([]byte("x"), 0)
	var pe *os.PathError
	if !errors.Is(err, os.ErrClosed) || !errors.As(err, &pe) || pe.Path != path || pe.Op != "write" {
		t.Fatalf("writeAtQuick on a closed file = %v, want a *os.PathError write %s (WriteAt says %v)", err, path, werr)
	}
}
