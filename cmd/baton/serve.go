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

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/cluster"
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
	var lh slog.Handler = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	if cfg.LogFormat == "json" {
		lh = slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	}
	log := slog.New(lh)
	slog.SetDefault(log)

	metrics := handlers.NewMetrics()
	events := handlers.NewEventLog(handlers.DefaultEventLogSize)
	ec := cfg.engineConfig()
	var node *cluster.Node // set before anything can produce an event
	ec.OnEvent = func(ev engine.Event) {
		metrics.OnEvent(ev)
		events.Add(ev)
		if node != nil {
			node.OnEvent(ev)
		}
	}
	ec.Standby = len(cfg.Peers) > 0
	eng, err := engine.New(ec)
	if err != nil {
		log.Error("cannot start the engine", "err", err)
		return exitError
	}
	hc := handlers.Config{Node: cfg.Advertise, MaxBody: cfg.MaxBody, Logger: log, AuthTokens: cfg.AuthTokens, AdminTokens: cfg.AdminTokens, Metrics: metrics,
		CORSOrigins: cfg.CORSOrigins, Events: events, Pprof: cfg.Pprof}
	if ec.Standby {
		cc := cfg.clusterConfig()
		cc.Logger = log
		cc.OnRole = metrics.SetRole
		cc.OnChange = func(kind, n, msg string) {
			metrics.OnClusterChange(kind)
			events.AddEvent(api.Event{Kind: kind, Node: n, Message: msg})
		}
		node, err = cluster.New(cc, eng)
		if err != nil {
			log.Error("cannot start the cluster node", "err", err)
			_ = eng.Close()
			return exitUsage
		}
		metrics.SetRole(api.RoleStandby)
		hc.Gate, hc.Cluster = node, node.View
	}
	h := handlers.New(eng, hc)
	if node != nil {
		h.Router().Mount(cluster.PathPrefix, handlers.RequireSecret(cfg.ClusterSecret)(node.Handler()))
	}

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
	useTLS := srv.TLSConfig != nil // read before Serve: ServeTLS writes to it
	go func() {
		if useTLS {
			served <- srv.ServeTLS(ln, "", "")
			return
		}
		served <- srv.Serve(ln)
	}()
	if node != nil {
		node.Start()
	}
	log.Info("baton serving", "peers", len(cfg.Peers), "listen", ln.Addr().String(), "tls", useTLS, "auth", len(cfg.AuthTokens) > 0, "advertise", cfg.Advertise, "data_dir", cfg.DataDir, "last_token", eng.LastToken())

	code := 0
	select {
	case sig := <-sigs:
		log.Info("shutting down", "signal", sig.String())
	case err := <-served:
		log.Error("server stopped", "err", err)
		code = exitError
	}
	if node != nil {
		// The active hands off first: its waiters and in-flight calls are
		// redirected to the successor, holders keep their tokens there.
		hctx, hstop := context.WithTimeout(context.Background(), 5*time.Second)
		_ = node.Close(hctx)
		hstop()
	}
	// Waiters left (a single node, or no successor): each gets 503 +
	// Retry-After and can retry elsewhere.
	if err := eng.Close(); err != nil {
		log.Error("writing the token high-water mark", "err", err)
		code = exitError
	}
	events.Close() // end the /events streams, or Shutdown would wait for them
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
