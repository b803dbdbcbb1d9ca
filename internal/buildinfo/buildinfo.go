// Package buildinfo says which build of baton is running: its version, the
// commit it was built from and the Go release that built it. Release builds
// set the version and the commit with the linker:
//
//	go build -ldflags "-X github.com/baton-io/baton/internal/buildinfo.version=v1.2.3 \
//	  -X github.com/baton-io/baton/internal/buildinfo.commit=$(git rev-parse HEAD)" ./cmd/baton
//
// Without them, the module version and the VCS revision that the go command
// records in the binary (runtime/debug.ReadBuildInfo) are used: `go install
// github.com/baton-io/baton/cmd/baton@v1.2.3` reports v1.2.3, a build in a
// git checkout reports "(devel)" and its commit.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// Set with -ldflags -X (see the package doc); empty means "ask the build".
var version, commit string

// Info names one build.
type Info struct {
	// Version is the release ("v1.2.3"), or "(devel)" for a build from a
	// source tree that is not a tagged module version.
	Version string `json:"version"`
	// Commit is the VCS revision built (a full hash, with "+dirty" when
	// the tree had uncommitted changes); "" when unknown.
	Commit string `json:"commit"`
	// Go is the Go release that built the binary ("go1.26.8").
	Go string `json:"go"`
}

var get = sync.OnceValue(func() Info {
	in := Info{Version: version, Commit: commit, Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		in.Go = bi.GoVersion
	}
	if in.Version == "" {
		in.Version = "(devel)"
		if ok && bi.Main.Version != "" {
			in.Version = bi.Main.Version
		}
	}
	if in.Commit == "" && ok {
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && in.Commit != "" {
			in.Commit += "+dirty"
		}
	}
	return in
})

// Get returns this binary's build. It reads the build information once.
func Get() Info { return get() }
