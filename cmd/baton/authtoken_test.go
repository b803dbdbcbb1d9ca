package main

import (
	"strings"
	"testing"
)

// A token no header can carry is a usage error that names where the token
// came from, not the addresses' BATON_ADDR (the CLI took every NewClient
// error for one about the addresses), and does not echo the secret.
func TestCLIRefusesATokenNoHeaderCanCarry(t *testing.T) {
	r := runCLI(t, "http://127.0.71.9:9", false, "status", "k", "--auth-token", "sec ret")
	msg := r.stderr.String()
	if r.code != exitUsage || !strings.Contains(msg, "--auth-token") || strings.Contains(msg, "BATON_ADDR") || strings.Contains(msg, "sec ret") {
		t.Fatalf("exit %d, stderr %q; want exit %d naming --auth-token, not BATON_ADDR, without the token", r.code, msg, exitUsage)
	}
}
