package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// TestListPageBuildsThePageOnly: GET /locks?limit=10 over 20,000 held
// keys builds the state of about the ten keys it answers, not of every
// key. It built (and sorted) every key's state: with 200,000 keys one
// listing of ten took seconds of CPU and held each shard's lock while it
// built its share, and the status page lists every second (the "many
// keys" class: a paged range that costs the whole keyspace). Allocations
// stand for that cost here (no timing): without the fix one per key.
func TestListPageBuildsThePageOnly(t *testing.T) {
	const keys = 20_000
	cfg := engine.DefaultConfig()
	cfg.DataDir = t.TempDir()
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	for i := range keys {
		if _, err := eng.Acquire(context.Background(), engine.AcquireRequest{Key: fmt.Sprintf("k/%05d", i), Lease: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	h := handlers.New(eng, handlers.Config{Node: "http://node-under-test"})
	list := func(path string) api.LockList {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var l api.LockList
		if err := json.Unmarshal(rec.Body.Bytes(), &l); rec.Code != http.StatusOK || err != nil {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		return l
	}
	// The page is right: the first ten keys after k/09990, of all keys.
	l := list("/locks?limit=10&after=k/09990")
	if l.Total != keys || len(l.Locks) != 10 || l.Locks[0].Key != "k/09991" || l.Locks[9].Key != "k/10000" {
		t.Fatalf("GET /locks?limit=10&after=k/09990: total %d, %d locks from %+v", l.Total, len(l.Locks), l.Locks)
	}
	allocs := testing.AllocsPerRun(3, func() { list("/locks?limit=10") })
	if allocs > keys/10 {
		t.Errorf("GET /locks?limit=10 over %d keys: %.0f allocations, want at most %d (the page's, not every key's)", keys, allocs, keys/10)
	}
}
