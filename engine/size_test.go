package engine

import (
	"testing"
	"unsafe"
)

// A million held keys is a million locks (issue 7's target is under 400
// bytes of server memory per held key): the structs must not grow past
// their allocation size class unnoticed.
func TestStructSizes(t *testing.T) {
	for _, c := range []struct {
		name      string
		size, max uintptr
	}{
		{"deadline", unsafe.Sizeof(deadline{}), 32},
		{"lock", unsafe.Sizeof(lock{}), 112},
		// One per acquire with an ID for the retention period: what a
		// repeat must match (mode, limit, fingerprints) sits in padding.
		{"ticket", unsafe.Sizeof(ticket{}), 112},
	} {
		if c.size > c.max {
			t.Errorf("%s is %d bytes, more than its budget of %d", c.name, c.size, c.max)
		}
	}
}

// A held key must not keep its caller's larger string alive: over HTTP the
// key is a slice of the request line, and a million held keys would each
// pin one.
func TestHeldKeyIsCopied(t *testing.T) {
	e := newEngine(t, Config{})
	defer e.Close()
	line := "POST /locks/some/key?lease=600 HTTP/1.1"
	key := line[len("POST /locks/") : len("POST /locks/")+len("some/key")]
	if _, err := e.Acquire(t.Context(), AcquireRequest{Key: key}); err != nil {
		t.Fatal(err)
	}
	s := e.shard(key)
	s.mu.Lock()
	var stored string
	for k, lk := range s.locks {
		if k == key {
			stored = lk.key
			if unsafe.StringData(k) != unsafe.StringData(lk.key) {
				t.Error("the map and the lock hold two copies of the key")
			}
		}
	}
	s.mu.Unlock()
	if stored != key {
		t.Fatalf("lock for %q not found", key)
	}
	if unsafe.StringData(stored) == unsafe.StringData(key) {
		t.Error("the lock keeps the caller's string (and the whole request line behind it)")
	}
}

// A key's shard is the same in every process (no random seed): a snapshot
// dumped shard by shard at per-shard log indexes and the replay that
// follows it rely on it. The values pin keyHash (FNV-1a 64, fmix64), as an
// independent implementation computed them.
func TestShardOfAKeyIsFixed(t *testing.T) {
	e := newEngine(t, Config{Shards: 256})
	defer e.Close()
	for key, want := range map[string]int{"orders/42": 239, "k": 101, "a/very/long/key/with/some/depth": 79} {
		if got := e.ShardOf(key); got != want || e.shard(key) != &e.shards[want] {
			t.Errorf("ShardOf(%q) = %d, want %d (and shard() its shard)", key, got, want)
		}
	}
}
