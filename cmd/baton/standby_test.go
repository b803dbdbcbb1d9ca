package main

// Reads on standbys (SPEC section 2): two real `baton serve` processes, the
// second a standby.

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/testproc"
)

// get sends one request to url without following redirects.
func get(t *testing.T, method, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	c := &http.Client{Timeout: bound, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer c.CloseIdleConnections()
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

// eventually retries check until it returns "" (done); the bound turns a
// hang into a failure and measures nothing.
func eventually(t *testing.T, what string, check func() string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func replicaLag(t *testing.T, res *http.Response) float64 {
	t.Helper()
	v := res.Header.Get(api.HeaderReplicaLag)
	lag, err := strconv.ParseFloat(v, 64)
	if err != nil || lag < 0 {
		t.Fatalf("%s = %q, want seconds", api.HeaderReplicaLag, v)
	}
	return lag
}

func TestStandbyAnswersReads(t *testing.T) {
	needBinary(t)
	a1, a2 := testproc.FreeAddr(t, "127.0.0.1"), testproc.FreeAddr(t, "127.0.0.2")
	peers := "--peers=http://" + a1 + ",http://" + a2
	n1 := startServeAt(t, a1, t.TempDir(), nil, peers, "--advertise=http://"+a1)
	n2 := startServeAt(t, a2, t.TempDir(), nil, peers, "--advertise=http://"+a2)
	eventually(t, "node 1 active", func() string {
		res, _ := get(t, "GET", n1.url+"/readyz")
		return map[bool]string{true: "", false: "not yet"}[res.StatusCode == http.StatusOK]
	})

	// Until the standby has synced it has no replica: it redirects reads.
	// Once synced, it answers them itself.
	eventually(t, "the standby synced", func() string {
		res, body := get(t, "GET", n2.url+"/locks")
		if res.StatusCode == http.StatusOK && res.Header.Get(api.HeaderReplicaLag) != "" {
			return ""
		}
		if res.StatusCode != http.StatusTemporaryRedirect && res.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("GET /locks on a standby not synced: %d %s", res.StatusCode, body)
		}
		return "not yet"
	})

	res, body := get(t, "POST", n1.url+"/locks/k?lease=60")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("acquire on the active: %d %s", res.StatusCode, body)
	}
	var g api.Grant
	if err := json.Unmarshal([]byte(body), &g); err != nil {
		t.Fatal(err)
	}
	// The standby answers from its replica, once the grant has reached it.
	eventually(t, "GET /locks/k on the standby", func() string {
		res, body := get(t, "GET", n2.url+"/locks/k")
		if res.StatusCode != http.StatusOK {
			return res.Status + " " + body
		}
		var st api.LockStatus
		_ = json.Unmarshal([]byte(body), &st)
		if st.Holder == nil || st.Holder.Token != g.Token {
			return "no holder yet: " + body
		}
		replicaLag(t, res)
		return ""
	})
	res, body = get(t, "GET", n2.url+"/locks/k", "Accept", "text/plain")
	if res.StatusCode != http.StatusOK || body != strconv.FormatUint(g.Token, 10)+"\n" {
		t.Fatalf("GET /locks/k text/plain on the standby: %d %q", res.StatusCode, body)
	}
	res, body = get(t, "GET", n2.url+"/locks?prefix=k")
	var ll api.LockList
	if err := json.Unmarshal([]byte(body), &ll); err != nil || res.StatusCode != http.StatusOK || ll.Total != 1 || ll.Locks[0].Key != "k" {
		t.Fatalf("GET /locks on the standby: %d %s", res.StatusCode, body)
	}
	replicaLag(t, res)
	res, body = get(t, "GET", n2.url+"/events?key=k")
	var el api.EventList
	if err := json.Unmarshal([]byte(body), &el); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /events on the standby: %d %s", res.StatusCode, body)
	}
	replicaLag(t, res)
	if len(el.Events) != 1 || el.Events[0].Kind != api.EventGrant || el.Events[0].Token != g.Token {
		t.Fatalf("the standby's feed for k: %s", body)
	}

	// Every other /locks call is still redirected to the active.
	tok := strconv.FormatUint(g.Token, 10)
	for _, c := range []struct{ method, path string }{
		{"POST", "/locks/other"}, {"DELETE", "/locks/k?token=" + tok}, {"PATCH", "/locks/k?token=" + tok},
	} {
		res, body := get(t, c.method, n2.url+c.path)
		if res.StatusCode != http.StatusTemporaryRedirect || res.Header.Get("Location") != n1.url+c.path {
			t.Fatalf("%s %s on the standby: %d %q %s", c.method, c.path, res.StatusCode, res.Header.Get("Location"), body)
		}
		if res.Header.Get(api.HeaderReplicaLag) != "" {
			t.Fatalf("%s %s: a redirect carries %s", c.method, c.path, api.HeaderReplicaLag)
		}
	}
	// The active answers without a lag.
	if res, _ := get(t, "GET", n1.url+"/locks/k"); res.StatusCode != http.StatusOK || res.Header.Get(api.HeaderReplicaLag) != "" {
		t.Fatalf("the active: %d, lag %q", res.StatusCode, res.Header.Get(api.HeaderReplicaLag))
	}

	// Metrics: the standby's replica lag; the active's promotion and its
	// request durations by route pattern.
	_, m2 := get(t, "GET", n2.url+"/metrics")
	if !strings.Contains(m2, "\nbaton_replica_lag_seconds ") {
		t.Fatal("the standby exports no baton_replica_lag_seconds")
	}
	_, m1 := get(t, "GET", n1.url+"/metrics")
	for _, want := range []string{
		"\nbaton_promotions_total 1\n",
		`baton_http_request_duration_seconds_count{code="200",method="POST",route="/locks/*"} 1`,
	} {
		if !strings.Contains(m1, want) {
			t.Fatalf("the active's metrics lack %q", want)
		}
	}
	if strings.Contains(m1, "\nbaton_replica_lag_seconds ") {
		t.Fatal("the active exports baton_replica_lag_seconds")
	}
	// The active's lag histogram of the standby counts its
	// acknowledgement of the grant.
	eventually(t, "the standby's acknowledgement in baton_replication_ack_lag_seconds", func() string {
		_, m1 := get(t, "GET", n1.url+"/metrics")
		if !strings.Contains(m1, `baton_replication_ack_lag_seconds_bucket{standby="`+n2.url+`",le="0.0001"} `) {
			return "no bucket le=0.0001 for the standby"
		}
		prefix := `baton_replication_ack_lag_seconds_count{standby="` + n2.url + `"} `
		for line := range strings.SplitSeq(m1, "\n") {
			if v, ok := strings.CutPrefix(line, prefix); ok {
				if n, err := strconv.ParseUint(v, 10, 64); err != nil || n == 0 {
					return line
				}
				return ""
			}
		}
		return "no count for the standby"
	})

	// Logs: the first election is not a failover; a graceful handoff
	// names its gap no_active_ms.
	if code := n1.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	log1 := n1.stderr.String()
	if !strings.Contains(log1, `msg="promoted to active" why=election`) || strings.Contains(log1, "why=failover") {
		t.Fatalf("node 1's first election:\n%s", log1)
	}
	if !strings.Contains(log1, "msg=\"handoff done\"") || !strings.Contains(log1, "no_active_ms=") || strings.Contains(log1, "gap_ms") {
		t.Fatalf("node 1's handoff:\n%s", log1)
	}
	// Node 2 took over: it answers without a lag now.
	eventually(t, "node 2 active", func() string {
		res, _ := get(t, "GET", n2.url+"/locks/k")
		if res.StatusCode != http.StatusOK || res.Header.Get(api.HeaderReplicaLag) != "" {
			return "not yet"
		}
		return ""
	})
	if code := n2.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	http.DefaultClient.CloseIdleConnections()
}

