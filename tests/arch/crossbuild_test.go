package arch

import (
	"os"
	"os/exec"
	"testing"
)

// TestCLIBuildsEverywhere keeps the official client building where people
// run it: `baton acquire|run|release|status` on Windows laptops and CI
// runners and on Macs (serve refuses on Windows with wal.ErrUnsupported,
// but it compiles). The api package is vetted there as well, its tests
// included.
func TestCLIBuildsEverywhere(t *testing.T) {
	for _, target := range []struct{ goos, goarch string }{
		{"windows", "amd64"},
		{"darwin", "arm64"},
	} {
		env := append(os.Environ(), "GOOS="+target.goos, "GOARCH="+target.goarch, "CGO_ENABLED=0")
		for _, args := range [][]string{
			{"build", "../../cmd/baton", "../../api"},
			{"vet", "../../api"},
		} {
			cmd := exec.Command("go", args...)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("GOOS=%s GOARCH=%s go %v: %v\n%s", target.goos, target.goarch, args, err, out)
			}
		}
	}
}
