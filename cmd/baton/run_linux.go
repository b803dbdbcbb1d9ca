package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// guardCommand is the hidden subcommand that runs between `baton run` and
// COMMAND (runGuard): `baton __run-guard <baton's pid> -- COMMAND ARGS...`.
const guardCommand = "__run-guard"

// commandGroup runs COMMAND of `baton run` in a process group of its own,
// so that a signal reaches every process it started (the grandchildren of
// `sh -c '…'` too), and makes the group die with baton, so that nothing of
// it runs on under a lock that nobody renews once baton is gone (kill -9).
//
// Linux sends a parent-death signal to a child, not to its group, so the
// child that baton starts is a guard (baton itself, runGuard): the leader
// of the group, it gets SIGTERM when baton dies and then kills the whole
// group; otherwise it only waits for COMMAND and exits as COMMAND did.
//
// baton forwards signals to the group only once the guard said that
// COMMAND runs (a byte on a pipe, fd 3 of the guard): a signal that came
// earlier waits in baton until then, so COMMAND gets it exactly once,
// never while the group holds only the guard.
type commandGroup struct {
	cmd *exec.Cmd
	// tty is the terminal whose foreground COMMAND's group was given
	// (-1: none): baton takes it back when COMMAND ends.
	tty int
	// ready, ready's write end: the guard's pipe (nil without a guard).
	ready, readyW *os.File
}

// command returns the command that runs COMMAND (command[0] with its
// arguments) through the guard, as the leader of a new process group that
// gets the parent-death signal. When stdin is the terminal and baton is in
// its foreground, the group becomes the foreground group, so that the
// terminal's SIGINT and SIGQUIT reach COMMAND directly and COMMAND may
// read the terminal. Without the path of baton's own binary, COMMAND runs
// as the group's leader with SIGKILL as its parent-death signal.
func (g *commandGroup) command(command []string, stdin any) *exec.Cmd {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	self, err := os.Executable()
	if err == nil {
		g.ready, g.readyW, err = os.Pipe()
	}
	if err == nil {
		args := append([]string{guardCommand, strconv.Itoa(os.Getpid()), "--"}, command...)
		g.cmd = exec.Command(self, args...)
		g.cmd.ExtraFiles = []*os.File{g.readyW}
		attr.Pdeathsig = syscall.SIGTERM
	} else {
		g.cmd = exec.Command(command[0], command[1:]...)
	}
	g.tty = -1
	if f, ok := stdin.(*os.File); ok {
		fd := int(f.Fd())
		if pg, err := tcgetpgrp(fd); err == nil && pg == syscall.Getpgrp() {
			attr.Foreground, attr.Ctty = true, fd
			g.tty = fd
		}
	}
	g.cmd.SysProcAttr = attr
	return g.cmd
}

// started is called once the command started (or failed to): it waits
// for the guard to say whether COMMAND runs, and reports whether it does.
// Until then, nothing is to be sent to the group.
func (g *commandGroup) started(startErr error) bool {
	if g.ready == nil {
		return startErr == nil
	}
	g.readyW.Close()
	defer g.ready.Close()
	if startErr != nil {
		return false
	}
	var b [1]byte
	n, _ := g.ready.Read(b[:])
	return n == 1
}

// signal sends sig to every process in COMMAND's group.
func (g *commandGroup) signal(sig syscall.Signal) {
	_ = syscall.Kill(-g.cmd.Process.Pid, sig)
}

// jobSignals are the signals that baton forwards to COMMAND's group once
// it runs, besides those that end it: SIGTSTP (Ctrl+Z while baton's group
// has the terminal) stops COMMAND, and wait then stops baton (stopped by
// it, baton left COMMAND running with nobody renewing its lease).
func (g *commandGroup) jobSignals() []os.Signal { return []os.Signal{syscall.SIGTSTP} }

