package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPageIsTheSortedFilter: Page answers what sorting every key, keeping
// those with the prefix after after, and cutting at limit answers, with
// total counting every key with the prefix.
func TestPageIsTheSortedFilter(t *testing.T) {
	e := newEngine(t, Config{Shards: 8})
	defer e.Close()
	rnd := rand.New(rand.NewPCG(1, 2))
	var keys []string
	for i := range 500 {
		k := fmt.Sprintf("%c/%d", 'a'+rnd.IntN(3), i)
		keys = append(keys, k)
		if _, err := e.Acquire(context.Background(), AcquireRequest{Key: k, Lease: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(keys)
	for range 200 {
		prefix := []string{"", "a", "b/", "c/1", "z"}[rnd.IntN(5)]
		after := ""
		if rnd.IntN(2) == 0 {
			after = keys[rnd.IntN(len(keys))]
		}
		limit := rnd.IntN(40)
		var want []string
		total := 0
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) {
				total++
				if k > after && len(want) < limit {
					want = append(want, k)
				}
			}
		}
		page, n, err := e.Page(prefix, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]string, len(page))
		for i, li := range page {
			got[i] = li.Key
			if li.Holder == nil || li.Limit != 1 {
				t.Fatalf("Page(%q, %q, %d): %s without its holder: %+v", prefix, after, limit, li.Key, li)
			}
		}
		if n != total || !slices.Equal(got, want) && len(want)+len(got) > 0 {
			t.Fatalf("Page(%q, %q, %d) = %v, total %d; want %v, total %d", prefix, after, limit, got, n, want, total)
		}
	}
}
