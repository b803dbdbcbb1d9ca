package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/testproc"
)

// TestTLSClusterSyncStandby: peers that serve TLS (https:// in peers, the
// certificate trusted through SSL_CERT_FILE) replicate to each other and
// acknowledge: with sync_standbys 1 the active's changes are acknowledged
// by its standby, and it never goes on without it. (The peers speak
// HTTP/2 by ALPN there: every peer call must work over it, or be sent over
// HTTP/1.1.)
func TestTLSClusterSyncStandby(t *testing.T) {
	needBinary(t)
	dir := t.TempDir()
	certFile, keyFile, pool := testproc.SelfSigned(t, dir)
	addrs := []string{freeAddr(t), freeAddr(t)}
	peers := "--peers=https://" + addrs[0] + ",https://" + addrs[1]
	for _, addr := range addrs {
		startBare(t, []string{"SSL_CERT_FILE=" + certFile}, "--listen", addr, "--data-dir", t.TempDir(),
			"--tls-cert", certFile, "--tls-key", keyFile, peers, "--advertise=https://"+addr,
			"--sync-standbys", "1", "--sync-timeout", "5s")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	active := "https://" + addrs[0]
	view := func() (api.ClusterView, error) {
		var v api.ClusterView
		res, err := c.Get(active + "/cluster")
		if err != nil {
			return v, err
		}
		defer res.Body.Close()
		return v, json.NewDecoder(res.Body).Decode(&v)
	}
	// caughtUp says why the standby has not acknowledged every change of
	// the active, or the active went on without it; "" when neither.
	caughtUp := func() string {
		v, err := view()
		if err != nil {
			return err.Error()
		}
		if v.Role != api.RoleActive {
			return "node 1 is " + v.Role
		}
		if v.SyncDegraded {
			return "the active goes on without its standby (sync degraded)"
		}
		for _, p := range v.Peers {
			if p.URL == "https://"+addrs[1] {
				if p.AckedIndex == nil {
					return "the standby acknowledged nothing"
				}
				if *p.AckedIndex != v.LastIndex {
					return fmt.Sprintf("the standby acknowledged index %d of the active's %d", *p.AckedIndex, v.LastIndex)
				}
				return ""
			}
		}
		return "no standby in the active's view"
	}
	eventually(t, "the standby acknowledging", caughtUp)
	for i := range 3 {
		res, err := c.Post(fmt.Sprintf("%s/locks/k%d?lease=60", active, i), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		// Read to its end: a grant is the client's once its answer is
		// (a body closed unread resets the stream, and may pass the
		// grant on: README, "Disconnects").
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("acquire k%d: %s", i, res.Status)
		}
	}
	if msg := caughtUp(); msg != "" {
		res, err := c.Get(active + "/events")
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			t.Logf("events: %s", b)
		}
		t.Fatalf("after 3 grants: %s", msg)
	}
}

// startBare runs `baton serve args...` with env added to a clean
// environment, and kills it when the test ends (logging its stderr if the
// test failed). Unlike startServeAt it does not wait for the node: its
// callers serve TLS, which startServeAt's plain /healthz poll cannot ask.
func startBare(t *testing.T, env []string, args ...string) {
	t.Helper()
	needBinary(t)
	cmd := exec.Command(batonBin, append([]string{"serve"}, args...)...)
	cmd.Env = cleanEnv(env...)
	var stderr syncBuf
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("baton serve %v stderr:\n%s", args, &stderr)
		}
	})
}
