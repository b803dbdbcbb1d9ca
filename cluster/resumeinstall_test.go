package cluster

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/wal"
)

// recLog is an active's log in memory that keeps its records.
type recLog struct {
	mu   sync.Mutex
	recs [][]byte // recs[i-1] is index i
}

func (l *recLog) Append(rec []byte) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, bytes.Clone(rec))
	return uint64(len(l.recs)), nil
}

func (l *recLog) Wait(uint64) error { return nil }

func (l *recLog) last() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return uint64(len(l.recs))
}

func (l *recLog) at(i uint64) []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recs[i-1]
}

// lockStates describes every key of e: its holders' tokens, limit and
// queue length.
func lockStates(e *engine.Engine) map[string]string {
	m := map[string]string{}
	var infos []engine.LockInfo
	e.Range(func(li engine.LockInfo) bool {
		infos = append(infos, li)
		return true
	})
	for _, li := range infos {
		var toks []uint64
		for _, h := range li.Holders {
			toks = append(toks, h.Token)
		}
		var ws []string
		for _, w := range e.Waiters(li.Key, 1000) {
			ws = append(ws, fmt.Sprintf("%s/%d", w.ID, w.Mode))
		}
		m[li.Key] = fmt.Sprintf("holders %v limit %d waiters %d %v", toks, li.Limit, li.Waiters, ws)
	}
	return m
}

// A standby installs the active's snapshot, whose shards were dumped at
// rising indexes, and its stream breaks after some of the records that
// follow the snapshot's base but before the last shard's dump index. It
// reconnects and resumes from its log (follow: the dumps of the snapshot
// installed are local to the first stream's follow), so the records
// between its log's end and the last shard's dump index, which that
// shard's dump already holds, are applied to it a second time. The
// standby's state must still be the active's: holders and their tokens,
// limits, waiters in order with their modes. (It is, over random
// histories of grants, releases, queued and withdrawn waiters, repeated
// IDs, shared modes and limits: the engine takes every record kind applied
// again after its own effect as a duplicate, and the records after it
// rebuild what it undoes. Expirations and timeouts are not generated.)
func TestStandbyResumedAfterAnInstallAppliesNothingTwice(t *testing.T) {
	const shards = 4
	twice := 0 // records applied a second time, over every seed
	for seed := range uint64(100) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { twice += resumeAfterInstall(t, shards, seed) })
	}
	if twice == 0 {
		t.Fatal("the test's premise: no record was applied a second time")
	}
	t.Logf("%d records applied a second time", twice)
}

