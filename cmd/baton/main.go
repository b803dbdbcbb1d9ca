// Command baton is the baton lock service (`baton serve`) and its
// command-line client (`baton acquire|release|renew|status|run`).
//
// Exit codes: 0 success; 1 error; 2 usage (bad flags, invalid settings);
// 3 the wait ran out (not granted); 4 `run`: the lock was lost while the
// command ran; 5 `release`, `renew`: not held under that token. `run`
// otherwise exits with the command's status (128+N after signal N, 127 if
// it could not be started).
package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"
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
  baton serve [flags]     run a node (baton serve --help lists the settings)
  baton acquire|release|renew|status|run ...   client commands (baton help)
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
	case guardCommand:
		return runGuard(args[1:])
	case "help", "-h", "--help":
		fmt.Print(usage + "\n" + clientUsage)
		return exitOK
	}
	if clientCommands[args[0]] {
		return runClient(args[0], args[1:])
	}
	fmt.Fprintf(os.Stderr, "baton: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}