// stopOnJobSignals is called once COMMAND ended: until the returned func
// is called, a SIGTSTP (Ctrl+Z during the final release) stops baton, as
// it stops any program, and SIGCONT (fg, bg) continues it. The signal was
// caught for COMMAND's group (jobSignals), and once a Go program caught
// SIGTSTP, signal.Reset does not give it back its default action (the
// runtime drops it then): the stop is made here, with SIGSTOP.
func (g *commandGroup) stopOnJobSignals() func() {
	tstp := make(chan os.Signal, 1)
	signal.Notify(tstp, syscall.SIGTSTP)
	quit, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		for {
			select {
			case <-tstp:
				_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			case <-quit:
				return
			}
		}
	}()
	return func() {
		signal.Stop(tstp)
		close(quit)
		<-ended
	}
}

// Child states of waitid (si_code of SIGCHLD), which x/sys/unix lacks.
const (
	cldStopped   = 5
	cldContinued = 6
)

// wait waits for COMMAND's end as cmd.Wait does, and meanwhile keeps
// baton's job stopped whenever COMMAND's group is: when the guard stops
// (Ctrl+Z while COMMAND has the terminal, or a forwarded SIGTSTP), suspend
// stops baton too, so that the shell sees the job stopped and gets the
// terminal back, and no lease is renewed for a COMMAND that does not run.
// Before, baton ran on: the shell waited for it, the terminal hung with a
// stopped foreground group, and the lock was renewed for ever.
func (g *commandGroup) wait() error {
	pid := g.cmd.Process.Pid
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WSTOPPED|unix.WCONTINUED|unix.WNOWAIT, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			break
		}
		var took unix.Siginfo
		switch info.Code {
		case cldStopped:
			// Taken off the child's state, or the next look sees it again.
			// Only a stop of job control (Ctrl+Z, a read or write of the
			// terminal from the background) stops baton's job: an
			// operator's SIGSTOP of the group leaves baton renewing, as
			// a SIGCONT that only the group gets would otherwise let
			// COMMAND run on under a stopped baton.
			if unix.Waitid(unix.P_PID, pid, &took, unix.WSTOPPED|unix.WNOHANG, nil) == nil && took.Code == cldStopped {
				switch syscall.Signal(siStatus(&took)) {
				case syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU:
					g.suspend()
				}
			}
			continue
		case cldContinued:
			_ = unix.Waitid(unix.P_PID, pid, &took, unix.WCONTINUED|unix.WNOHANG, nil)
			continue
		}
		break // it ended: cmd.Wait reaps it
	}
	return g.cmd.Wait()
}

// siStatus returns si_status of a SIGCHLD siginfo (for CLD_STOPPED, the
// signal that stopped the child), which x/sys/unix leaves unnamed: after
// si_signo, si_errno and si_code (int32 each, in some order) comes a union
// aligned as a pointer, where si_pid and si_uid (int32) precede it.
func siStatus(info *unix.Siginfo) int32 {
	a := unsafe.Alignof(uintptr(0))
	return *(*int32)(unsafe.Add(unsafe.Pointer(info), (12+a-1)/a*a+8))
}

// suspend stops baton's job while COMMAND's group is stopped: the whole
// group (COMMAND itself may have ignored the SIGTSTP) is stopped for
// good, the terminal given back to baton's group, and baton's group
// stopped, which the shell reports as a stopped job. When the job is
// continued (fg, bg), COMMAND's group gets the terminal back if baton
// has it (fg) and is continued.
func (g *commandGroup) suspend() {
	g.signal(syscall.SIGSTOP)
	g.done()
	// The stop takes baton's threads only after kill returns (this one
	// ran on and continued COMMAND at once): the SIGCONT that ends it is
	// waited for.
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	defer signal.Stop(cont)
	_ = syscall.Kill(0, syscall.SIGSTOP)
	<-cont
	if g.tty >= 0 {
		if pg, err := tcgetpgrp(g.tty); err == nil && pg == syscall.Getpgrp() {
			setForeground(g.tty, g.cmd.Process.Pid)
		}
	}
	g.signal(syscall.SIGCONT)
}

