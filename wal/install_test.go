package wal

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
)

// A standby's log: records at given indexes, AppendAt refusing a gap or a
// repeat, Install replacing everything by a snapshot at an index, and a
// restart from it.
func TestAppendAtAndInstall(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, testConfig(t, dir))
	var tapped []uint64
	l.SetTap(func(i uint64, rec []byte) { tapped = append(tapped, i) })
	for i := uint64(1); i <= 3; i++ {
		if err := l.AppendAt(i, rec(int(i))); err != nil {
			t.Fatalf("AppendAt(%d): %v", i, err)
		}
	}
	for _, bad := range []uint64{3, 5, 0} {
		if err := l.AppendAt(bad, rec(9)); !errors.Is(err, ErrIndexGap) {
			t.Fatalf("AppendAt(%d) after 3: %v, want ErrIndexGap", bad, err)
		}
	}
	if i, err := l.Append(rec(4)); err != nil || i != 4 {
		t.Fatalf("Append after AppendAt: %d, %v", i, err)
	}
	if err := l.Wait(4); err != nil {
		t.Fatal(err)
	}
	if want := []uint64{1, 2, 3, 4}; !slices.Equal(tapped, want) {
		t.Fatalf("tap saw %v, want %v", tapped, want)
	}
	// Install a snapshot at 100: the old records and snapshots go.
	if err := l.SaveSnapshot(2, func(w io.Writer) error { _, err := w.Write([]byte("old")); return err }); err != nil {
		t.Fatal(err)
	}
	if err := l.Install(100, func(w io.Writer) error { _, err := w.Write([]byte("new state")); return err }); err != nil {
		t.Fatalf("Install: %v", err)
	}
	if l.LastIndex() != 100 || l.FirstIndex() != 101 {
		t.Fatalf("after Install(100): last %d first %d", l.LastIndex(), l.FirstIndex())
	}
	if err := l.AppendAt(100, rec(1)); !errors.Is(err, ErrIndexGap) {
		t.Fatalf("AppendAt(100) after Install(100): %v", err)
	}
	if err := l.AppendAt(101, rec(101)); err != nil {
		t.Fatal(err)
	}
	if err := l.Wait(101); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = mustOpen(t, testConfig(t, dir))
	defer l.Close()
	idx, r, err := l.LoadSnapshot()
	if err != nil || idx != 100 {
		t.Fatalf("LoadSnapshot after restart: %d, %v", idx, err)
	}
	b, _ := io.ReadAll(r)
	r.Close()
	if string(b) != "new state" {
		t.Fatalf("snapshot payload %q", b)
	}
	var got []uint64
	if err := l.Replay(101, func(i uint64, r []byte) error {
		if !bytes.Equal(r, rec(int(i))) {
			t.Errorf("record %d: wrong bytes", i)
		}
		got = append(got, i)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []uint64{101}) || l.LastIndex() != 101 {
		t.Fatalf("replayed %v, last %d", got, l.LastIndex())
	}
	// Install at 0: an empty log from the start again.
	if err := l.Install(0, nil); err != nil {
		t.Fatal(err)
	}
	if i, err := l.Append(rec(1)); err != nil || i != 1 {
		t.Fatalf("Append after Install(0): %d, %v", i, err)
	}
	if _, _, err := l.LoadSnapshot(); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("LoadSnapshot after Install(0): %v", err)
	}
}
