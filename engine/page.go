package engine

import (
	"container/heap"
	"errors"
	"slices"
	"strings"
)

// Page returns the first limit locks, in byte order of their keys, whose
// keys start with prefix and sort after after, and total, the number of
// keys that start with prefix. It walks every key once, holding one
// shard's lock at a time, and builds the state of a key only while the
// key is among the first limit found so far, so that a page of a few keys
// out of millions costs about what counting them costs (Range builds the
// state of every key, and a listing sorted them all: GET /locks?limit=10
// of 200,000 keys took seconds of CPU and held each shard's lock while it
// built its share). Like Range, it is consistent per key, not across keys.
// On the active it is answered, as Status, once every change it shows
// stands as an answered change does (written, and acknowledged by
// sync_standbys), and a page that waited while the node stepped down is
// gathered again. Errors: Status's ErrReadNotWritten.
func (e *Engine) Page(prefix, after string, limit int) ([]LockInfo, int, error) {
	for {
		page, total, shown := e.page(prefix, after, limit)
		err := e.waitShown(shown)
		if errors.Is(err, ErrReplaced) {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		return page, total, nil
	}
}

// page is one pass of Page: the page, the total and the highest log index
// of the shards' changes it shows (0 on a standby, which shows its
// active's).
func (e *Engine) page(prefix, after string, limit int) (page []LockInfo, total int, shown LogIndex) {
	var h byKeyDesc
	for i := range e.shards {
		s := &e.shards[i]
		s.mu.Lock()
		now := e.now()
		if e.serving() == nil {
			s.overdue(now) // no holder listed past its lease (as Status)
			shown = max(shown, LogIndex(s.last))
		}
		for key, lk := range s.locks {
			if !strings.HasPrefix(key, prefix) {
				continue
			}
			total++
			switch {
			case key <= after || limit <= 0:
			case len(h) < limit:
				heap.Push(&h, lk.info(now))
			case key < h[0].Key:
				h[0] = lk.info(now)
				heap.Fix(&h, 0)
			}
		}
		s.mu.Unlock()
	}
	slices.SortFunc(h, func(a, b LockInfo) int { return strings.Compare(a.Key, b.Key) })
	return h, total, shown
}

// byKeyDesc is a max-heap of locks by key (container/heap): its first is
// the greatest key of a page being gathered, the one to drop for a smaller.
type byKeyDesc []LockInfo

func (h byKeyDesc) Len() int           { return len(h) }
func (h byKeyDesc) Less(i, j int) bool { return h[i].Key > h[j].Key }
func (h byKeyDesc) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *byKeyDesc) Push(x any)        { *h = append(*h, x.(LockInfo)) }
func (h *byKeyDesc) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
