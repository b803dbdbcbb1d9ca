package main

import (
	"context"
	"strings"
	"testing"

	"github.com/baton-io/baton/api"
)

// --addr "" names no node: a usage error (exit 2) naming --addr, as
// --addr " , " is. It was taken for no --addr at all, and the command went
// to BATON_ADDR's nodes (or the default address).
func TestEmptyAddrIsAUsageError(t *testing.T) {
	url := startNode(t) // BATON_ADDR, where the command went instead
	for _, args := range [][]string{
		{"status", "--addr", ""},
		{"status", "--addr="},
		{"acquire", "a", "--addr", ""},
		{"release", "k", "5", "--addr", ""},
		{"cluster", "--addr", ""},
		{"events", "--addr", ""},
		{"run", "r", "--addr", "", "--", "true"},
	} {
		r := runCLI(t, url, false, args[0], args[1:]...)
		if r.code != exitUsage || !strings.Contains(r.stderr.String(), "--addr") {
			t.Errorf("baton %q: code %d, stderr %q; want %d naming --addr", args, r.code, r.stderr.String(), exitUsage)
		}
	}
	if st := runCLI(t, url, false, "status"); st.code != exitOK || strings.Contains(st.stdout.String(), "\na ") {
		t.Errorf("after the refused commands: %d %q, want a not held", st.code, st.stdout.String())
	}
}

// BATON_ADDR set to separators and blanks alone (" , ", ",") names no
// node: a usage error (exit 2) naming BATON_ADDR, as --addr " , " is. It
// was taken for BATON_ADDR unset, and the command went to the default
// address. (An empty BATON_ADDR is unset: the default.)
func TestBlankBatonAddrIsAUsageError(t *testing.T) {
	leakCheck(t)
	for _, addr := range []string{" , ", ",", " ", ",,\t"} {
		for _, args := range [][]string{
			{"status"},
			{"acquire", "k"},
			{"cluster"},
			{"run", "k", "--", "true"},
		} {
			var stdout, stderr strings.Builder
			cio := cliIO{
				stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
				getenv:  func(k string) string { return map[string]string{api.EnvAddr: addr}[k] },
				environ: func() []string { return nil },
				tty:     func() bool { return false },
			}
			ctx, cancel := context.WithTimeout(t.Context(), bound)
			code := clientMain(ctx, args[0], args[1:], cio)
			cancel()
			if code != exitUsage || !strings.Contains(stderr.String(), api.EnvAddr) {
				t.Errorf("BATON_ADDR=%q baton %q: code %d, stderr %q; want %d naming %s", addr, args, code, stderr.String(), exitUsage, api.EnvAddr)
			}
		}
	}
}
