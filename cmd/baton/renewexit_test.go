package main

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// `baton renew` of a grant whose lease ran out, or under a token that is
// not the holder's, fails with exit 5 and says why; it never reports a
// renewal. etcdctl's `lease keep-alive` and `lease timetolive` exited 0
// for a lease that had expired or never existed (etcd-io/etcd#19261), so
// a script's check of $? passed.
func TestRenewOfAnEndedGrantExits5(t *testing.T) {
	url := startNode(t)
	c := apiClient(t, url)
	r := runCLI(t, url, false, "acquire", "k", "--lease", "0.2")
	tok := strings.TrimSpace(r.stdout.String())
	if r.code != exitOK || tok == "" {
		t.Fatalf("acquire: code %d, out %q, err %q", r.code, tok, r.stderr.String())
	}
	// The lease runs out; the bound only turns a hang into a failure.
	for end := time.Now().Add(bound); ; time.Sleep(20 * time.Millisecond) {
		st, err := c.Status(t.Context(), "k")
		if err != nil {
			t.Fatal(err)
		}
		if st.Holder == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("still held after %v: %+v", bound, st.Holder)
		}
	}
	if r := runCLI(t, url, false, "renew", "k", tok); r.code != exitNotHolder || !strings.Contains(r.stderr.String(), "not_held") || r.stdout.String() != "" {
		t.Errorf("renew after the lease ran out: exit %d, stdout %q, stderr %q; want 5, nothing, not_held", r.code, r.stdout.String(), r.stderr.String())
	}
	r = runCLI(t, url, false, "acquire", "k", "--lease", "30")
	other := strings.TrimSpace(r.stdout.String())
	if r.code != exitOK || other == tok {
		t.Fatalf("second acquire: code %d, token %q", r.code, other)
	}
	n, _ := strconv.ParseUint(other, 10, 64)
	if r := runCLI(t, url, false, "renew", "k", tok); r.code != exitNotHolder || !strings.Contains(r.stderr.String(), "not_holder") {
		t.Errorf("renew under the first token while another holds: exit %d, stderr %q; want 5, not_holder", r.code, r.stderr.String())
	}
	st, err := c.Status(t.Context(), "k")
	if err != nil || st.Holder == nil || st.Holder.Token != n || time.Until(st.Holder.ExpiresAt) > 30*time.Second {
		t.Errorf("after the refused renew: %+v, %v; want held by %d with its own lease", st.Holder, err, n)
	}
}
