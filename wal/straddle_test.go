package wal

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTornWriteWithAFrameHeaderAcrossASector: a power loss after a write
// that was not fsynced may leave a later sector of it on the disk and not
// an earlier one, which then holds what it held at the last fsync: the
// end of the records fsynced then, and zeros. When the frame header that
// begins the write straddles the boundary of those two sectors, its first
// bytes read as zeros (the zeros written ahead) and its last ones as
// written. Whatever the split, that is the torn end of the log: Open
// keeps the fsynced record, cuts the rest with a warning, and refuses
// nothing.
func TestTornWriteWithAFrameHeaderAcrossASector(t *testing.T) {
	for d := 1; d <= frameHeader; d++ { // bytes of the header before the sector boundary
		t.Run(fmt.Sprintf("split%d", d), func(t *testing.T) {
			src := t.TempDir()
			cfg := testConfig(t, src)
			l := mustOpen(t, cfg)
			defer l.Close()
			// Record 1's frame ends d bytes before the end of the second
			// sector: record 2's header begins there.
			first := bytes.Repeat([]byte{'x'}, 2*sectorSize-d-headerSize-frameHeader)
			appendWait(t, l, first)
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			seg := segments(t, src)[0]
			synced, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			appendWait(t, l, bytes.Repeat([]byte{'y'}, 300))
			appendWait(t, l, bytes.Repeat([]byte{'z'}, 300))
			written, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			if got := int64(headerSize + frameHeader + len(first)); got != 2*sectorSize-int64(d) {
				t.Fatalf("record 2 begins at %d, want %d", got, 2*sectorSize-d)
			}
			// The power loss: the second sector as at the fsync, every
			// other one as written.
			crashed := bytes.Clone(written)
			copy(crashed[sectorSize:2*sectorSize], synced[sectorSize:2*sectorSize])

			dir := t.TempDir()
			path := filepath.Join(dir, filepath.Base(seg))
			if err := os.WriteFile(path, crashed, 0o640); err != nil {
				t.Fatal(err)
			}
			ccfg := testConfig(t, dir)
			var logs bytes.Buffer
			ccfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			c, err := Open(ccfg)
			if err != nil {
				t.Fatalf("Open after a torn write: %v", err)
			}
			defer c.Close()
			got := replayAll(t, c, 1)
			if len(got) != 1 || !bytes.Equal(got[1], first) {
				t.Fatalf("replayed %d records, want record 1 alone", len(got))
			}
			if !strings.Contains(logs.String(), "torn last record truncated") {
				t.Fatalf("no warning of the cut: %q", logs.String())
			}
		})
	}
}
