package handlers_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// Keys are taken literally: a key that is a prefix of another, or a path
// "under" another, is a lock of its own. The reports replayed: etcd's
// lock recipe waited on every key under its prefix, so a lock whose name
// was a prefix of another's deadlocked (etcd-io/etcd#6278, fixed by
// #6284), and `etcdctl lock path` blocked while a key "path/1" existed
// (etcd-io/website#710). Here "path", "path/", "path/1" and "pat" are four
// locks, a slash written %2F names the same key as a slash, and a listing
// by prefix is a plain string prefix.
func TestKeysThatNestAreIndependent(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	held := map[string]uint64{}
	for _, key := range []string{"path/1", "path", "path/", "pat"} {
		r := e.do(http.MethodPost, "/locks/"+key+"?lease=30&wait=0.001", "")
		if r.code != http.StatusOK {
			t.Fatalf("acquire %q while %d nesting keys are held: %d %s", key, len(held), r.code, r.body)
		}
		held[key] = r.grant(t).Token
	}
	// The escaped slash is the same key: held, so this try-lock times out.
	if r := e.do(http.MethodPost, "/locks/path%2F1?wait=0.001", ""); r.code != http.StatusRequestTimeout {
		t.Errorf("acquire path%%2F1 while path/1 is held: %d %s, want 408", r.code, r.body)
	}
	for prefix, want := range map[string]int{"path": 3, "path/": 2, "pat": 4, "path/1": 1} {
		r := e.do(http.MethodGet, "/locks?prefix="+prefix, "")
		if r.code != http.StatusOK {
			t.Fatalf("list %q: %d %s", prefix, r.code, r.body)
		}
		var l struct{ Total int }
		if err := json.Unmarshal(r.body, &l); err != nil || l.Total != want {
			t.Errorf("list prefix %q: total %d (%v), want %d", prefix, l.Total, err, want)
		}
	}
	// Releasing "path" leaves the others held under their own tokens.
	e.release("path", held["path"])
	for _, key := range []string{"path/1", "path/", "pat"} {
		if st := e.status(key); st.Holder == nil || st.Holder.Token != held[key] {
			t.Errorf("%q after the release of \"path\": holder %+v, want token %d", key, st.Holder, held[key])
		}
	}
}
