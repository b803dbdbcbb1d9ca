// Package arch holds the line between baton's packages: the engine knows
// nothing of HTTP, the client library nothing of the server, and neither
// the HTTP layer nor the cluster reaches into the other.
package arch

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/baton-io/baton/"

func TestDependenciesPointOneWay(t *testing.T) {
	forbidden := map[string][]string{
		"engine":   {"net/http", "github.com/go-chi/chi/v5", mod + "api", mod + "handlers", mod + "cluster", mod + "web"},
		"api":      {mod + "engine", mod + "handlers", mod + "cluster", mod + "web"},
		"handlers": {mod + "cluster", mod + "cmd/"},
		"cluster":  {mod + "handlers", mod + "web", mod + "cmd/"},
		"web":      {mod + "engine", mod + "handlers", mod + "cluster"},
	}
	for pkg, bad := range forbidden {
		out, err := exec.Command("go", "list", "-deps", "../../"+pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		for _, d := range deps {
			for _, b := range bad {
				if d == b || (strings.HasSuffix(b, "/") && strings.HasPrefix(d, b)) {
					t.Errorf("%s depends on %s", pkg, d)
				}
			}
		}
	}
}
