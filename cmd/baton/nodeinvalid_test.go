package main

import (
	"strings"
	"testing"
)

// A value the CLI passes on and the node refuses as invalid_argument (a
// --lease above the node's lease_max, which the CLI cannot know) is a
// usage error, exit 2, as the CLI's own flag checks are: it exited 1, the
// code of a node that could not be reached, which a script may retry.
// Nothing changes: no lock is taken, COMMAND does not run, a renewal
// refused leaves the grant's lease as it was.
func TestNodeInvalidArgumentExitsAsUsage(t *testing.T) {
	url := startNode(t) // lease_max 1h
	for _, args := range [][]string{
		{"acquire", "k", "--lease", "2h"},
		{"run", "k", "--lease", "2h", "--", "sh", "-c", "echo ran"},
	} {
		r := runCLI(t, url, false, args[0], args[1:]...)
		if r.code != exitUsage || !strings.Contains(r.stderr.String(), "lease") || r.stdout.String() != "" {
			t.Errorf("baton %q: code %d, stdout %q, stderr %q; want %d naming lease", args, r.code, r.stdout.String(), r.stderr.String(), exitUsage)
		}
	}
	if r := runCLI(t, url, false, "status", "k"); !strings.Contains(r.stdout.String(), "holder:  none") {
		t.Fatalf("after the refused acquires: %q, want k free", r.stdout.String())
	}
	a := runCLI(t, url, false, "acquire", "k", "--lease", "1m")
	tok := strings.TrimSpace(a.stdout.String())
	if a.code != exitOK {
		t.Fatalf("acquire: %d %q", a.code, a.stderr.String())
	}
	if r := runCLI(t, url, false, "renew", "k", tok, "--lease", "2h"); r.code != exitUsage || !strings.Contains(r.stderr.String(), "lease") {
		t.Errorf("renew --lease 2h: code %d, stderr %q; want %d naming lease", r.code, r.stderr.String(), exitUsage)
	}
	if r := runCLI(t, url, false, "status", "k"); !strings.Contains(r.stdout.String(), "token "+tok+", exclusive, lease 1m0s") {
		t.Errorf("after the refused renewal: %q, want the lease of 1m kept", r.stdout.String())
	}
}
