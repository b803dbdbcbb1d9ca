package main

import (
	"strings"
	"testing"
)

// --prefix, --after and --limit select a page of the listing: with a KEY
// (one lock) they mean nothing, and are refused as a usage error (exit 2)
// naming the flag. They were ignored, so that `baton status k --limit 5`
// looked like it had obeyed.
func TestStatusOfOneKeyRefusesListingFlags(t *testing.T) {
	url := startNode(t)
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"k", "--prefix", "x"}, "--prefix"},
		{[]string{"--prefix=", "k"}, "--prefix"},
		{[]string{"k", "--after", "a"}, "--after"},
		{[]string{"k", "--limit", "5"}, "--limit"},
		{[]string{"k", "--limit", "0"}, "--limit"},
		{[]string{"--json", "k", "--limit", "5"}, "--limit"},
	} {
		r := runCLI(t, url, false, "status", c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr.String(), c.flag) || r.stdout.String() != "" {
			t.Errorf("baton status %q: code %d, stdout %q, stderr %q; want %d naming %s", c.args, r.code, r.stdout.String(), r.stderr.String(), exitUsage, c.flag)
		}
	}
	if r := runCLI(t, url, false, "status", "k", "--json"); r.code != exitOK {
		t.Errorf("baton status k --json: code %d, stderr %q", r.code, r.stderr.String())
	}
}
