package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestConcurrentAppendWaitSnapshotsAndFaults runs writers, snapshots and
// write failures at once, then reopens the log: every record whose Wait
// returned nil is there with its bytes, at its index, after the snapshot.
func TestConcurrentAppendWaitSnapshotsAndFaults(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval, SyncNever} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			fs := &faults{}
			cfg := testConfig(t, dir)
			cfg.Sync, cfg.WrapFile, cfg.SegmentSize = mode, fs.wrap, 8192
			l := mustOpen(t, cfg)

			var (
				mu    sync.Mutex
				acked = map[uint64][]byte{} // records whose Wait returned nil
				stop  atomic.Bool
				wg    sync.WaitGroup
			)
			payload := func(g, i int) []byte {
				b := binary.LittleEndian.AppendUint32(nil, uint32(g))
				b = binary.LittleEndian.AppendUint32(b, uint32(i))
				return append(b, bytes.Repeat([]byte{byte(i)}, i%50)...)
			}
			for g := 0; g < 6; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; !stop.Load(); i++ {
						p := payload(g, i)
						idx, err := l.Append(p)
						if errors.Is(err, ErrUnavailable) {
							time.Sleep(time.Millisecond)
							continue
						} else if err != nil {
							t.Error(err)
							return
						}
						if err := l.Wait(idx); err == nil {
							mu.Lock()
							acked[idx] = p
							mu.Unlock()
						} else if !errors.Is(err, ErrUnavailable) {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Add(1)
			var snaps []uint64
			snapErrs := 0
			go func() { // snapshots
				defer wg.Done()
				for !stop.Load() {
					time.Sleep(3 * time.Millisecond)
					idx := l.LastIndex()
					if idx == 0 {
						continue
					}
					err := l.SaveSnapshot(idx, func(w io.Writer) error {
						_, err := w.Write(binary.LittleEndian.AppendUint64(nil, idx))
						return err
					})
					if err == nil {
						snaps = append(snaps, idx)
					} else {
						// An injected fault hit the snapshot file or the
						// log's fsync: the old snapshot stays.
						snapErrs++
					}
				}
			}()
			for round := 0; round < 4; round++ { // faults on and off
				time.Sleep(20 * time.Millisecond)
				if round%2 == 0 {
					fs.set(syscall.ENOSPC, nil)
				} else {
					fs.set(nil, syscall.EIO)
				}
				time.Sleep(10 * time.Millisecond)
				fs.set(nil, nil)
			}
			time.Sleep(20 * time.Millisecond)
			stop.Store(true)
			wg.Wait()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			st := l.Stats()
			t.Logf("%d records appended, %d acknowledged, %d snapshots (%d failed), %d failures, %.1f records/write",
				st.Records, len(acked), len(snaps), snapErrs, st.Failures, st.RecordsPerWrite())
			if len(acked) == 0 || len(snaps) == 0 {
				t.Fatalf("nothing acknowledged (%d) or no snapshot (%d)", len(acked), len(snaps))
			}

			cfg.WrapFile = nil
			l = mustOpen(t, cfg)
			defer l.Close()
			sidx, r, err := l.LoadSnapshot()
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(r)
			r.Close()
			if sidx != snaps[len(snaps)-1] || binary.LittleEndian.Uint64(b) != sidx {
				t.Fatalf("snapshot %d holding %x, want the last saved, %d", sidx, b, snaps[len(snaps)-1])
			}
			got := replayAll(t, l, sidx+1)
			if l.LastIndex() != st.Records {
				t.Fatalf("reopened log ends at %d, %d were appended (nothing is dropped)", l.LastIndex(), st.Records)
			}
			for idx, p := range acked {
				if idx > sidx && !bytes.Equal(got[idx], p) {
					t.Fatalf("acknowledged record %d is %x after reopen, want %x", idx, got[idx], p)
				}
			}
		})
	}
}
