package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// guardCommand is used on Linux only (run_linux.go).
const guardCommand = "__run-guard"

// commandGroup on Windows: COMMAND is baton's child. Windows delivers no
// SIGTERM to another process (os.Process.Signal refuses every signal but
// Kill), so a signal that must stop COMMAND (the lock lost, the final
// clean-up, a SIGTERM baton got) terminates it at once: a SIGTERM that
// did nothing would leave COMMAND running without the lock until
// --kill-after. A Ctrl+C (SIGINT) is not forwarded: the console delivers
// it to COMMAND as well.
type commandGroup struct{ cmd *exec.Cmd }

func (g *commandGroup) command(command []string, stdin any) *exec.Cmd {
	g.cmd = exec.Command(command[0], command[1:]...)
	return g.cmd
}

func (g *commandGroup) started(startErr error) bool { return startErr == nil }

func (g *commandGroup) signal(sig syscall.Signal) {
	if sig != syscall.SIGINT {
		_ = g.cmd.Process.Kill()
	}
}

func (g *commandGroup) done() {}

// jobSignals: no job control here.
func (g *commandGroup) jobSignals() []os.Signal { return nil }

func (g *commandGroup) stopOnJobSignals() func() { return func() {} }

func (g *commandGroup) wait() error { return g.cmd.Wait() }

func runGuard(args []string) int {
	fmt.Fprintln(os.Stderr, "baton: "+guardCommand+" is internal to baton run on Linux")
	return exitUsage
}
