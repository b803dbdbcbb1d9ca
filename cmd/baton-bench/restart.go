package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The restart workload (issue 12) starts one baton process with a fresh
// data directory, has --c clients take --keys keys (held for an hour, each
// answered only once its record is in the log), kills it (kill -9) and
// reports the size of the data directory; then it restarts baton on that
// directory --runs times, each timed from the start of the process to the
// first GET /readyz 200 (polled every 5 ms), checks that it holds all the
// keys again (baton_locks_held at GET /metrics) and kills it again.
//
//	RESULT workload=restart … p50_us=… (time to serving) keys=K held=K log_bytes=… fill_s=…

// restartWorkload runs the restart workload.
func (b *bench) restartWorkload(ctx context.Context) error {
	cfg := b.cfg
	if cfg.addr != "" {
		return errors.New("restart starts and kills its own node; it does not take --addr")
	}
	addr, err := freePort()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(b.tmp, "restart-")
	if err != nil {
		return err
	}
	args := append([]string{"serve", "--listen", addr, "--data-dir", dir}, cfg.batonArgs...)
	logPath := filepath.Join(b.tmp, "restart.log")
	tgt, err := startProcess("baton", cfg.batonBin, args, addr, logPath)
	if err != nil {
		return err
	}
	defer tgt.stop()

	b.prog.begin(fmt.Sprintf("restart: taking %d keys", cfg.keys))
	set, err := b.newSet(tgt, cfg.c)
	if err != nil {
		b.prog.end()
		return err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	t0 := time.Now()
	for i := range cfg.c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := set.For(i)
			for {
				j := next.Add(1) - 1
				if j >= int64(cfg.keys) || ctx.Err() != nil || firstErr.Load() != nil {
					return
				}
				if _, err := l.Acquire(ctx, "restart-"+strconv.FormatInt(j, 10), 3600, 0.001); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				b.prog.ops.Add(1)
			}
		}()
	}
	wg.Wait()
	fillS := time.Since(t0).Seconds()
	set.Close()
	b.prog.end()
	if e := firstErr.Load(); e != nil {
		return fmt.Errorf("taking keys: %w", *e)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	_ = syscall.Kill(tgt.pid, syscall.SIGKILL)
	tgt.stop() // waits for the exit
	logBytes, err := dirBytes(dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(b.stderr, "restart: %d keys taken in %.1f s; data directory after kill -9: %d bytes\n", cfg.keys, fillS, logBytes)

	var times []int64
	for i := 1; i <= cfg.runs && ctx.Err() == nil; i++ {
		b.prog.begin(fmt.Sprintf("restart %d/%d", i, cfg.runs))
		d, held, err := restartOnce(ctx, cfg.batonBin, args, addr, logPath)
		b.prog.end()
		if err != nil {
			return fmt.Errorf("restart #%d: %w", i, err)
		}
		if held != cfg.keys {
			return fmt.Errorf("restart #%d: %d keys held after the restart, want %d; log:\n%s", i, held, cfg.keys, tail(logPath, 10))
		}
		times = append(times, d)
		fmt.Fprintf(b.stderr, "restart #%d: serving after %.2f s, %d keys held\n", i, float64(d)/1e9, held)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &Result{Workload: "restart", Proto: "h1", Client: "plain", Target: "baton", C: cfg.c}
	r.P50, r.P99, r.P999 = percentiles(times)
	r.set("keys", float64(cfg.keys))
	r.set("held", float64(cfg.keys))
	r.set("log_bytes", float64(logBytes))
	r.set("fill_s", fillS)
	r.set("load1", loadAvg1())
	r.Run = fmt.Sprintf("median/%d", len(times))
	fmt.Fprintln(b.stdout, r)
	fmt.Fprintf(b.stdout, "\n== restart with %d held keys: serving again after p50 %.2f s (max of %d: %.2f s); data directory %.1f MB\n\n",
		cfg.keys, r.P50/1e6, len(times), maxOf(times)/1e9, float64(logBytes)/1e6)
	return nil
}

// restartOnce starts baton with args, returns the time from the start of
// the process to its first GET /readyz 200 and the keys it then holds, and
// kills it (kill -9).
func restartOnce(ctx context.Context, bin string, args []string, addr, logPath string) (d int64, held int, err error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return 0, 0, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: newTransport(transportOptions{proto: "h1"}, 1)}
	defer hc.CloseIdleConnections()
	for deadline := t0.Add(5 * time.Minute); ; {
		select {
		case <-exited:
			return 0, 0, fmt.Errorf("baton exited at start; log:\n%s", tail(logPath, 10))
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		default:
		}
		if resp, err := hc.Get("http://" + addr + "/readyz"); err == nil {
			closeBody(resp)
			if resp.StatusCode == http.StatusOK {
				d = time.Since(t0).Nanoseconds()
				break
			}
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("not serving after 5 minutes; log:\n%s", tail(logPath, 10))
		}
		time.Sleep(5 * time.Millisecond)
	}
	resp, err := hc.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "baton_locks_held "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return d, int(f), err
		}
	}
	return 0, 0, errors.New("no baton_locks_held at GET /metrics")
}

// dirBytes is the total size of the regular files under dir.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		fi, err := e.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	return n, err
}

func maxOf(v []int64) float64 {
	var m int64
	for _, x := range v {
		m = max(m, x)
	}
	return float64(m)
}
