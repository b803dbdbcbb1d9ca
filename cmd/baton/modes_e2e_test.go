package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/testproc"
)

// Holders, modes, limits and owners survive a failover (issue 14), with
// two real processes: a semaphore's three holders and a read/write lock's
// shared holders, each with its owner, replicate to the standby, the
// active is killed (kill -9), and the promoted standby shows them all,
// keeps the limit (409 limit_mismatch on another one) and hands a freed
// slot on as the active did.
func TestModesSurviveFailover(t *testing.T) {
	needBinary(t)
	a1, a2 := testproc.FreeAddr(t, "127.0.0.1"), testproc.FreeAddr(t, "127.0.0.2")
	peers := "--peers=http://" + a1 + ",http://" + a2
	n1 := startServeAt(t, a1, t.TempDir(), nil, peers, "--advertise=http://"+a1)
	n2 := startServeAt(t, a2, t.TempDir(), nil, peers, "--advertise=http://"+a2)
	eventually(t, "the standby synced", func() string {
		res, _ := get(t, "GET", n2.url+"/locks")
		if res.StatusCode == http.StatusOK && res.Header.Get(api.HeaderReplicaLag) != "" {
			return ""
		}
		return "not yet"
	})
	var tokens []uint64
	for _, q := range []string{
		"/locks/sem?lease=600&limit=3&mode=shared&owner=web-1",
		"/locks/sem?lease=600&mode=shared&owner=web-2",
		"/locks/sem?lease=600&mode=shared&owner=web-3",
		"/locks/rw?lease=600&limit=8&mode=shared&owner=reader",
		"/locks/plain?lease=600&owner=deploy",
	} {
		res, body := get(t, "POST", n1.url+q)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %d %s", q, res.StatusCode, body)
		}
		var g api.Grant
		if err := json.Unmarshal([]byte(body), &g); err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, g.Token)
	}
	want := map[string]api.LockStatus{}
	for _, k := range []string{"sem", "rw", "plain"} {
		want[k] = n1.status(k)
	}
	same := func(a, b api.LockStatus) bool {
		if a.Limit != b.Limit || len(a.Holders) != len(b.Holders) {
			return false
		}
		return slices.EqualFunc(a.Holders, b.Holders, func(x, y api.Holder) bool {
			return x.Token == y.Token && x.Owner == y.Owner && x.Mode == y.Mode && x.ExpiresAt.Equal(y.ExpiresAt)
		})
	}
	eventually(t, "the holders replicated", func() string {
		for k, st := range want {
			if !same(n2.status(k), st) {
				return k + " not yet"
			}
		}
		return ""
	})
	if err := n1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the standby promoted", func() string {
		if res, _ := get(t, "GET", n2.url+"/readyz"); res.StatusCode != http.StatusOK {
			return "not active yet"
		}
		return ""
	})
	for k, st := range want {
		if got := n2.status(k); !same(got, st) {
			t.Fatalf("%s after the failover: %+v; want %+v", k, got, st)
		}
	}
	if st := n2.status("sem"); st.Limit != 3 || st.Holders[0].Owner != "web-1" || st.Holders[2].Mode != api.ModeShared {
		t.Fatalf("sem after the failover: %+v", st)
	}
	if res, body := get(t, "POST", n2.url+"/locks/sem?limit=4&mode=shared&wait=0.1"); res.StatusCode != http.StatusConflict {
		t.Fatalf("another limit on the new active: %d %s", res.StatusCode, body)
	}
	if res, body := get(t, "POST", n2.url+"/locks/rw?mode=shared&owner=reader-2&lease=600"); res.StatusCode != http.StatusOK {
		t.Fatalf("a second reader on the new active: %d %s", res.StatusCode, body)
	}
	if res, body := get(t, "DELETE", n2.url+"/locks/sem?token="+strconv.FormatUint(tokens[1], 10)); res.StatusCode != http.StatusOK {
		t.Fatalf("release of a replicated holder: %d %s", res.StatusCode, body)
	}
	res, body := get(t, "POST", n2.url+"/locks/sem?mode=shared&owner=web-4&wait=5")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the freed slot: %d %s", res.StatusCode, body)
	}
	if st := n2.status("sem"); len(st.Holders) != 3 || st.Holders[2].Owner != "web-4" {
		t.Fatalf("sem: %+v", st)
	}
	if code := n2.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	http.DefaultClient.CloseIdleConnections()
}

