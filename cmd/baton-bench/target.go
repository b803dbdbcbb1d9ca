package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// target is one server under load: baton, null or floor.
type target struct {
	name string // "baton", "null" or "floor"
	addr string // host:port on 127.0.0.0/8
	// naddr is the native protocol's address (--proto native), "" when
	// the target serves none.
	naddr string
	// pid is the server's process, for VmRSS; 0 when it runs inside this
	// process or is unknown (then no RSS figure is reported).
	pid  int
	stop func()
	// logPath, for spawned processes, holds their output.
	logPath string
	// owned is true for targets this bench started (and stops after the
	// run): their state need not be cleaned up.
	owned bool
	// standbys, with --standbys, are the nodes replicating this one (the
	// active); stop stops them too.
	standbys []*target
}

// freePort returns a free TCP port on 127.0.0.1 (closed again: the
// caller's process binds it next, a small race accepted for a bench).
func freePort() (string, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitHealthy polls GET /healthz on addr until it answers 200, the process
// exits (exited closes), or timeout passes.
func waitHealthy(addr string, exited <-chan struct{}, timeout time.Duration) error {
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: loopbackDialer(nil)}}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("process exited before it became healthy")
		default:
		}
		resp, err := hc.Get("http://" + addr + "/healthz")
		if err == nil {
			closeBody(resp)
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not healthy after %v", addr, timeout)
}

// startProcess runs path with args, output to logPath, and waits until
// addr is healthy. The returned stop sends SIGTERM, then SIGKILL after 5 s.
func startProcess(name, path string, args []string, addr, logPath string) (*target, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	stop := func() {
		select {
		case <-exited:
			return
		default:
		}
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}
	if err := waitHealthy(addr, exited, 20*time.Second); err != nil {
		stop()
		return nil, fmt.Errorf("%s (%s %s): %w; log:\n%s", name, path, strings.Join(args, " "), err, tail(logPath, 20))
	}
	return &target{name: name, addr: addr, pid: cmd.Process.Pid, stop: stop, logPath: logPath, owned: true}, nil
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// spawnBaton starts the baton binary on a free port with a fresh data
// directory under tmp; with native, it serves the native protocol on
// another free port too.
func spawnBaton(bin, tmp string, extra []string, native bool) (*target, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(tmp, "data-")
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "--listen", addr, "--data-dir", dir}
	var naddr string
	if native {
		if naddr, err = freePort(); err != nil {
			return nil, err
		}
		args = append(args, "--native-listen", naddr)
	}
	t, err := startProcess("baton", bin, append(args, extra...), addr, filepath.Join(dir, "baton.log"))
	if t != nil {
		t.naddr = naddr
	}
	return t, err
}

// spawnRef starts a reference server (null or floor) in a child process:
// this very binary in its hidden __serve-ref mode.
func spawnRef(kind, tmp string, maxStreams int) (*target, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"__serve-ref", kind, addr, strconv.Itoa(maxStreams)}
	var naddr string
	if kind == "nfloor" {
		if naddr, err = freePort(); err != nil {
			return nil, err
		}
		args = append(args, naddr)
	}
	t, err := startProcess(kind, self, args, addr, filepath.Join(tmp, kind+".log"))
	if t != nil {
		t.naddr = naddr
	}
	return t, err
}

// buildBaton builds ./cmd/baton of the module this command runs in into
// dir, and returns the binary's path.
func buildBaton(dir string) (string, error) {
	out := filepath.Join(dir, "baton")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/baton-io/baton/cmd/baton")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build github.com/baton-io/baton/cmd/baton (run from inside the module, or pass --baton): %w\n%s", err, buf.String())
	}
	return out, nil
}

// readRSS returns VmRSS of pid in bytes.
func readRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			fs := strings.Fields(v)
			if len(fs) == 2 && fs[1] == "kB" {
				kb, err := strconv.ParseInt(fs[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// loadAvg1 returns the 1-minute load average of the machine (-1 when
// unknown): on a shared 2-core machine it tells how much of the CPU the
// run had.
func loadAvg1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// settledRSS samples VmRSS every 200 ms until two readings in a row are
// within 1% (or 3 s pass) and returns the last reading.
func settledRSS(pid int) (int64, error) {
	prev, err := readRSS(pid)
	if err != nil {
		return 0, err
	}
	for i := 0; i < 15; i++ {
		time.Sleep(200 * time.Millisecond)
		cur, err := readRSS(pid)
		if err != nil {
			return 0, err
		}
		d := cur - prev
		if d < 0 {
			d = -d
		}
		if d*100 <= cur {
			return cur, nil
		}
		prev = cur
	}
	return prev, nil
}

// clockTicks is the unit of utime and stime in /proc/PID/stat: USER_HZ,
// which is 100 on every Linux architecture Go supports (proc(5)).
const clockTicks = 100

// readCPU returns the CPU time (user + system) pid has used so far.
func readCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: fields are counted from
	// its closing parenthesis; utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// cpuWindow measures the CPU time pid uses between the shared-clock
// instants start and end (see now). The returned function waits for end
// and reports it; it reports -1 when pid is 0 or /proc could not be read.
func cpuWindow(ctx context.Context, pid int, start, end int64) func() time.Duration {
	if pid == 0 {
		return func() time.Duration { return -1 }
	}
	res := make(chan time.Duration, 1)
	go func() {
		sleepUntil := func(t int64) bool {
			select {
			case <-time.After(time.Duration(t - now())):
				return true
			case <-ctx.Done():
				return false
			}
		}
		var c0, c1 time.Duration
		var err0, err1 error
		if sleepUntil(start) {
			c0, err0 = readCPU(pid)
		}
		if sleepUntil(end) {
			c1, err1 = readCPU(pid)
		}
		if ctx.Err() != nil || err0 != nil || err1 != nil {
			res <- -1
			return
		}
		res <- c1 - c0
	}()
	return func() time.Duration { return <-res }
}
