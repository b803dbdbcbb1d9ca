package main

import (
	"strings"
	"testing"
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
