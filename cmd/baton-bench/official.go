package main

import (
	"context"
	"errors"
	"time"

	"github.com/baton-io/baton/api"
)

// officialSet drives the official Go client (package api): one api.Client
// for all workload clients, as an application would share it, with as many
// connections as the run needs: over h2c, the client's default is two, and
// thousands of parked waiters need more (see --streams-per-conn); over the
// native protocol (a baton:// address), as many as the raw client uses.
type officialSet struct {
	c *api.Client
}

// newOfficialSet builds the official client of one run for base
// ("http://host:port" or "baton://host:port") with conns connections.
func newOfficialSet(base string, conns int, cfg *config) (lockerSet, error) {
	c, err := api.NewClient(api.Config{
		Addresses:       []string{base},
		ConnsPerAddress: conns,
		DialContext:     loopbackDialer(make(chan struct{}, cfg.dialParallel)),
		UserAgent:       "baton-bench",
	})
	if err != nil {
		return nil, err
	}
	return &officialSet{c: c}, nil
}

// For returns the shared client's locker.
func (s *officialSet) For(int) locker { return officialLocker{s.c} }

// Close closes the client.
func (s *officialSet) Close() { s.c.Close() }

// officialLocker adapts api.Client to locker.
type officialLocker struct{ c *api.Client }

func secs(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }

// Acquire implements locker.
func (l officialLocker) Acquire(ctx context.Context, key string, lease, wait float64) (uint64, error) {
	lk, err := l.c.Acquire(ctx, key, api.WithLease(secs(lease)), api.WithWait(secs(wait)))
	if errors.Is(err, api.ErrTimeout) {
		return 0, errTimeout
	}
	if err != nil {
		return 0, err
	}
	return lk.Token, nil
}

// AcquireMode implements modeLocker.
func (l officialLocker) AcquireMode(ctx context.Context, key string, lease, wait float64, m acqMode) (uint64, error) {
	opts := []api.AcquireOption{api.WithLease(secs(lease)), api.WithWait(secs(wait))}
	if m.shared {
		opts = append(opts, api.WithShared())
	}
	if m.limit > 0 {
		opts = append(opts, api.WithLimit(m.limit))
	}
	lk, err := l.c.Acquire(ctx, key, opts...)
	if errors.Is(err, api.ErrTimeout) {
		return 0, errTimeout
	}
	if err != nil {
		return 0, err
	}
	return lk.Token, nil
}

// Release implements locker.
func (l officialLocker) Release(ctx context.Context, key string, token uint64) error {
	return l.c.Release(ctx, key, token)
}
