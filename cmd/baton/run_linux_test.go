package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// runProc is one `baton run` process of the built binary.
type runProc struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	exited         chan struct{}
	code           int // once exited is closed
}

func startRun(t *testing.T, url string, args ...string) *runProc {
	t.Helper()
	p := &runProc{stdout: newSyncBuffer(), stderr: newSyncBuffer(), exited: make(chan struct{})}
	p.cmd = exec.Command(batonBin, append([]string{"run"}, args...)...)
	p.cmd.Env = cleanEnv(api.EnvAddr + "=" + url)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	// A process left behind with baton's stdout must not hold up Wait.
	p.cmd.WaitDelay = time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.exited)
		err := p.cmd.Wait()
		p.code = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
		}
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// waitExit waits for baton to end; within bound, or the test fails (a hang:
// baton runs on).
func (p *runProc) waitExit(t *testing.T, what string) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.code
	case <-time.After(bound):
		t.Fatalf("%s: baton run still runs after %v; stdout %q stderr %q", what, bound, p.stdout.String(), p.stderr.String())
		return 0
	}
}

// noHolderWithin checks that nobody holds key, allowing d for a release in
// flight; it fails with the holder it saw last.
func noHolderWithin(t *testing.T, c *api.Client, key string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		st, err := c.Status(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if st.Holder == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q still held by token %d (lease %vs) after baton run ended", key, st.Holder.Token, st.Holder.Lease)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitWaiters(t *testing.T, c *api.Client, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		st, err := c.Status(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if st.Waiters == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q: %d waiters, want %d", key, st.Waiters, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A SIGTERM that reaches `baton run` together with the grant is never lost
// (issue 11, defect 6): in each race the holder's release and the signal
// come at another offset from each other, and every time either COMMAND
// never starts and the lock is released, or COMMAND starts and gets the
// signal; baton always ends, and then nobody holds the key.
func TestRunSignalWithGrantNeverLost(t *testing.T) {
	needBinary(t)
	url := startNode(t)
	c := apiClient(t, url)
	ctx := t.Context()
	const races = 50
	notStarted, started := 0, 0
	for i := range races {
		key := fmt.Sprintf("run/%d", i)
		h, err := c.Acquire(ctx, key, api.WithLease(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		p := startRun(t, url, key, "--lease", "10", "--",
			"sh", "-c", `trap 'echo TERM; exit 0' TERM; echo started; while :; do sleep 0.05; done`)
		waitWaiters(t, c, key, 1)
		// From 1 ms before the release to 4 ms after it, in 100 µs steps.
		offset := time.Duration(i)*100*time.Microsecond - time.Millisecond
		go func() {
			time.Sleep(max(offset, 0))
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}()
		if offset < 0 {
			time.Sleep(-offset)
		}
		if err := c.Release(ctx, key, h.Token); err != nil {
			t.Fatal(err)
		}
		code := p.waitExit(t, fmt.Sprintf("race %d (offset %v): the SIGTERM was lost", i, offset))
		out, errOut := p.stdout.String(), p.stderr.String()
		switch {
		case code == exitError && !strings.Contains(out, "started"):
			// Interrupted before COMMAND ran.
			notStarted++
		case code == 0 && strings.Contains(out, "TERM"),
			code == 128+int(syscall.SIGTERM):
			// COMMAND ran and got the signal (before its trap was set,
			// it died of it; between the trap and its echo, it said
			// TERM without "started").
			started++
		default:
			t.Fatalf("race %d (offset %v): exit %d, stdout %q, stderr %q", i, offset, code, out, errOut)
		}
		noHolderWithin(t, c, key, time.Second)
	}
	t.Logf("%d races: COMMAND not started %d times, started and signalled %d times", races, notStarted, started)
}

// alive reports whether pid is a process that has not ended (a zombie has
// ended).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

// waitGone waits until pid has ended.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("%s: process %d still runs", what, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pidLine waits for the first line of p's stdout, a process id.
func pidLine(t *testing.T, p *runProc) int {
	t.Helper()
	p.stdout.waitFor(t, "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(p.stdout.String(), "\n", 2)[0]))
	if err != nil {
		t.Fatalf("want a pid, got %q", p.stdout.String())
	}
	return pid
}

// COMMAND runs in a process group of its own: a forwarded signal and a
// lost lock reach the processes it started (here a grandchild of baton
// under sh), and the group does not run on without baton.
func TestRunSignalsTheWholeGroup(t *testing.T) {
	needBinary(t)
	url := startNode(t)
	c := apiClient(t, url)
	// The sh ignores nothing: it ends with the signal, so does its sleep.
	grandchild := []string{"sh", "-c", `sleep 300 & echo $!; wait`}

	t.Run("forwarded SIGTERM", func(t *testing.T) {
		p := startRun(t, url, append([]string{"g/term", "--"}, grandchild...)...)
		pid := pidLine(t, p)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		p.waitExit(t, "SIGTERM")
		waitGone(t, pid, "after a forwarded SIGTERM")
		noHolderWithin(t, c, "g/term", time.Second)
	})
	t.Run("lost lock", func(t *testing.T) {
		// The sh traps TERM and goes on: the group gets SIGKILL after
		// --kill-after, the sleep with it.
		p := startRun(t, url, "g/lost", "--lease", "1", "--kill-after", "0.2", "--",
			"sh", "-c", `trap '' TERM; sleep 300 & echo $!; while :; do wait; done`)
		pid := pidLine(t, p)
		st, err := c.Status(t.Context(), "g/lost")
		if err != nil || st.Holder == nil {
			t.Fatalf("status while COMMAND runs: %+v, %v", st, err)
		}
		if err := c.Release(t.Context(), "g/lost", st.Holder.Token); err != nil {
			t.Fatal(err)
		}
		if code := p.waitExit(t, "lost lock"); code != exitLost {
			t.Fatalf("exit %d, want %d; stderr %q", code, exitLost, p.stderr.String())
		}
		waitGone(t, pid, "after the lock was lost")
	})
	t.Run("baton killed", func(t *testing.T) {
		p := startRun(t, url, append([]string{"g/kill", "--lease", "30", "--"}, grandchild...)...)
		pid := pidLine(t, p)
		_ = p.cmd.Process.Kill()
		p.waitExit(t, "SIGKILL")
		waitGone(t, pid, "after baton was killed")
	})
}

// procState is the state letter of pid in /proc (R, S, T, Z, ...), "" when
// it is gone.
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 0 {
		return f[0]
	}
	return ""
}

// waitState waits until pid is in one of the states (procState letters).
func waitState(t *testing.T, pid int, states, what string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		st := procState(pid)
		if st != "" && strings.Contains(states, st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: process %d is in state %q, want one of %q", what, pid, st, states)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Ctrl+Z stops baton's job as a whole: a SIGTSTP to baton (the terminal's,
// when baton's group is the foreground) stops COMMAND's group and baton,
// and SIGCONT (fg, bg) continues both. Stopped by it, baton left COMMAND
// running with nobody renewing the lease: the lock ran out under it.
func TestRunStopsWithCommand(t *testing.T) {
	needBinary(t)
	url := startNode(t)
	c := apiClient(t, url)
	p := &runProc{stdout: newSyncBuffer(), stderr: newSyncBuffer(), exited: make(chan struct{})}
	p.cmd = exec.Command(batonBin, "run", "g/tstp", "--lease", "4", "--", "sh", "-c", `sleep 300 & echo $!; wait`)
	p.cmd.Env = cleanEnv(api.EnvAddr + "=" + url)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.WaitDelay = time.Second
	// A group of its own, as a shell's job: baton stops its group.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.exited)
		err := p.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
		}
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	sleeper := pidLine(t, p)
	baton := p.cmd.Process.Pid

	_ = syscall.Kill(-baton, syscall.SIGTSTP) // Ctrl+Z to baton's job
	waitState(t, baton, "T", "baton after SIGTSTP")
	waitState(t, sleeper, "T", "COMMAND's sleep while baton is stopped")

	_ = syscall.Kill(-baton, syscall.SIGCONT) // bg
	waitState(t, sleeper, "S", "COMMAND's sleep after SIGCONT")
	waitState(t, baton, "SR", "baton after SIGCONT")

	// An operator's SIGSTOP of COMMAND's group is no job control: baton
	// runs on and renews (a SIGCONT to the group alone must not find
	// COMMAND running under a stopped baton).
	group, err := syscall.Getpgid(sleeper)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(t.Context(), "g/tstp")
	if err != nil || st.Holder == nil {
		t.Fatalf("status: %+v, %v", st, err)
	}
	_ = syscall.Kill(-group, syscall.SIGSTOP)
	waitState(t, sleeper, "T", "COMMAND's sleep after SIGSTOP")
	deadline := time.Now().Add(bound)
	for {
		now, err := c.Status(t.Context(), "g/tstp")
		if err != nil {
			t.Fatal(err)
		}
		if now.Holder != nil && now.Holder.Token == st.Holder.Token && now.Holder.ExpiresAt.After(st.Holder.ExpiresAt) {
			break // renewed
		}
		if time.Now().After(deadline) {
			t.Fatalf("not renewed while COMMAND's group is stopped by SIGSTOP: %+v (baton in state %q)", now.Holder, procState(baton))
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(-group, syscall.SIGCONT)
	waitState(t, sleeper, "S", "COMMAND's sleep after the operator's SIGCONT")

	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.waitExit(t, "SIGTERM"); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d, want %d; stderr %q", code, 128+int(syscall.SIGTERM), p.stderr.String())
	}
	waitGone(t, sleeper, "after a forwarded SIGTERM")
	noHolderWithin(t, c, "g/tstp", time.Second)
}

// A Ctrl+Z that comes after COMMAND ended, while baton's final release
// waits for a node that does not answer (here: paused), stops baton as it
// stops any program; SIGCONT continues it, and the release completes.
// SIGTSTP stayed caught for COMMAND's group, which was gone: the stop was
// dropped and baton ran on through its up to 10 s of release retries.
func TestRunStopsDuringTheFinalRelease(t *testing.T) {
	needBinary(t)
	n := startServe(t, t.TempDir(), nil)
	endFile := t.TempDir() + "/end"
	p := &runProc{stdout: newSyncBuffer(), stderr: newSyncBuffer(), exited: make(chan struct{})}
	p.cmd = exec.Command(batonBin, "run", "g/tstp-end", "--lease", "30", "--",
		"sh", "-c", `echo $$; while [ ! -e "$0" ]; do sleep 0.02; done`, endFile)
	p.cmd.Env = cleanEnv(api.EnvAddr + "=" + n.url)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.WaitDelay = time.Second
	// A group of its own, as a shell's job.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.exited)
		err := p.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
		}
	}()
	t.Cleanup(func() {
		_ = n.cmd.Process.Signal(syscall.SIGCONT)
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	sh := pidLine(t, p)
	guard := parentOf(t, sh)
	baton := p.cmd.Process.Pid

	if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitState(t, n.cmd.Process.Pid, "T", "the node after SIGSTOP")
	if err := os.WriteFile(endFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitGone(t, guard, "COMMAND's guard after COMMAND ended")
	// Ctrl+Z until baton stops: one that came before baton saw COMMAND's
	// end went to COMMAND's group.
	deadline := time.Now().Add(bound)
	for procState(baton) != "T" {
		if time.Now().After(deadline) || !alive(baton) {
			t.Fatalf("baton in state %q after SIGTSTPs during its final release, want T (stopped); stderr %q", procState(baton), p.stderr.String())
		}
		_ = syscall.Kill(baton, syscall.SIGTSTP)
		time.Sleep(20 * time.Millisecond)
	}
	_ = n.cmd.Process.Signal(syscall.SIGCONT)
	_ = syscall.Kill(baton, syscall.SIGCONT)
	if code := p.waitExit(t, "after SIGCONT"); code != 0 {
		t.Fatalf("exit %d, want 0; stderr %q", code, p.stderr.String())
	}
	if st := n.status("g/tstp-end"); st.Holder != nil {
		t.Fatalf("still held after baton run ended: %+v; stderr %q", st.Holder, p.stderr.String())
	}
}

// parentOf returns the parent process ID of pid.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}
