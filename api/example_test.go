package api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/native"
)

// exampleNode starts a real single baton node on a free port, as `baton
// serve` would, and returns its address and a func that stops it.
func exampleNode() (addr string, stop func()) {
	dir, err := os.MkdirTemp("", "baton-example")
	if err != nil {
		log.Fatal(err)
	}
	eng, err := engine.New(engine.Config{DataDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	url := "http://" + ln.Addr().String()
	srv := handlers.NewHTTPServer(handlers.New(eng, handlers.Config{Node: url, Logger: quiet}), context.Background(), quiet)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	return url, func() {
		eng.Close()
		srv.Close()
		<-done
		os.RemoveAll(dir)
	}
}

// Take a lock, pass its fencing token to the protected resource, release.
func ExampleClient_Acquire() {
	addr, stop := exampleNode()
	defer stop()

	cfg := api.DefaultConfig() // BATON_ADDR, BATON_AUTH_TOKEN
	cfg.Addresses = []string{addr}
	c, err := api.NewClient(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	l, err := c.Acquire(ctx, "orders/42", api.WithLease(30*time.Second), api.WithWait(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("holding", l.Key, "token > 0:", l.Token > 0)
	// ... write to the resource, passing l.Token ...
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	st, _ := c.Status(ctx, "orders/42")
	fmt.Println("holder after release:", st.Holder)
	// Output:
	// holding orders/42 token > 0: true
	// holder after release: <nil>
}

// Run a function under a lock that is kept alive while it runs and
// released after.
func ExampleClient_WithLock() {
	addr, stop := exampleNode()
	defer stop()
	c, err := api.NewClient(api.Config{Addresses: []string{addr}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	err = c.WithLock(context.Background(), "reports/daily", func(ctx context.Context, token uint64) error {
		// ctx is cancelled if the lock is lost.
		fmt.Println("building the report under the lock")
		return nil
	}, api.WithLease(10*time.Second))
	fmt.Println("err:", err)
	// Output:
	// building the report under the lock
	// err: <nil>
}

// A bounded wait: the lock is busy, the wait runs out, nothing is held.
func ExampleWithWait() {
	addr, stop := exampleNode()
	defer stop()
	c, err := api.NewClient(api.Config{Addresses: []string{addr}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	held, err := c.Acquire(ctx, "busy")
	if err != nil {
		log.Fatal(err)
	}
	defer held.Release(ctx)

	_, err = c.Acquire(ctx, "busy", api.WithWait(100*time.Millisecond))
	fmt.Println("timed out:", errors.Is(err, api.ErrTimeout))
	var se *api.StatusError
	if errors.As(err, &se) {
		fmt.Println(se.StatusCode, se.Code)
	}
	// Output:
	// timed out: true
	// 408 timeout
}

// Keep a lock alive for a long job, and stop the job if the lock is lost.
func ExampleLock_KeepAlive() {
	addr, stop := exampleNode()
	defer stop()
	c, err := api.NewClient(api.Config{Addresses: []string{addr}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	l, err := c.Acquire(ctx, "jobs/import", api.WithLease(2*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	l.KeepAlive(ctx) // renews every second
	work := time.After(100 * time.Millisecond)
	select {
	case <-work:
		fmt.Println("job done")
	case <-l.Lost():
		fmt.Println("lock lost, stopping:", l.Err())
	}
	fmt.Println("release:", l.Release(ctx))
	// Output:
	// job done
	// release: <nil>
}

// exampleNativeNode starts a node that serves only the native protocol
// (as `baton serve --native-listen`), and returns its address.
func exampleNativeNode() (addr string, stop func()) {
	dir, err := os.MkdirTemp("", "baton-example")
	if err != nil {
		log.Fatal(err)
	}
	eng, err := engine.New(engine.Config{DataDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := native.New(eng, native.Config{})
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	return "baton://" + ln.Addr().String(), func() {
		srv.Close()
		<-done
		eng.Close()
		os.RemoveAll(dir)
	}
}

// A baton:// address selects the native protocol: the same API, with the
// requests pipelined on the client's connections. It has no read calls.
func ExampleNewClient_native() {
	addr, stop := exampleNativeNode() // "baton://127.0.0.1:port"
	defer stop()
	c, err := api.NewClient(api.Config{Addresses: []string{addr}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	l, err := c.Acquire(ctx, "orders/42", api.WithLease(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("holding", l.Key, "token > 0:", l.Token > 0)
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	_, err = c.Status(ctx, "orders/42")
	fmt.Println("status over native unsupported:", errors.Is(err, errors.ErrUnsupported))
	// Output:
	// holding orders/42 token > 0: true
	// status over native unsupported: true
}
