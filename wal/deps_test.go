package wal

import (
	"os/exec"
	"strings"
	"testing"
)

// The log knows nothing of the engine, HTTP or the cluster: it depends on
// no other baton package and not on net/http.
func TestDependsOnNoOtherBatonPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, d := range strings.Fields(string(out)) {
		if d == "net/http" || strings.HasPrefix(d, "github.com/baton-io/baton/") && d != "github.com/baton-io/baton/wal" {
			t.Errorf("wal depends on %s", d)
		}
	}
}
