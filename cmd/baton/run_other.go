//go:build !linux && !windows

package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// guardCommand is used on Linux only (run_linux.go).
const guardCommand = "__run-guard"

// commandGroup, where Linux's process groups and parent-death signal are
// not used: COMMAND is baton's child and signals go to it only.
type commandGroup struct{ cmd *exec.Cmd }

func (g *commandGroup) command(command []string, stdin any) *exec.Cmd {
	g.cmd = exec.Command(command[0], command[1:]...)
	return g.cmd
}

func (g *commandGroup) started(startErr error) bool { return startErr == nil }

func (g *commandGroup) signal(sig syscall.Signal) { _ = g.cmd.Process.Signal(sig) }

func (g *commandGroup) done() {}

// jobSignals: no job control here.
func (g *commandGroup) jobSignals() []os.Signal { return nil }

func (g *commandGroup) stopOnJobSignals() func() { return func() {} }

func (g *commandGroup) wait() error { return g.cmd.Wait() }

func runGuard(args []string) int {
	fmt.Fprintln(os.Stderr, "baton: "+guardCommand+" is internal to baton run on Linux")
	return exitUsage
}
