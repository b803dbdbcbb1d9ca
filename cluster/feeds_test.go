package cluster_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/history"
)

// eventFeeds reads every node's event feed (GET /events?since=, every
// 50 ms, and once more when stopped) until stopped, with a history.KindBreak event where a node's
// feed broke: at its start, where it missed events, and where the node
// restarted (a Seq that does not follow the last one read).
type eventFeeds struct {
	mu    sync.Mutex
	feeds [][]api.Event
	stop  chan struct{}
	done  chan struct{}
}

func collectFeeds(c *testCluster) *eventFeeds {
	f := &eventFeeds{feeds: make([][]api.Event, len(c.nodes)), stop: make(chan struct{}), done: make(chan struct{})}
	hc := &http.Client{Timeout: 500 * time.Millisecond}
	go func() {
		defer close(f.done)
		last := make([]uint64, len(c.nodes))
		began := make([]bool, len(c.nodes))
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for stopped := false; !stopped; {
			select {
			case <-f.stop:
				// Once more: what happened up to the stop is read
				// (TestHistoryChaos CHAOS_SEED=4856: the expiry the
				// drain waited for, made after the last read).
				stopped = true
			case <-tick.C:
			}
			for i, nd := range c.nodes {
				resp, err := hc.Get("http://" + nd.listen + "/events?since=" + strconv.FormatUint(last[i], 10))
				if err != nil {
					continue
				}
				var l api.EventList
				err = json.NewDecoder(resp.Body).Decode(&l)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					continue
				}
				f.mu.Lock()
				if !began[i] || l.Missed > 0 || (len(l.Events) > 0 && l.Events[0].Seq != last[i]+1) {
					f.feeds[i] = append(f.feeds[i], api.Event{Kind: history.KindBreak, At: time.Now()})
					began[i] = true
				}
				f.feeds[i] = append(f.feeds[i], l.Events...)
				f.mu.Unlock()
				if len(l.Events) > 0 {
					last[i] = l.Events[len(l.Events)-1].Seq
				}
			}
		}
	}()
	return f
}

// wait stops the collector and returns every node's feed.
func (f *eventFeeds) wait() [][]api.Event {
	close(f.stop)
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.feeds
}

// feedGrants returns the grants of the feeds as sightings of their
// holders when granted (Asked and Seen: the grant's time).
func feedGrants(feeds [][]api.Event) []history.Sighting {
	var out []history.Sighting
	for i, feed := range feeds {
		for _, ev := range feed {
			if ev.Kind == api.EventGrant {
				out = append(out, history.Sighting{Node: i, Key: ev.Key, Limit: ev.Limit, Mode: ev.Mode, Owner: ev.Owner, Token: ev.Token, Asked: ev.At, Seen: ev.At})
			}
		}
	}
	return out
}

// waitDrained waits, once every client has ended, until the active shows
// every key of keys free with an empty queue: a waiter whose client is
// gone leaves its queue (SPEC section 1), and a grant nobody releases
// ends with its lease. It fails the test with what is left after bound
// (a bound for a loaded machine, not a timing claim).
func (c *testCluster) waitDrained(keys []history.KeySpec, bound time.Duration) {
	c.t.Helper()
	var left []string
	for deadline := time.Now().Add(bound); ; time.Sleep(100 * time.Millisecond) {
		left = left[:0]
		active := c.waitActive(-1)
		for _, k := range keys {
			resp, err := httpc.Get("http://" + c.nodes[active].listen + "/locks/" + k.Name)
			if err != nil {
				left = append(left, k.Name+": "+err.Error())
				continue
			}
			var st api.LockStatus
			err = decodeJSON(resp, &st)
			resp.Body.Close()
			switch {
			case err != nil:
				left = append(left, k.Name+": "+err.Error())
			case len(st.Holders) > 0 || st.Waiters > 0:
				b, _ := json.Marshal(st)
				left = append(left, "node "+strconv.Itoa(active)+" "+string(b))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.t.Errorf("%v after every client ended, keys still held or queued: %v", bound, left)
			return
		}
	}
}

// degradedSpans returns a window for each span in which a node's log
// (logs[i] is node i's) shows it answering without its sync_standbys
// (from its "degraded" line to its "recovered" line, its next start or
// its next promotion, which starts a term not degraded, or to the end of
// the run, and settle after).
func degradedSpans(logs []string, settle time.Duration) []history.Window {
	var ws []history.Window
	for i, log := range logs {
		var from time.Time // zero: not degraded
		for at, line := range timedLines(log) {
			switch {
			case degradedLine.MatchString(line) && from.IsZero():
				from = at
			case (recoveredLine.MatchString(line) || selfLine.MatchString(line) || promotedLine.MatchString(line)) && !from.IsZero():
				// Recovered, the process started again, or the node was
				// promoted again (a new term starts not degraded:
				// promoteLocked clears the flag without a line).
				ws = append(ws, history.Window{Name: fmt.Sprintf("node %d answered without its sync_standbys", i), Start: from, End: at.Add(settle)})
				from = time.Time{}
			}
		}
		if !from.IsZero() {
			ws = append(ws, history.Window{Name: fmt.Sprintf("node %d answered without its sync_standbys", i), Start: from, End: time.Now().Add(settle)})
		}
	}
	return ws
}

// unwrittenSpans returns, for each node (logs[i] is node i's log), the
// spans in which its log refused writes: from its "refusing changes" line
// to its "writes succeed again" line, its next start, or the end of the
// run. A renewal it made then was answered 503 and may be lost
// (history.CheckExpiries).
func unwrittenSpans(logs []string) [][]history.Window {
	spans := make([][]history.Window, len(logs))
	for i, log := range logs {
		var from time.Time // zero: writing
		end := func(at time.Time) {
			spans[i] = append(spans[i], history.Window{Name: fmt.Sprintf("node %d's log refused writes", i), Start: from, End: at})
			from = time.Time{}
		}
		for at, line := range timedLines(log) {
			switch {
			case refusingLine.MatchString(line) && from.IsZero():
				from = at
			case (writingLine.MatchString(line) || selfLine.MatchString(line)) && !from.IsZero():
				end(at)
			}
		}
		if !from.IsZero() {
			end(time.Now())
		}
	}
	return spans
}

var (
	refusingLine  = regexp.MustCompile(`msg="wal: [^"]* failed; refusing changes`)
	writingLine   = regexp.MustCompile(`msg="wal: writes succeed again`)
	degradedLine  = regexp.MustCompile(`msg="sync_standbys: degraded`)
	recoveredLine = regexp.MustCompile(`msg="sync_standbys: recovered from degraded`)
	promotedLine  = regexp.MustCompile(`msg="promoted to active"`)
)
