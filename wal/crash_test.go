package wal

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// crashWriter is the child process of TestKill9: four goroutines append
// and wait, and print "index payload-hex" for every acknowledged record,
// until killed.
func crashWriter(dir, mode string) {
	cfg := DefaultConfig(dir)
	cfg.Sync, _ = ParseSyncMode(mode)
	cfg.SegmentSize = 64 << 10
	l, err := Open(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				p := fmt.Appendf(nil, "pid %d writer %d seq %d %s", os.Getpid(), g, i, strings.Repeat("z", i%64))
				idx, err := l.Append(p)
				if err == nil {
					err = l.Wait(idx)
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(4)
				}
				mu.Lock()
				fmt.Fprintf(out, "%d %x\n", idx, p)
				out.Flush() // acknowledged: the parent hears of it now
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// TestKill9 kills a writing process at an arbitrary moment, again and
// again: each restart finds every record that was acknowledged, with its
// bytes, and goes on from there.
func TestKill9(t *testing.T) {
	for _, mode := range []string{"always", "interval", "never"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			acked := map[uint64][]byte{}
			for round, kills := 0, []int{50, 700, 3, 2000, 400}; round < len(kills); round++ {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), "WAL_TEST_WRITER_DIR="+dir, "WAL_TEST_WRITER_MODE="+mode)
				stdout, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				var stderr strings.Builder
				cmd.Stderr = &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				sc := bufio.NewScanner(stdout)
				n := 0
				for sc.Scan() {
					f := strings.Fields(sc.Text())
					idx, err1 := strconv.ParseUint(f[0], 10, 64)
					p, err2 := hex.DecodeString(f[1])
					if err1 != nil || err2 != nil {
						t.Fatalf("child said %q", sc.Text())
					}
					acked[idx] = p
					if n++; n == kills[round] {
						cmd.Process.Signal(syscall.SIGKILL)
					}
				}
				cmd.Wait()
				if n < kills[round] {
					t.Fatalf("child ended after %d acknowledgements: %s", n, stderr.String())
				}

				l := mustOpen(t, testConfig(t, dir))
				found := 0
				if err := l.Replay(1, func(i uint64, r []byte) error {
					if want, ok := acked[i]; ok {
						if string(want) != string(r) {
							return fmt.Errorf("record %d is %q, was acknowledged as %q", i, r, want)
						}
						found++
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if found != len(acked) {
					t.Fatalf("round %d: %d of %d acknowledged records found after kill -9", round, found, len(acked))
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("%d acknowledged records survived 5 kills", len(acked))
		})
	}
}
