package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// serve runs `baton serve` until SIGINT or SIGTERM. On a signal, parked
// acquires are answered 503 with Retry-After, the exact token high-water mark
// is written, and it returns 0.
func serve(args []string) int {
	cfg, err := loadConfig(args, os.Environ())
	if errors.Is(err, errHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "baton serve:", err)
		return exitUsage
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	metrics := handlers.NewMetrics()
	ec := cfg.engineConfig()
	ec.OnEvent = metrics.OnEvent
	eng, err := engine.New(ec)
	if err != nil {
		log.Error("cannot start the engine", "err", err)
		return exitError
	}
	h := handlers.New(eng, handlers.Config{Node: cfg.Advertise, MaxBody: cfg.MaxBody, Logger: log, AuthTokens: cfg.AuthTokens, Metrics: metrics})

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		log.Error("cannot listen", "listen", cfg.Listen, "err", err)
		_ = eng.Close()
		return exitError
	}
	baseCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := handlers.NewHTTPServer(h, baseCtx, log)
	srv.TLSConfig, _ = cfg.tlsConfig() // loaded once already by validate

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	served := make(chan error, 1)
	go func() {
		if srv.TLSConfig != nil {
			served <- srv.ServeTLS(ln, "", "")
			return
		}
		served <- srv.Serve(ln)
	}()
	log.Info("baton serving", "listen", ln.Addr().String(), "tls", srv.TLSConfig != nil, "auth", len(cfg.AuthTokens) > 0, "advertise", cfg.Advertise, "data_dir", cfg.DataDir, "last_token", eng.LastToken())

	code := 0
	select {
	case sig := <-sigs:
		log.Info("shutting down", "signal", sig.String())
	case err := <-served:
		log.Error("server stopped", "err", err)
		code = exitError
	}
	// Waiters first: each gets 503 + Retry-After and can retry elsewhere.
	if err := eng.Close(); err != nil {
		log.Error("writing the token high-water mark", "err", err)
		code = exitError
	}
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("shutdown", "err", err)
		_ = srv.Close()
	}
	cancel()
	log.Info("stopped", "last_token", eng.LastToken())
	return code
}
