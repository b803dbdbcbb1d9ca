package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// Messages name what they got, in words a user reads: an advertise URL
// left out (derived from listen) that is not among the peers is named
// with the list and said to be derived, not shown as ""; "1 argument",
// not "1 arguments"; baton cluster's LIVE column says yes or no, not
// true or false.
func TestMessagesSayWhatTheyGot(t *testing.T) {
	_, err := loadConfig([]string{"--data-dir", t.TempDir(), "--listen", "127.0.24.1:17001",
		"--peers", "http://127.0.24.2:17001,http://127.0.24.3:17001"}, nil)
	if err == nil || !strings.Contains(err.Error(), `"http://127.0.24.1:17001" is not in peers [http://127.0.24.2:17001 http://127.0.24.3:17001]`) ||
		!strings.Contains(err.Error(), "advertise not set: derived from listen") || strings.Contains(err.Error(), `""`) {
		t.Errorf("advertise derived from listen, not in peers: %v", err)
	}

	for _, args := range [][]string{{"release", "k"}, {"release", "--force", "k", "1"}, {"acquire", "a", "b"}, {"status", "a", "b"}} {
		r := runCLI(t, "http://127.0.24.1:1", false, args[0], args[1:]...)
		n := len(args) - 1
		if args[1] == "--force" {
			n--
		}
		want := map[int]string{1: "got 1 argument", 2: "got 2 arguments"}[n]
		if r.code != exitUsage || !strings.Contains(r.stderr.String(), want) || strings.Contains(r.stderr.String(), "1 arguments") {
			t.Errorf("baton %s: %d %q, want a usage error saying %q", strings.Join(args, " "), r.code, r.stderr.String(), want)
		}
	}

	contact := time.Now()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/cluster" {
			w.Write([]byte("{}\n"))
			return
		}
		json.NewEncoder(w).Encode(api.ClusterView{Self: "http://a", Role: api.RoleActive, Active: "http://a", Peers: []api.PeerView{
			{URL: "http://a", Priority: 1, Role: api.RoleActive, Live: true, LastContact: &contact},
			{URL: "http://b", Priority: 2, Live: false},
		}})
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	r := runCLI(t, srv.URL, false, "cluster")
	out := r.stdout.String()
	if r.code != exitOK || !strings.Contains(out, "LIVE") || strings.Contains(out, "true") || strings.Contains(out, "false") ||
		!strings.Contains(out, "active  yes") || !strings.Contains(out, "-       no") {
		t.Errorf("baton cluster: %d %q %q; want LIVE as yes and no", r.code, out, r.stderr.String())
	}
}

// baton cluster says what GET /cluster says of sync_standbys: the setting,
// whether the active is degraded, and each node's log index and, on the
// active, each standby's acknowledged index (seen missing by hand: a
// degraded active looked like any other).
func TestClusterCommandShowsSync(t *testing.T) {
	contact := time.Now()
	acked := uint64(40)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/cluster" {
			w.Write([]byte("{}\n"))
			return
		}
		json.NewEncoder(w).Encode(api.ClusterView{Self: "http://a", Role: api.RoleActive, Active: "http://a", SyncStandbys: 1, SyncDegraded: true,
			Peers: []api.PeerView{
				{URL: "http://a", Priority: 0, Role: api.RoleActive, Live: true, LastContact: &contact, LastIndex: 42},
				{URL: "http://b", Priority: 1, Role: api.RoleStandby, Live: true, LastContact: &contact, LastIndex: 40, AckedIndex: &acked},
				{URL: "http://c", Priority: 2, Live: false, LastIndex: 7},
			}})
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	r := runCLI(t, srv.URL, false, "cluster")
	out := r.stdout.String()
	for _, want := range []string{"sync:       1 standby(s), DEGRADED", "LOG INDEX", "ACKED", "42  ", "40         40", "7          -"} {
		if r.code != exitOK || !strings.Contains(out, want) {
			t.Fatalf("baton cluster: %d %q lacks %q (stderr %q)", r.code, out, want, r.stderr.String())
		}
	}
}
