package main

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// A COMMAND that dies of a signal whose Go default is a stack dump
// (SIGQUIT, SIGABRT, SIGSEGV, SIGBUS: a crash, an abort(), a Ctrl+\) makes
// baton run exit as COMMAND did, 128+N, and says nothing of its own.
// consul lock had this bug (hashicorp/consul#1210, "go default QUIT
// handler leaves stranded child process"): a Go program that passes a
// signal on by raising it again gets the runtime's handler, not the
// default action. baton's guard did exactly that (signal.Reset, then
// kill itself): it printed the stacks of all its goroutines, about 160
// lines, and exited 2, which baton run passed on.
func TestRunCommandDiesOfADumpSignal(t *testing.T) {
	needBinary(t)
	url := startNode(t)
	c := apiClient(t, url)
	for _, sig := range []syscall.Signal{syscall.SIGQUIT, syscall.SIGABRT, syscall.SIGSEGV, syscall.SIGBUS} {
		t.Run(sig.String(), func(t *testing.T) {
			key := "dies/" + strings.ReplaceAll(sig.String(), " ", "-")
			p := startRun(t, url, key, "--", "sh", "-c", "kill -"+sigName(sig)+" $$")
			code := p.waitExit(t, "COMMAND dies of "+sig.String())
			if want := 128 + int(sig); code != want {
				t.Errorf("exit %d, want %d (128+%d)", code, want, int(sig))
			}
			if s := p.stderr.String(); strings.Contains(s, "goroutine ") || strings.Contains(s, "PC=") {
				t.Errorf("baton run printed a Go stack dump:\n%.400s", s)
			}
			noHolderWithin(t, c, key, time.Second)
		})
	}
}

// sigName is the name of sig as kill(1) takes it.
func sigName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGQUIT:
		return "QUIT"
	case syscall.SIGABRT:
		return "ABRT"
	case syscall.SIGSEGV:
		return "SEGV"
	case syscall.SIGBUS:
		return "BUS"
	}
	return "TERM"
}