// done gives the terminal's foreground back to baton's group after COMMAND
// ended (the shell, or a script, that runs baton reads the terminal next).
func (g *commandGroup) done() {
	if g.tty < 0 {
		return
	}
	setForeground(g.tty, syscall.Getpgrp())
}

// setForeground makes the process group pg the foreground group of the
// terminal tty.
func setForeground(tty, pg int) {
	// baton may be a background group: a tcsetpgrp would stop it with
	// SIGTTOU unless that is ignored.
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	p := int32(pg)
	_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, uintptr(tty), syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&p)))
}

func tcgetpgrp(fd int) (int, error) {
	var pg int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pg))); e != 0 {
		return 0, e
	}
	return int(pg), nil
}

// runGuard is `baton __run-guard PARENT -- COMMAND ARGS...`, the leader of
// COMMAND's process group (see commandGroup). It starts COMMAND (exit 127
// if it cannot), and exits with COMMAND's status, dying of COMMAND's
// signal if COMMAND died of one. The signals sent to the group reach
// COMMAND directly; the guard survives them, except when its parent is no
// longer PARENT: then baton died (the parent-death signal) and the guard
// kills the group, itself included.
func runGuard(args []string) int {
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintln(os.Stderr, "baton: "+guardCommand+" is internal to baton run")
		return exitUsage
	}
	parent, err := strconv.Atoi(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "baton: "+guardCommand+": bad parent pid")
		return exitUsage
	}
	// fd 3 says "COMMAND runs" to baton; COMMAND must not inherit it.
	ready := os.NewFile(3, "ready")
	syscall.CloseOnExec(3)
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT)
	if os.Getppid() != parent {
		// baton died before the signal could be caught.
		_ = syscall.Kill(0, syscall.SIGKILL)
	}
	select {
	case s := <-sigs:
		// A signal to the group (baton sends none yet: the terminal's)
		// before COMMAND runs: COMMAND does not start.
		if os.Getppid() != parent {
			_ = syscall.Kill(0, syscall.SIGKILL)
		}
		return dieOf(s.(syscall.Signal))
	default:
	}
	command := args[2:]
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "baton run: cannot start COMMAND: %s\n", err)
		return exitNoCommand
	}
	if ready != nil {
		_, _ = ready.Write([]byte{1})
		ready.Close()
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		select {
		case err := <-exited:
			return guardExit(err)
		case <-sigs:
			if os.Getppid() != parent {
				_ = syscall.Kill(0, syscall.SIGKILL)
			}
		}
	}
}

// guardExit passes COMMAND's end on: its exit status, or its signal.
func guardExit(err error) int {
	var ee *exec.ExitError
	if err == nil || !errors.As(err, &ee) {
		if err != nil {
			fmt.Fprintf(os.Stderr, "baton run: %s\n", err)
			return exitError
		}
		return exitOK
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return ee.ExitCode()
	}
	return dieOf(ws.Signal())
}

// dieOf ends the guard by sig, as COMMAND ended (128+sig if sig does not
// end a process).
func dieOf(sig syscall.Signal) int {
	signal.Reset(sig)
	sigDefault(sig)
	_ = syscall.Kill(os.Getpid(), sig)
	time.Sleep(100 * time.Millisecond) // the signal is on its way
	return 128 + int(sig)
}

// sigDefault gives sig its default action in the kernel (SIG_DFL), under
// the Go runtime. signal.Reset only gives it back to the runtime, whose
// handler for SIGQUIT, SIGABRT, SIGSEGV, SIGBUS and the like prints the
// stack of every goroutine and exits 2 instead of dying of the signal.
// The guard calls it only to die at once. An all-zero struct sigaction is
// SIG_DFL with no flags and an empty mask on every Linux; 64 bytes cover
// its size everywhere. The guard's core is of no use to anyone (COMMAND
// left its own, where its limit allowed): none is written.
func sigDefault(sig syscall.Signal) {
	_ = unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
	var act [8]uint64
	_, _, _ = unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
}