// Holders, modes, limits and owners survive restarts of a single node on
// its data_dir (issue 14): a semaphore's three holders, a read/write
// lock's two shared holders and an exclusive lock, each with its owner,
// read back from GET /locks/{key} after a kill -9 and after a SIGINT with
// the same tokens, owners, modes, leases and limits; the semaphore still
// refuses another limit and a fourth holder, the read/write lock still
// admits a reader and holds back a writer. A forced release stays done:
// the keys it freed stay free, and the waiter it granted stays the holder.
func TestModesSurviveRestart(t *testing.T) {
	needBinary(t)
	dir, addr := t.TempDir(), freeAddr(t)
	n := startServeAt(t, addr, dir, nil)
	var top uint64
	post := func(n *serveProc, q string) api.Grant {
		t.Helper()
		res, body := get(t, "POST", n.url+q)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %d %s", q, res.StatusCode, body)
		}
		var g api.Grant
		if err := json.Unmarshal([]byte(body), &g); err != nil {
			t.Fatal(err)
		}
		top = max(top, g.Token)
		return g
	}
	for _, q := range []string{
		"/locks/sem?lease=600&limit=3&owner=job-1",
		"/locks/sem?lease=600&limit=3&owner=job-2",
		"/locks/sem?lease=600&limit=3&owner=job-3",
		"/locks/rw?lease=600&mode=shared&owner=reader-1",
		"/locks/rw?lease=600&mode=shared&owner=reader-2",
		"/locks/plain?lease=600&owner=deploy",
		"/locks/freed?lease=600&limit=2&mode=shared&owner=lost-1",
		"/locks/freed?lease=600&limit=2&mode=shared&owner=lost-2",
		"/locks/stuck?lease=600&owner=gone",
	} {
		post(n, q)
	}
	// A waiter on stuck, granted by the forced release below.
	next := make(chan api.Grant, 1)
	go func() {
		c := &http.Client{Timeout: bound}
		defer c.CloseIdleConnections()
		res, err := c.Post(n.url+"/locks/stuck?lease=600&owner=next&wait=20", "", nil)
		var g api.Grant
		if err == nil {
			if res.StatusCode == http.StatusOK {
				_ = json.NewDecoder(res.Body).Decode(&g)
			}
			res.Body.Close()
		}
		next <- g
	}()
	n.waitWaiters("stuck", 1)
	for _, k := range []string{"freed", "stuck"} {
		if res, body := get(t, "DELETE", n.url+"/locks/"+k+"?force=true"); res.StatusCode != http.StatusOK {
			t.Fatalf("forced release of %s: %d %s", k, res.StatusCode, body)
		}
	}
	g := <-next
	if g.Token == 0 {
		t.Fatal("the waiter on stuck was not granted by the forced release")
	}
	top = max(top, g.Token)

	want := map[string]api.LockStatus{}
	for _, k := range []string{"sem", "rw", "plain", "stuck"} {
		want[k] = n.status(k)
	}
	if st := want["sem"]; st.Limit != 3 || len(st.Holders) != 3 || st.Holders[1].Owner != "job-2" || st.Holders[2].Mode != api.ModeExclusive {
		t.Fatalf("sem before any restart: %+v", st)
	}
	if st := want["rw"]; st.Limit != 1 || len(st.Holders) != 2 || st.Holders[0].Mode != api.ModeShared || st.Holders[1].Owner != "reader-2" {
		t.Fatalf("rw before any restart: %+v", st)
	}
	if st := want["stuck"]; len(st.Holders) != 1 || st.Holders[0].Token != g.Token || st.Holders[0].Owner != "next" {
		t.Fatalf("stuck after the forced release: %+v; want only the waiter's grant %d", st, g.Token)
	}
	same := func(a, b api.LockStatus) string {
		if a.Limit != b.Limit || len(a.Holders) != len(b.Holders) || a.Waiters != b.Waiters {
			return fmt.Sprintf("limit %d, %d holders, %d waiters; want %d, %d, %d", a.Limit, len(a.Holders), a.Waiters, b.Limit, len(b.Holders), b.Waiters)
		}
		for i, x := range a.Holders {
			y := b.Holders[i]
			if x.Token != y.Token || x.Owner != y.Owner || x.Mode != y.Mode || x.ExpiresAt.Sub(y.ExpiresAt).Abs() > leaseSlack {
				return fmt.Sprintf("holder %d is %+v; want %+v", i, x, y)
			}
		}
		return ""
	}

	for _, how := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT} {
		if err := n.cmd.Process.Signal(how); err != nil {
			t.Fatal(err)
		}
		<-n.exited
		n = startServeAt(t, addr, dir, nil)
		for k, st := range want {
			if msg := same(n.status(k), st); msg != "" {
				t.Fatalf("%s after %v and a restart: %s", k, how, msg)
			}
		}
		if st := n.status("freed"); len(st.Holders) != 0 || st.Holder != nil {
			t.Fatalf("freed after %v and a restart: %+v; the forced release was undone", how, st)
		}
	}

	if res, body := get(t, "POST", n.url+"/locks/sem?limit=4&wait=0.1"); res.StatusCode != http.StatusConflict {
		t.Fatalf("another limit on sem after the restarts: %d %s; want 409", res.StatusCode, body)
	}
	if res, body := get(t, "POST", n.url+"/locks/sem?limit=3&wait=0.1"); res.StatusCode == http.StatusOK {
		t.Fatalf("a fourth holder of sem (limit 3) after the restarts: %s", body)
	}
	if res, body := get(t, "POST", n.url+"/locks/rw?wait=0.1"); res.StatusCode == http.StatusOK {
		t.Fatalf("a writer beside rw's readers after the restarts: %s", body)
	}
	prev := top
	if r := post(n, "/locks/rw?lease=600&mode=shared&owner=reader-3"); r.Token <= prev {
		t.Fatalf("a third reader after the restarts: token %d; want above %d, every token answered before", r.Token, prev)
	}
	if st := n.status("rw"); len(st.Holders) != 3 || st.Holders[2].Owner != "reader-3" {
		t.Fatalf("rw with a third reader: %+v", st)
	}
	prev = top
	if f := post(n, "/locks/freed?lease=600&wait=0.001"); f.Token <= prev {
		t.Fatalf("freed after the restarts: token %d; want above %d, every token answered before", f.Token, prev)
	}
	for _, k := range []string{"sem", "plain", "stuck"} {
		if res, body := get(t, "DELETE", n.url+"/locks/"+k+"?force=true"); res.StatusCode != http.StatusOK {
			t.Fatalf("forced release of %s: %d %s", k, res.StatusCode, body)
		}
	}
	if code := n.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	http.DefaultClient.CloseIdleConnections()
}