// While the active is stopped (SIGSTOP) the standby keeps answering reads
// from its replica, its lag growing; after failover_timeout it promotes
// itself (logged as a failover, not an election) and answers without one.
func TestStandbyReadsWhileActiveStopped(t *testing.T) {
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
	res, body := get(t, "POST", n1.url+"/locks/k?lease=600")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("acquire: %d %s", res.StatusCode, body)
	}
	eventually(t, "the grant replicated", func() string {
		if st := n2.status("k"); st.Holder == nil {
			return "no holder yet"
		}
		return ""
	})
	if err := n1.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testproc.WaitStopped(t, n1.cmd.Process.Pid)
	t.Cleanup(func() { _ = n1.cmd.Process.Signal(syscall.SIGCONT) })
	// The replica is kept and the lag only grows while the active is silent,
	// until the standby takes over.
	prev := -1.0
	grew := 0
	eventually(t, "the standby promoted", func() string {
		res, body := get(t, "GET", n2.url+"/locks/k")
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET /locks/k on the standby while the active is stopped: %d %s", res.StatusCode, body)
		}
		var st api.LockStatus
		if err := json.Unmarshal([]byte(body), &st); err != nil || st.Holder == nil {
			t.Fatalf("the replica lost the holder: %s", body)
		}
		if res.Header.Get(api.HeaderReplicaLag) == "" {
			return "" // the active now
		}
		lag := replicaLag(t, res)
		if lag > prev {
			grew++
		}
		prev = lag
		return "still a standby"
	})
	if grew < 3 {
		t.Fatalf("the lag was seen growing %d times", grew)
	}
	_ = n1.cmd.Process.Kill()
	if code := n2.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	log2 := n2.stderr.String()
	if !strings.Contains(log2, `msg="promoted to active" why=failover`) {
		t.Fatalf("node 2's promotion:\n%s", log2)
	}
	http.DefaultClient.CloseIdleConnections()
}

