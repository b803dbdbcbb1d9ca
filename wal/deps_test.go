package wal

import (
	"os/exec"
	"strings"
	"testing"
)

// The log knows nothing of the engine, HTTP or the cluster: it depends on
// no other baton package but internal/durable (the file system's atomic
// small-file write and directory fsync, itself a leaf: no baton package)
// and not on net/http.
func TestDependsOnNoOtherBatonPackage(t *testing.T) {
	const durable = "github.com/baton-io/baton/internal/durable"
	for _, pkg := range []string{".", durable} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, d := range strings.Fields(string(out)) {
			self := d == "github.com/baton-io/baton/wal" || d == durable
			if d == "net/http" || strings.HasPrefix(d, "github.com/baton-io/baton/") && !self {
				t.Errorf("%s depends on %s", pkg, d)
			}
		}
	}
}
