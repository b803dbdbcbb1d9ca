package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An invalid setting changes nothing: refused by name, it leaves no
// data_dir behind. The check that data_dir can be written created it
// (and wrote a probe file in it) before the settings checked after it
// were read, so `baton serve --data-dir /new/dir --log-level loud` was
// refused naming log_level and left /new/dir created.
func TestInvalidSettingCreatesNoDataDir(t *testing.T) {
	for _, c := range []struct{ flag, value, field string }{
		{"--fsync", "sometimes", "fsync"},
		{"--fsync-interval", "1s", "fsync_interval"},
		{"--max-body", "10", "max_body"},
		{"--log-level", "loud", "log_level"},
		{"--log-format", "xml", "log_format"},
		{"--cors-origins", "a.example", "cors_origins"},
		{"--max-keys", "-1", "max_keys"},
		{"--lease-default", "2h", "lease_default"},
	} {
		t.Run(c.field, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			_, err := loadConfig([]string{"--listen", "127.0.51.1:7070", "--data-dir", dir, c.flag, c.value}, nil)
			if err == nil || !strings.HasPrefix(err.Error(), c.field+":") {
				t.Fatalf("%s %s: got %v, want an error naming %s", c.flag, c.value, err, c.field)
			}
			if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
				t.Errorf("%s %s was refused (%v), yet data_dir %s exists now (stat: %v)", c.flag, c.value, err, dir, serr)
			}
		})
	}
	// A valid configuration still creates it, and checks it can be written.
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := loadConfig([]string{"--listen", "127.0.51.1:7070", "--data-dir", dir}, nil); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("a valid configuration: data_dir %s: %v", dir, err)
	}
}
