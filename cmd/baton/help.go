package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

// commandHelp is what `baton CMD --help` prints above the flags: a
// synopsis, what the command does, and one example. The flags and their
// defaults come from the flag set, so that no default is written twice.
type commandHelp struct {
	synopsis, about, example string
}

var commandHelps = map[string]commandHelp{
	"serve": {
		synopsis: "baton serve [--config FILE] [flags]",
		about: `Run a node. Each setting comes from, in rising precedence: its default,
the YAML file (--config or BATON_CONFIG), its environment variable, its flag.
Durations are Go durations ("15s", "1m30s"); a bare number other than 0 is
refused. Lists are comma-separated. Exits 2 on an invalid setting.`,
		example: "baton serve --listen :7070 --data-dir /var/lib/baton --lease-default 15s",
	},
	"acquire": {
		synopsis: "baton acquire KEY [--lease D] [--wait D] [--limit N] [--shared] [--owner O] [flags]",
		about: `Take the lock KEY, waiting in its queue, and print its fencing token.
Exits 3 when --wait ran out before the grant.`,
		example: "TOKEN=$(baton acquire deploy --lease 60s --wait 5m)   # or --addr baton://10.0.0.1:7071",
	},
	"release": {
		synopsis: "baton release KEY TOKEN [flags] | baton release --force KEY",
		about: `Release the lock KEY held under TOKEN. Exits 5 when it is not held under
TOKEN. With --force (an operator), release every holder of KEY. A force
goes under an idempotency key of its own (HTTP's Idempotency-Key, the id=
of baton://'s R KEY force), so a repeat after a lost answer changes
nothing and is made like any retry; each run of baton release --force is a
new force (look with baton status KEY before running it again).`,
		example: "baton release deploy \"$TOKEN\"",
	},
	"renew": {
		synopsis: "baton renew KEY TOKEN [--lease D] [flags]",
		about:    "Restart the lease of TOKEN's grant of KEY from now. Exits 5 when KEY is not held under TOKEN.",
		example:  "baton renew deploy \"$TOKEN\" --lease 2m",
	},
	"status": {
		synopsis: "baton status KEY [--json] [flags] | baton status [--prefix P] [--after KEY] [--limit N] [--json] [flags]",
		about:    "Show one lock (its holder and waiters), or without KEY list the locks in key order; --prefix, --after and --limit select the listing's page and are refused with a KEY. Needs an http(s):// address (the native protocol has no read calls).",
		example:  "baton status --prefix orders/",
	},
	"run": {
		synopsis: "baton run KEY [--lease D] [--wait D] [--limit N] [--shared] [--owner O] [flags] -- COMMAND [ARGS...]",
		about: `Take the lock KEY, run COMMAND with BATON_KEY and BATON_TOKEN set, renew the
lease while it runs, release when it ends, and exit with its status (128+N
if killed by signal N, 127 if it could not be started). If the lock is
lost, COMMAND's process group gets SIGTERM (SIGKILL after --kill-after)
and baton exits 4. COMMAND runs in a process group of its own: SIGTERM,
SIGHUP, SIGINT and SIGQUIT sent to baton reach the whole group; Ctrl+Z
stops it and baton together (Linux). A signal
that comes before COMMAND runs (while waiting, or with the grant) ends the
wait: COMMAND does not start and the lock is released. If baton dies, the
group is killed (Linux), and so is what COMMAND left running in it when
COMMAND ends, before the release (Linux). Exits 3 when --wait ran out.`,
		example: "baton run nightly-backup --wait 10m -- ./backup.sh --full",
	},
	"cluster": {
		synopsis: "baton cluster [--json] [flags]",
		about:    "Show the cluster as the node at --addr sees it: each node's role, liveness and last contact, and this build's version. Needs an http(s):// address.",
		example:  "baton cluster --addr http://10.0.0.2:7070",
	},
	"events": {
		synopsis: "baton events [--key KEY] [--follow] [--json] [flags]",
		about:    "Print the node's recent lock and cluster events, oldest first; with --follow, keep printing new ones until interrupted. Needs an http(s):// address.",
		example:  "baton events --key deploy --follow",
	},
	"version": {
		synopsis: "baton version",
		about:    "Print baton's version, the commit it was built from and the Go release that built it (also: baton --version).",
		example:  "baton version",
	},
}

// printHelp writes cmd's help: synopsis, description, example, then the
// flags of fs (nil: none).
func printHelp(w io.Writer, cmd string, fs *pflag.FlagSet) {
	h := commandHelps[cmd]
	fmt.Fprintf(w, "Usage: %s\n\n%s\n\nExample:\n  %s\n", h.synopsis, h.about, h.example)
	if fs != nil {
		if u := fs.FlagUsages(); strings.TrimSpace(u) != "" {
			fmt.Fprintf(w, "\nFlags:\n%s", u)
		}
	}
}
