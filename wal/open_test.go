package wal

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestLockRefusesSecondOpen(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, testConfig(t, dir))
	_, err := Open(testConfig(t, dir))
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second Open = %v, want ErrLocked naming %s", err, dir)
	}
	// Another process is refused too, and told who holds it.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "WAL_TEST_OPEN_DIR="+dir)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("second process: %v, output %q; want exit 3", err, out)
	}
	pid := strings.TrimSpace(func() string { b, _ := os.ReadFile(filepath.Join(dir, lockName)); return string(b) }())
	for _, part := range []string{dir, "another process", "pid " + pid} {
		if !strings.Contains(string(out), part) {
			t.Fatalf("second process said %q, which does not name %q", out, part)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close = %v, want the first one's nil", err)
	}
	// Released on Close: another process may now open it.
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "WAL_TEST_OPEN_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("Open after Close in another process: %v %s", err, out)
	}
}

// The lock does not hang on the LOCK file alone: with it removed while
// a log is open (a cleaner of old files, an operator), a second Open of
// the directory is refused all the same. Two nodes on one data_dir
// granted the same key and wrote over each other's records.
func TestLockSurvivesTheRemovalOfItsFile(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, testConfig(t, dir))
	defer l.Close()
	if err := os.Remove(filepath.Join(dir, lockName)); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(testConfig(t, dir))
	if err == nil {
		l2.Close()
	}
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Open with LOCK removed = %v, want ErrLocked naming %s", err, dir)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "WAL_TEST_OPEN_DIR="+dir)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(string(out), "another process") {
		t.Fatalf("another process with LOCK removed: %v, output %q; want exit 3, another process", err, out)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	for key, mutate := range map[string]func(*Config){
		"data_dir":       func(c *Config) { c.Dir = "" },
		"fsync:":         func(c *Config) { c.Sync = 7 },
		"fsync_interval": func(c *Config) { c.SyncInterval = 0 },
		"segment size":   func(c *Config) { c.SegmentSize = 100 },
		"fail timeout":   func(c *Config) { c.FailTimeout = -1 },
		"retry interval": func(c *Config) { c.RetryInterval = 0 },
	} {
		cfg := DefaultConfig(t.TempDir())
		mutate(&cfg)
		if _, err := Open(cfg); err == nil || !strings.HasPrefix(err.Error(), key) {
			t.Errorf("%s: Open = %v, want an error naming it", key, err)
		}
	}
	if _, err := ParseSyncMode("sometimes"); err == nil || !strings.HasPrefix(err.Error(), "fsync:") {
		t.Errorf("ParseSyncMode(sometimes) = %v", err)
	}
	for _, m := range []SyncMode{SyncAlways, SyncInterval, SyncNever} {
		if got, err := ParseSyncMode(m.String()); err != nil || got != m {
			t.Errorf("ParseSyncMode(%q) = %v, %v", m, got, err)
		}
	}
}

func TestAppendRefusesBadRecordsAndClosedLog(t *testing.T) {
	l := mustOpen(t, testConfig(t, t.TempDir()))
	if _, err := l.Append(nil); !errors.Is(err, ErrEmptyRecord) {
		t.Errorf("Append(empty) = %v", err)
	}
	if _, err := l.Append(make([]byte, MaxRecordSize+1)); !errors.Is(err, ErrRecordTooLarge) {
		t.Errorf("Append(too large) = %v", err)
	}
	if err := l.Wait(1); err == nil {
		t.Error("Wait for a record never appended returned nil")
	}
	big := appendWait(t, l, make([]byte, MaxRecordSize))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close = %v", err)
	}
	l = mustOpen(t, testConfig(t, l.cfg.Dir))
	defer l.Close()
	n := 0
	if err := l.Replay(1, func(i uint64, r []byte) error {
		if i != big || len(r) != MaxRecordSize {
			t.Errorf("record %d of %d bytes", i, len(r))
		}
		n++
		return nil
	}); err != nil || n != 1 {
		t.Fatalf("Replay: %v, %d records", err, n)
	}
}
