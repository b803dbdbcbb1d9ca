package main

import (
	"strings"
	"testing"
)

// baton run without -- suggests the command line with -- added; the
// suggestion is meant to be pasted, so the words that the shell split on
// or would expand are quoted as the user quoted them: `sh -c 'echo hi'`
// was suggested as `sh -c echo hi`, which runs echo with no argument.
func TestRunWithoutDashSuggestsAQuotedCommand(t *testing.T) {
	r := runCLI(t, "http://127.0.71.9:9", false, "run", "my key", "sh", "-c", "echo hi; echo 'x'")
	want := `add -- before COMMAND: baton run 'my key' [flags] -- sh -c 'echo hi; echo '\''x'\'''`
	if r.code != exitUsage || !strings.Contains(r.stderr.String(), want) {
		t.Fatalf("exit %d, stderr %q; want exit %d and %q", r.code, r.stderr.String(), exitUsage, want)
	}
	r = runCLI(t, "http://127.0.71.9:9", false, "run", "k", "make", "-j4", "CC=gcc-14", "a/b.c")
	if want := "baton run k [flags] -- make -j4 CC=gcc-14 a/b.c\n"; r.code != exitUsage || !strings.Contains(r.stderr.String(), want) {
		t.Fatalf("exit %d, stderr %q; want %q (nothing quoted that needs none)", r.code, r.stderr.String(), want)
	}
}
