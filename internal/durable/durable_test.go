package durable

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileReplaces(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	for _, want := range []string{"one\n", "two\n"} {
		if err := WriteFile(p, []byte(want)); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil || string(b) != want {
			t.Fatalf("after WriteFile(%q): %q, %v", want, b, err)
		}
	}
	if _, err := os.Stat(p + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary file left behind: %v", err)
	}
}

// A rename whose directory could not be fsynced is not durable: the
// write reports the failure.
func TestWriteFileReportsTheDirectorySync(t *testing.T) {
	failed := errors.New("fsync of the directory: input/output error")
	syncDir = func(string) error { return failed }
	defer func() { syncDir = SyncDir }()
	if err := WriteFile(filepath.Join(t.TempDir(), "f"), []byte("x")); !errors.Is(err, failed) {
		t.Errorf("WriteFile with the directory's fsync failing: %v, want %v", err, failed)
	}
}

// A write that cannot create its temporary file leaves path as it was.
func TestWriteFileFailureLeavesTheOldFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := WriteFile(p, []byte("old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p+".tmp", 0o755); err != nil { // OpenFile of tmp fails
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("new")); err == nil {
		t.Fatal("WriteFile with its temporary path a directory: nil error")
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Errorf("after a failed WriteFile: %q, want %q", b, "old")
	}
}
