package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestListenInUseWritesNothing: `baton serve` on an address another
// process holds (listen, or native_listen) exits 1 naming the setting and
// the address, and writes nothing in data_dir (no log, no lock file): a
// refused start changes no state. (The settings' check creates data_dir
// itself, empty, to see that it can write there.)
func TestListenInUseWritesNothing(t *testing.T) {
	for _, field := range []string{"listen", "native_listen"} {
		t.Run(field, func(t *testing.T) {
			busy, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer busy.Close()
			addr := busy.Addr().String()
			dir := filepath.Join(t.TempDir(), "new")
			args := []string{"--data-dir", dir}
			if field == "listen" {
				args = append(args, "--listen", addr)
			} else {
				args = append(args, "--native-listen", addr)
			}
			code, stderr := runServe(t, nil, args...)
			if code != exitError || !strings.Contains(stderr, field+": ") || !strings.Contains(stderr, addr) {
				t.Errorf("serve with %s %s in use: exit %d, want 1 naming %s and the address:\n%s", field, addr, code, field, stderr)
			}
			if ents, err := os.ReadDir(dir); err != nil || len(ents) > 0 {
				names := []string{}
				for _, e := range ents {
					names = append(names, e.Name())
				}
				t.Fatalf("serve refused (%s in use) but data_dir %s holds %q (%v), want it empty", field, dir, names, err)
			}
		})
	}
}
