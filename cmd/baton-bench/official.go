package main

import (
	"context"
	"errors"
	"time"

	"github.com/baton-io/baton/api"
)

// officialSet drives the official Go client (package api): one api.Client
// for all workload clients, as an application would share it, with as many
// h2c connections as the run needs (the client's default is two; thousands
// of parked waiters need more, see --streams-per-conn).
type officialSet struct {
	c *api.Client
}

// newOfficialSet builds the official clients of one run.
func newOfficialSet(addr string, cfg *config, clients int) (lockerSet, error) {
	conns := cfg.conns
	if conns == 0 {
		conns = max(2, (clients+cfg.streamsPerConn-1)/cfg.streamsPerConn)
	}
	c, err := api.NewClient(api.Config{
		Addresses:       []string{"http://" + addr},
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
