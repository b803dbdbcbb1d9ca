package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// A KEY no node would take (empty, over 256 bytes, not UTF-8, with a
// control character), and a --key, --prefix or --after that breaks the
// same rules, is a usage error (exit 2) naming the argument or the flag,
// as a TOKEN that can be no fencing token is, and nothing reaches the
// node. Before, each went to the node and its 400 was exit 1, the exit of
// an unavailable node, which a script may retry.
func TestBadKeyIsUsage(t *testing.T) {
	url := startNode(t)
	long := strings.Repeat("k", 257)
	for _, c := range []struct {
		args []string
		name string // what the message names
	}{
		{[]string{"acquire", ""}, "KEY"},
		{[]string{"acquire", long}, "KEY"},
		{[]string{"acquire", "a\x01b"}, "KEY"},
		{[]string{"acquire", "\xff"}, "KEY"},
		{[]string{"release", "", "5"}, "KEY"},
		{[]string{"release", "--force", "a\x7f"}, "KEY"},
		{[]string{"renew", "a\nb", "5"}, "KEY"},
		{[]string{"run", "", "--", "true"}, "KEY"},
		{[]string{"status", "\x01"}, "KEY"},
		{[]string{"status", "--prefix", "\x01"}, "--prefix"},
		{[]string{"status", "--after", "\xff"}, "--after"},
		{[]string{"status", "--prefix", long}, "--prefix"},
		{[]string{"events", "--key", "a\tb"}, "--key"},
		{[]string{"events", "--key", long}, "--key"},
	} {
		r := runCLI(t, url, false, c.args[0], c.args[1:]...)
		if msg := r.stderr.String(); r.code != exitUsage || !strings.Contains(msg, c.name) {
			t.Errorf("baton %q: exit %d, stderr %q; want exit %d naming %s", c.args, r.code, msg, exitUsage, c.name)
		}
	}
	resp, err := http.Get(url + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ev struct{ Events []json.RawMessage }
	if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.Events) != 0 {
		t.Errorf("the node has %d events after refused commands, want none: %s", len(ev.Events), ev.Events[0])
	}
	// A good key with a space, a slash and a non-ASCII letter still works.
	if r := runCLI(t, url, false, "acquire", "a b/ü"); r.code != exitOK {
		t.Errorf("acquire \"a b/ü\": exit %d, %q", r.code, r.stderr.String())
	}
}
