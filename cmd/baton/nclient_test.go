package main

import (
	"strconv"
	"strings"
	"testing"
)

// The client commands over the native protocol: BATON_ADDR (or --addr)
// baton://host:port drives acquire, renew, release and run through the
// node's native_listen; status, which the protocol lacks, says so.
func TestCLINativeAddress(t *testing.T) {
	leakCheck(t)
	naddr := freeAddr(t)
	n := openNode(t, t.TempDir(), "--native-listen", naddr)
	url, base := n.URL(), "baton://"+naddr
	hc := apiClient(t, url)
	r := runCLI(t, base, false, "acquire", "a b/c", "--lease", "30", "--owner", "cli job")
	tok := strings.TrimSpace(r.stdout.String())
	if r.code != exitOK || tok == "" {
		t.Fatalf("acquire: code %d, out %q, err %q", r.code, tok, r.stderr.String())
	}
	st, err := hc.Status(t.Context(), "a b/c")
	if err != nil || st.Holder == nil || strconv.FormatUint(st.Holder.Token, 10) != tok || st.Holder.Owner != "cli job" {
		t.Fatalf("HTTP sees %+v, %v; want token %s, owner cli job", st, err, tok)
	}
	if r := runCLI(t, base, false, "acquire", "a b/c", "--wait", "100ms"); r.code != exitTimeout {
		t.Fatalf("acquire of a held lock: code %d, want %d; %q", r.code, exitTimeout, r.stderr.String())
	}
	if r := runCLI(t, base, false, "renew", "a b/c", tok, "--lease", "1m"); r.code != exitOK || !strings.Contains(r.stdout.String(), "lease 1m0s") {
		t.Fatalf("renew: %d %q %q", r.code, r.stdout.String(), r.stderr.String())
	}
	if r := runCLI(t, base, false, "release", "a b/c", tok); r.code != exitOK {
		t.Fatalf("release: %d %q", r.code, r.stderr.String())
	}
	if r := runCLI(t, base, false, "release", "a b/c", tok); r.code != exitNotHolder || !strings.Contains(r.stderr.String(), "not_held") {
		t.Fatalf("second release: %d %q", r.code, r.stderr.String())
	}
	r = runCLI(t, base, false, "run", "jobs/x", "--lease", "30s", "--", "sh", "-c", `echo "$BATON_KEY $BATON_TOKEN"; exit 7`)
	if f := strings.Fields(r.stdout.String()); r.code != 7 || len(f) != 2 || f[0] != "jobs/x" {
		t.Fatalf("run: code %d, out %q, err %q", r.code, r.stdout.String(), r.stderr.String())
	}
	if st, err := hc.Status(t.Context(), "jobs/x"); err != nil || st.Holder != nil {
		t.Fatalf("after run: %+v, %v", st, err)
	}
	if r := runCLI(t, base, false, "status", "jobs/x"); r.code != exitError || !strings.Contains(r.stderr.String(), "http:// or https:// address") {
		t.Fatalf("status over native: %d %q", r.code, r.stderr.String())
	}
}
