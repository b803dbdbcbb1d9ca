package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
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

	// Before the server answers: a signal from then on ends it cleanly.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	n, err := OpenNode(cfg, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		return exitCode(err)
	}

	log.Info("baton serving", "peers", len(cfg.Peers), "listen", n.Addr(), "tls", n.useTLS, "auth", len(cfg.AuthTokens) > 0,
		"advertise", n.cfg.Advertise, "data_dir", cfg.DataDir, "fsync", cfg.Fsync, "last_token", n.Engine().LastToken())

	for _, w := range cfg.securityWarnings() {
		log.Warn(w)
	}

	code := 0
	select {
	case sig := <-sigs:
		log.Info("shutting down", "signal", sig.String())
	case err := <-n.Served():
		log.Error("server stopped", "err", err)
		code = exitError
	}
	if err := n.Close(); err != nil {
		code = exitError
	}
	log.Info("stopped", "last_token", n.Engine().LastToken())
	return code
}