// A `baton run` waiting in the queue of an active that stops answering
// (SIGSTOP) moves to the standby once it promotes, and runs COMMAND when
// the holder's lease ends there: the CLI pings a silent connection after a
// second. With the library's 15 s + 5 s pings it stayed on the paused node
// for about 20 s; with one node only, it ended "unavailable" (exit 1) 27 s
// after a 2 s --wait.
func TestRunWaiterMovesToThePromotedStandby(t *testing.T) {
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
	if res, body := get(t, "POST", n1.url+"/locks/k?lease=3"); res.StatusCode != http.StatusOK {
		t.Fatalf("acquire: %d %s", res.StatusCode, body)
	}
	eventually(t, "the grant replicated", func() string {
		if st := n2.status("k"); st.Holder == nil {
			return "no holder yet"
		}
		return ""
	})
	p := startCLI(t, n1.url+","+n2.url, false, "run", "--wait", "60", "k", "--", "echo", "ran")
	eventually(t, "the waiter queued", func() string {
		if st := n2.status("k"); st.Waiters != 1 {
			return "not queued yet"
		}
		return ""
	})
	if err := n1.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testproc.WaitStopped(t, n1.cmd.Process.Pid)
	stopped := time.Now()
	t.Cleanup(func() { _ = n1.cmd.Process.Signal(syscall.SIGCONT) })
	select {
	case code := <-p.done:
		if code != exitOK || p.stdout.String() != "ran\n" {
			t.Fatalf("baton run: code %d, stdout %q, stderr %q", code, p.stdout.String(), p.stderr.String())
		}
		// Failover (< 2 s), the rest of the holder's 3 s lease and the
		// ping (1 + 2 s): 15 s leaves room for a loaded machine, not for
		// the 20 s it waited on the paused node.
		if d := time.Since(stopped); d > 15*time.Second {
			t.Fatalf("baton run ran COMMAND %v after the active stopped: it waited on the paused node", d)
		}
	case <-time.After(bound + 10*time.Second):
		t.Fatalf("baton run did not end; stderr %q", p.stderr.String())
	}
	_ = n1.cmd.Process.Kill()
	if code := n2.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	http.DefaultClient.CloseIdleConnections()
}
