package main

import (
	"context"
	"strings"
	"testing"
)

// A key that starts or ends with a space shows as another key with the
// space unseen (" deploy" as "deploy", in the table and after "key:"):
// baton status prints it quoted, as it quotes the keys with a character
// a terminal does not show. A space inside a key shows, and stays as it is.
func TestStatusQuotesKeysWithEdgeSpaces(t *testing.T) {
	for key, want := range map[string]string{
		" lead":     `" lead"`,
		"trail ":    `"trail "`,
		" ":         `" "`,
		"  both  ":  `"  both  "`,
		"plain key": "plain key",
	} {
		if got := displayKey(key); got != want {
			t.Errorf("displayKey(%q) = %s, want %s", key, got, want)
		}
	}
	url := startNode(t)
	c := apiClient(t, url)
	for _, key := range []string{" lead", "trail "} {
		l, err := c.Acquire(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(context.Background())
	}
	r := runCLI(t, url, false, "status")
	if out := r.stdout.String(); r.code != exitOK || !strings.Contains(out, "\n\" lead\"  ") || !strings.Contains(out, "\n\"trail \"  ") {
		t.Errorf("status list: %d %q; want both keys quoted", r.code, out)
	}
	r = runCLI(t, url, false, "status", "trail ")
	if out := r.stdout.String(); r.code != exitOK || !strings.HasPrefix(out, "key:     \"trail \"\n") {
		t.Errorf("status KEY: %d %q; want the key quoted", r.code, out)
	}
}
