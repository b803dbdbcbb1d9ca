package api_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// silentListener accepts TCP connections and never reads or writes on
// them, as a node paused (SIGSTOP, a frozen VM) before the client's first
// connection to it: the kernel completes the TCP handshake, the node never
// answers the HTTP/2 preface nor the client's first round trip.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	return ln.Addr().String()
}

// neverGiveUpTheDial sets cfg so that neither the dial nor the pings end
// a connection's first round trip to a silent node: only the call's own
// bound may.
func neverGiveUpTheDial(cfg *api.Config) {
	cfg.DialTimeout = time.Hour
	cfg.PingInterval, cfg.PingTimeout = time.Hour, time.Hour
}

// An acquire with a wait is bounded by the wait and AcquireGrace (Config,
// README "Clients during a failover"; the CLI's --acquire-grace: "a node
// that has not answered --acquire-grace after the wait ran out counts as
// silent") also while the only node it may ask has not completed the
// client's first round trip: it waited for the connection, under a ctx
// without a deadline, until the dial failed (by default two connections,
// each broken by its unanswered PING: 10 s for a 1 s wait, the CLI 6 s). etcd-io/etcd#18082 is the
// same hang in etcd's Mutex.Lock with its servers unreachable. A baton://
// acquire was bounded already (its request goes out before the first
// ping's answer, and its attempt limit applies).
func TestAcquireWithWaitIsBoundedWhileTheOnlyNodeNeverAnswersTheDial(t *testing.T) {
	for _, scheme := range []string{"http", "baton"} {
		t.Run(scheme, func(t *testing.T) { acquireFromASilentDial(t, scheme) })
	}
}

func acquireFromASilentDial(t *testing.T, scheme string) {
	addr := scheme + "://" + silentListener(t)
	c := newClient(t, func(cfg *api.Config) {
		// Only the acquire's own bound may end it.
		neverGiveUpTheDial(cfg)
		cfg.AcquireGrace = 200 * time.Millisecond
	}, addr)
	done := make(chan error, 1)
	go func() {
		_, err := c.Acquire(context.Background(), "k", api.WithWait(200*time.Millisecond))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, api.ErrUnavailable) {
			t.Fatalf("Acquire: %v, want ErrUnavailable (nothing was asked of a node)", err)
		}
	case <-time.After(bound):
		t.Fatalf("Acquire with a 200 ms wait and a 200 ms AcquireGrace still waiting for the silent node's connection after %v", bound)
	}
}

// A release that no node confirmed within ReleaseTimeout says so, on both
// protocols: "not confirmed within" the timeout, wrapping
// context.DeadlineExceeded. Over HTTP, a release whose connection never
// came up ended with the bare "context deadline exceeded" of its own
// window, as if the caller's ctx had run out (the caller's had no
// deadline).
func TestReleaseNoNodeConfirmedSaysSo(t *testing.T) {
	for _, scheme := range []string{"http", "baton"} {
		t.Run(scheme, func(t *testing.T) {
			addr := scheme + "://" + silentListener(t)
			c := newClient(t, func(cfg *api.Config) {
				neverGiveUpTheDial(cfg)
				cfg.ReleaseTimeout = 300 * time.Millisecond
			}, addr)
			err := c.Release(context.Background(), "k", 7)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("release with no node answering: %v, want context.DeadlineExceeded", err)
			}
			if want := "not confirmed within 300ms"; !strings.Contains(err.Error(), want) {
				t.Fatalf("release with no node answering: %q, want it to say %q", err, want)
			}
		})
	}
}
