package main

import (
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestCLIAcquireKeepsItsPlaceAcrossAKill9: `baton acquire --wait` queued
// behind a holder when its single node is killed with SIGKILL and started
// again dials again until the node is back, asks again under its
// Idempotency-Key (which finds its place if the node's log kept it, and
// queues it otherwise), and is granted when the holder releases, before a
// waiter that queued after it. It exited 1 ("connection refused") while
// the node was down.
func TestCLIAcquireKeepsItsPlaceAcrossAKill9(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	n := startServeAt(t, addr, dir, nil)
	res, body := get(t, http.MethodPost, n.url+"/locks/k?lease=600", "Accept", "text/plain")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the holder's acquire: %d %s", res.StatusCode, body)
	}
	holder := strings.TrimSpace(body)
	waiter := startCLI(t, n.url, false, "acquire", "k", "--wait", "60s", "--lease", "600s")
	n.waitWaiters("k", 1)
	if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-n.exited
	n = startServeAt(t, addr, dir, nil)
	n.waitWaiters("k", 1) // the CLI's place
	later := make(chan string, 1)
	go func() {
		_, body := get(t, http.MethodPost, n.url+"/locks/k?lease=600&wait=20", "Accept", "text/plain")
		later <- body
	}()
	n.waitWaiters("k", 2)
	if res, body := get(t, http.MethodDelete, n.url+"/locks/k", "Lock-Token", holder); res.StatusCode != http.StatusOK {
		t.Fatalf("the holder's release after the restart: %d %s", res.StatusCode, body)
	}
	code := <-waiter.done
	out := strings.TrimSpace(waiter.stdout.String())
	if code != 0 {
		t.Fatalf("baton acquire across the kill -9: exit %d, stdout %q, stderr %q; want 0 and the grant", code, out, waiter.stderr.String())
	}
	st := n.status("k")
	if st.Holder == nil || !strings.Contains(out, strconv.FormatUint(st.Holder.Token, 10)) {
		t.Fatalf("the CLI printed %q; the key's holder is %+v", out, st.Holder)
	}
	if _, err := strconv.ParseUint(holder, 10, 64); err != nil {
		t.Fatalf("the holder's token %q: %v", holder, err)
	}
	if res, body := get(t, http.MethodDelete, n.url+"/locks/k", "Lock-Token", strconv.FormatUint(st.Holder.Token, 10)); res.StatusCode != http.StatusOK {
		t.Fatalf("the CLI's grant released: %d %s", res.StatusCode, body)
	}
	if body := <-later; strings.TrimSpace(body) == "" {
		t.Fatalf("the waiter queued after the restart got %q", body)
	}
	if code := n.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}
