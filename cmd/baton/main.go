// Command baton is the baton lock service (`baton serve`) and its
// command-line client (`baton acquire|release|renew|status|run`).
//
// Exit codes: 0 success; 1 error; 2 usage (bad flags, invalid settings,
// or a value the node refused as invalid_argument); 3 the wait ran out
// (not granted); 4 `run`: the lock was lost while the command ran; 5
// `release`, `renew`: not held under that token. `run` otherwise exits
// with the command's status (128+N after signal N, 127 if it could not be
// started).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/baton-io/baton/internal/buildinfo"
)

// Exit codes shared by every subcommand.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

var errHelp = pflag.ErrHelp

const usage = `baton — a distributed lock service with fencing tokens

Usage:
  baton serve [flags]                  run a node
  baton acquire KEY                    take a lock, print its fencing token
  baton release KEY TOKEN              release the lock held under TOKEN
  baton renew KEY TOKEN                restart the lease of TOKEN's grant
  baton status [KEY]                   show one lock, or list the locks
  baton run KEY -- COMMAND [ARGS...]   run COMMAND while holding the lock
  baton cluster                        show the cluster as a node sees it
  baton events [--follow]              show a node's recent events
  baton version                        print the version (also --version)

Run 'baton COMMAND --help' for a command's flags and an example.

The client commands find the nodes with --addr URL[,URL...] (env
BATON_ADDR; default http://127.0.0.1:7070) and send --auth-token T (env
BATON_AUTH_TOKEN). Durations D are seconds ("0.5") or Go durations ("1m30s").

Exit codes: 0 success; 1 error (no node reachable, refused by the server,
...); 2 usage or an invalid setting, a value the node refused as
invalid_argument (400) too; 3 the wait ran out, the lock was not granted;
4 run: the lock was lost while COMMAND ran; 5 release, renew: not held
under that token. run otherwise exits with COMMAND's status.
`

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "serve":
		return serve(args[1:])
	case "version", "--version":
		return cmdVersion(args[1:], os.Stdout, os.Stderr)
	case guardCommand:
		return runGuard(args[1:])
	case "help", "-h", "--help":
		if len(args) > 1 && commandHelps[args[1]].synopsis != "" {
			return run([]string{args[1], "--help"})
		}
		if len(args) > 1 && args[1] != "help" && args[1] != "-h" && args[1] != "--help" {
			// As `baton acquier`: not the usage on stdout and exit 0.
			fmt.Fprintf(os.Stderr, "baton help: unknown command %q\n\n%s", args[1], usage)
			return exitUsage
		}
		fmt.Print(usage)
		return exitOK
	}
	if clientCommands[args[0]] {
		return runClient(args[0], args[1:])
	}
	if hint := flagsFirst(args); hint != "" {
		fmt.Fprintf(os.Stderr, "baton: %s\nRun 'baton help' for the commands.\n", hint)
		return exitUsage
	}
	fmt.Fprintf(os.Stderr, "baton: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

// flagsFirst says how to write args when they put flags before the
// command (`baton --addr URL status`): every flag belongs to a command
// and comes after it. "" when args[0] is no flag or no command follows.
func flagsFirst(args []string) string {
	if !strings.HasPrefix(args[0], "-") {
		return ""
	}
	for i, a := range args {
		if a == "serve" || clientCommands[a] {
			fixed := append(append([]string{a}, args[:i]...), args[i+1:]...)
			return fmt.Sprintf("flags come after the command: baton %s", strings.Join(fixed, " "))
		}
	}
	return ""
}

// cmdVersion is `baton version`: version, commit and Go release, one per
// line.
func cmdVersion(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("baton version", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { printHelp(stdout, "version", nil) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, errHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "baton version: %v\n", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "baton version: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	b := buildinfo.Get()
	commit := b.Commit
	if commit == "" {
		commit = "unknown"
	}
	fmt.Fprintf(stdout, "baton %s\ncommit %s\n%s\n", b.Version, commit, b.Go)
	return exitOK
}
