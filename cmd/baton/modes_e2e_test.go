package main

import (
	"encoding/json"
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
