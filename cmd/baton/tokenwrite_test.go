package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/baton-io/baton/api"
)

// failingWriter is a stdout that cannot be written (a full disk, a closed
// pipe under SIGPIPE ignored).
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// `baton acquire` exits 0 only when it printed the token: a token that
// could not be written is a lock nobody can release or pass on, held for
// its whole lease while the script goes on as if it had it. Public report:
// kunchenguid/firstmate#1131 (fm-lock.sh printed "lock acquired" and exited
// 0 when the lock file was never written). The lock is released and the
// command exits 1 naming the write error.
func TestAcquireTokenNotWrittenReleasesAndFails(t *testing.T) {
	url := startNode(t)
	stderr := newSyncBuffer()
	cio := cliIO{
		stdin: strings.NewReader(""), stdout: failingWriter{}, stderr: stderr,
		getenv:  func(k string) string { return map[string]string{api.EnvAddr: url}[k] },
		environ: os.Environ,
		tty:     func() bool { return false },
	}
	code := clientMain(context.Background(), "acquire", []string{"k", "--lease", "1h"}, cio)
	if code != exitError || !strings.Contains(stderr.String(), "no space left on device") {
		t.Fatalf("acquire with an unwritable stdout: exit %d, stderr %q; want %d naming the write error", code, stderr.String(), exitError)
	}
	r := runCLI(t, url, false, "status", "k")
	if strings.Contains(r.stdout.String(), "token ") {
		t.Fatalf("the lock whose token could not be written is still held: %q", r.stdout.String())
	}
}
