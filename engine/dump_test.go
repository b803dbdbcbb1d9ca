package engine

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"
)

// A promotion logs what it changes (the token reservation, the epoch); a
// dump carries the state, the reservation and the epoch; a second engine
// that loads the dump and then replays the log records after the dump's
// lowest index with ReplayAt (the ones the dump covers skipped, all of
// them "logged") ends with the same state, epoch and tokens.
func TestPromoteLogsAndDumpReplaysAt(t *testing.T) {
	log := &memLog{}
	cfg := DefaultConfig()
	cfg.Standby, cfg.Log, cfg.Shards, cfg.DataDir = true, log, 4, t.TempDir()
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.StartEpoch(7, "http://a"); err != nil {
		t.Fatal(err)
	}
	e.Promote(Failover)
	recs := log.take(t)
	if kinds := recKinds(recs); kinds != "epoch,reserve" {
		t.Fatalf("the promotion logged %q, want epoch,reserve", kinds)
	}
	if recs[0].Epoch != 7 || recs[0].Owner != "http://a" || e.Epoch() != (EpochMark{7, "http://a"}) {
		t.Fatalf("epoch record %+v, Epoch() %+v", recs[0], e.Epoch())
	}
	if recs[1].Token < e.LastToken() {
		t.Fatalf("reservation %d below the last token %d", recs[1].Token, e.LastToken())
	}
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		if _, err := e.Acquire(ctx, AcquireRequest{Key: k, Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	// The dump, taken while the log holds records 1..n: every shard's dump
	// index is n; records appended afterwards are not covered.
	var buf bytes.Buffer
	n := uint64(len(log.raw()))
	low, err := e.WriteDump(&buf, func() uint64 { return n })
	if err != nil || low != n {
		t.Fatalf("WriteDump: low %d, %v; want %d", low, err, n)
	}
	if _, err := e.Acquire(ctx, AcquireRequest{Key: "f", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := e.Release("a", mustHolder(t, e, "a")); err != nil {
		t.Fatal(err)
	}

	cfg2 := DefaultConfig()
	cfg2.Standby, cfg2.Shards, cfg2.DataDir = true, 4, t.TempDir()
	r, err := New(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d, err := r.LoadDump(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var logged []uint64
	for i, rec := range log.raw() {
		idx := uint64(i + 1)
		if idx <= low {
			continue
		}
		if err := r.ReplayAt(idx, rec, d, func() error { logged = append(logged, idx); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if want := []uint64{n + 1, n + 2}; !slices.Equal(logged, want) {
		t.Fatalf("logged %v, want %v", logged, want)
	}
	if got, want := dump(r), dump(e); !slices.Equal(got, want) {
		t.Fatalf("replica state\n%v\nwant\n%v", got, want)
	}
	if r.Epoch() != e.Epoch() || r.LastToken() < recs[1].Token {
		t.Fatalf("replica epoch %+v tokens %d; want %+v and at least %d", r.Epoch(), r.LastToken(), e.Epoch(), recs[1].Token)
	}
	// Covers: a record at or below its shard's dump index is in the dump.
	rec := Record{Kind: RecRelease, Key: "a"}
	if !r.Covers(d, n, &rec) || r.Covers(d, n+1, &rec) {
		t.Fatal("Covers: wrong at the dump index")
	}
	if res := (Record{Kind: RecReserve}); r.Covers(d, 1, &res) {
		t.Fatal("Covers: a reservation is never covered")
	}
}

func mustHolder(t *testing.T, e *Engine, key string) uint64 {
	t.Helper()
	info, err := e.Status(key)
	if err != nil || info.Holder == nil {
		t.Fatalf("status %s: %v", key, err)
	}
	return info.Holder.Token
}