// resumeAfterInstall runs one seed and returns how many records the
// second stream applied to a shard whose dump held them already.
func resumeAfterInstall(t *testing.T, shards int, seed uint64) int {
	rng := rand.New(rand.NewPCG(seed, 7))
	alog := &recLog{}
	a, err := engine.New(engine.Config{DataDir: "", Shards: shards, Log: alog})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var keys []string
	for n := 0; len(keys) < 3; n++ {
		if k := fmt.Sprintf("k-%d", n); a.ShardOf(k) == shards-1 {
			keys = append(keys, k)
		}
	}
	type held struct {
		key string
		tok uint64
	}
	var mu sync.Mutex
	var holding []held
	var waiting []*engine.Waiting
	var pending []engine.AcquireResult // granted in done, settled after the op
	var pendingKeys []string
	take := func(key string) func(engine.AcquireResult) bool {
		return func(r engine.AcquireResult) bool {
			if r.Err() == nil {
				pending = append(pending, r)
				pendingKeys = append(pendingKeys, key)
			}
			return true
		}
	}
	settlePending := func() {
		for i, r := range pending {
			if g, err := r.Settle(); err == nil {
				holding = append(holding, held{pendingKeys[i], g.Token})
			}
		}
		pending, pendingKeys = nil, nil
	}
	op := func() {
		key := keys[rng.IntN(len(keys))]
		switch rng.IntN(6) {
		case 0, 1, 2:
			req := engine.AcquireRequest{Key: key, Lease: time.Hour, Wait: time.Hour}
			if rng.IntN(2) == 0 {
				req.ID = fmt.Sprintf("id-%d", rng.IntN(6))
			}
			if rng.IntN(3) == 0 {
				req.Mode = engine.Shared
			}
			if rng.IntN(4) == 0 {
				req.Limit = 1 + rng.IntN(3)
			}
			r, w := a.AcquireFunc(req, take(key))
			if w != nil {
				waiting = append(waiting, w)
			} else if r.Err() == nil {
				if g, err := r.Settle(); err == nil {
					mu.Lock()
					holding = append(holding, held{key, g.Token})
					mu.Unlock()
				}
			}
		case 3, 4:
			mu.Lock()
			if len(holding) > 0 {
				i := rng.IntN(len(holding))
				h := holding[i]
				holding = append(holding[:i], holding[i+1:]...)
				mu.Unlock()
				_ = a.Release(h.key, h.tok)
			} else {
				mu.Unlock()
			}
		case 5:
			if len(waiting) > 0 {
				i := rng.IntN(len(waiting))
				waiting[i].Cancel()
				waiting = append(waiting[:i], waiting[i+1:]...)
			}
		}
		settlePending()
	}
	for range 10 {
		op()
	}
	var dump bytes.Buffer
	did := false
	base, err := a.WriteDump(&dump, func() uint64 {
		i := alog.last()
		if !did {
			did = true
			for range 40 {
				op()
			}
		}
		return i
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		op()
	}
	end := alog.last()
	if end <= base+2 {
		t.Fatalf("the test's premise: base %d end %d", base, end)
	}

	dir := t.TempDir()
	wc := wal.DefaultConfig(filepath.Join(dir, "log"))
	l, err := wal.Open(wc)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b, err := engine.New(engine.Config{DataDir: dir, Standby: true, Shards: shards, Log: NewSyncLog(l)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	n, err := New(Config{Self: "http://b", Peers: []string{"http://a", "http://b"}, Log: l}, b)
	if err != nil {
		t.Fatal(err)
	}
	defer n.wal.SetTap(nil)
	// The first stream: the snapshot and one record after it.
	var begun bool
	var dumps engine.Dumps
	var dumpMax, last uint64
	cut := base + 1 + rng.Uint64N(end-base-1)
	fs := []frame{{kind: frameBegin, epoch: 1}, {kind: frameSnapshot, index: base, data: dump.Bytes()}}
	for i := base + 1; i <= cut; i++ {
		fs = append(fs, frame{kind: frameRecord, index: i, data: alog.at(i)})
	}
	for _, f := range fs {
		if err := n.applyFrame(context.Background(), &f, &begun, &dumps, &dumpMax, &last); err != nil {
			t.Fatal(err)
		}
	}
	// The second stream resumes from the log's end (follow starts with
	// fresh dumps).
	twice := 0
	for i := last + 1; i <= end; i++ {
		r, err := engine.DecodeRecord(alog.at(i))
		if err != nil {
			t.Fatal(err)
		}
		if b.Covers(dumps, i, &r) {
			twice++
		}
	}
	begun, dumps, dumpMax = false, nil, 0
	fs = []frame{{kind: frameBegin, epoch: 1, resumeFrom: last + 1}}
	for i := last + 1; i <= end; i++ {
		fs = append(fs, frame{kind: frameRecord, index: i, data: alog.at(i)})
	}
	for _, f := range fs {
		if err := n.applyFrame(context.Background(), &f, &begun, &dumps, &dumpMax, &last); err != nil {
			t.Fatal(err)
		}
	}
	want, got := lockStates(a), lockStates(b)
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: standby %q, active %q (base %d, end %d)", k, got[k], w, base, end)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: standby %q, active has no such key", k, g)
		}
	}
	return twice
}
