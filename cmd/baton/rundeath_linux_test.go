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

// Every signal that baton run forwards reaches COMMAND, not only SIGTERM:
// consul lock passed TERM alone on, so a HUP (a closed terminal, a
// supervisor's reload) or a Ctrl+C left its child running without the
// lock (hashicorp/consul#797, #2489). COMMAND here traps the signal,
// says so and exits 5: baton exits 5 and the lock is released.
func TestRunForwardsEachSignal(t *testing.T) {
	needBinary(t)
	url := startNode(t)
	c := apiClient(t, url)
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM} {
		name := map[syscall.Signal]string{syscall.SIGHUP: "HUP", syscall.SIGINT: "INT", syscall.SIGQUIT: "QUIT", syscall.SIGTERM: "TERM"}[sig]
		t.Run(name, func(t *testing.T) {
			key := "fwd/" + name
			p := startRun(t, url, key, "--", "sh", "-c",
				`trap 'echo got `+name+`; exit 5' `+name+`; echo ready; while :; do sleep 0.05; done`)
			p.stdout.waitFor(t, "ready\n")
			_ = p.cmd.Process.Signal(sig)
			if code := p.waitExit(t, "forwarded "+name); code != 5 {
				t.Errorf("exit %d, want 5 (COMMAND's own, after its trap); stdout %q stderr %q", code, p.stdout.String(), p.stderr.String())
			}
			if !strings.Contains(p.stdout.String(), "got "+name) {
				t.Errorf("COMMAND never saw SIG%s; stdout %q", name, p.stdout.String())
			}
			noHolderWithin(t, c, key, time.Second)
		})
	}
}

// A node that falls silent under a running COMMAND (here SIGSTOPped: no
// reset, no answer) costs the lock once its lease has run out by baton's
// own clock, counted from the last renewal it sent: COMMAND gets SIGTERM
// then and baton exits 4, without waiting for the node to come back.
// consul lock signalled its child only some 90 s after the lock was gone
// (hashicorp/consul#9788), so two children ran at once. Once the node is
// back, the lease has ended there too.
func TestRunSignalsCommandWhenTheNodeFallsSilent(t *testing.T) {
	needBinary(t)
	n := startServe(t, t.TempDir(), nil)
	p := startRun(t, n.url, "silent", "--lease", "2", "--",
		"sh", "-c", `trap 'echo got TERM; exit 0' TERM; echo ready; while :; do sleep 0.05; done`)
	p.stdout.waitFor(t, "ready\n")
	st := n.status("silent")
	if st.Holder == nil {
		t.Fatalf("status while COMMAND runs: %+v", st)
	}
	if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = n.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	defer resume()
	if code := p.waitExit(t, "the node silent"); code != exitLost {
		t.Errorf("exit %d, want %d (lost); stderr %q", code, exitLost, p.stderr.String())
	}
	if !strings.Contains(p.stdout.String(), "got TERM") {
		t.Errorf("COMMAND was not signalled: stdout %q", p.stdout.String())
	}
	resume()
	c := apiClient(t, n.url)
	noHolderWithin(t, c, "silent", bound)
}

// What COMMAND leaves running in its process group when it ends does not
// run on after the lock is released: a background job of a shell script,
// or one that ignores SIGINT (as POSIX has a non-interactive shell's
// background jobs do) when a Ctrl+C ended the script. consul lock left
// such children running, "multiple processes running where consul lock was
// being used to specifically limit their concurrency"
// (hashicorp/consul#2489, #2022, #2999). baton killed the group only when
// the lock was lost; at a normal end it released the lock with them
// still running.
func TestRunLeavesNothingOfCommandBehind(t *testing.T) {
	needBinary(t)
	url := startNode(t)
	c := apiClient(t, url)
	t.Run("COMMAND exits", func(t *testing.T) {
		p := startRun(t, url, "left/exit", "--", "sh", "-c", `sleep 300 & echo $!; exit 0`)
		pid := pidLine(t, p)
		if code := p.waitExit(t, "COMMAND exits"); code != 0 {
			t.Errorf("exit %d, want 0; stderr %q", code, p.stderr.String())
		}
		waitGone(t, pid, "the background job after COMMAND exited")
		noHolderWithin(t, c, "left/exit", time.Second)
	})
	t.Run("SIGINT", func(t *testing.T) {
		p := startRun(t, url, "left/int", "--", "sh", "-c", `sleep 300 & echo $!; wait`)
		pid := pidLine(t, p)
		_ = p.cmd.Process.Signal(syscall.SIGINT)
		p.waitExit(t, "SIGINT")
		waitGone(t, pid, "the background job (SIGINT ignored) after a forwarded SIGINT")
		noHolderWithin(t, c, "left/int", time.Second)
	})
}
