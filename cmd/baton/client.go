package main

// The command-line client: baton acquire, release, renew, status and run,
// built on the Go client in package api (SPEC section 4).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/internal/jsonw"
)

// Exit codes of the client commands, besides exitOK, exitError and
// exitUsage (main.go).
const (
	exitTimeout   = 3   // the wait ran out: the lock was not granted
	exitLost      = 4   // baton run: the lock was lost while COMMAND ran
	exitNotHolder = 5   // release, renew: the lock is not held under that token
	exitNoCommand = 127 // baton run: COMMAND could not be started
)

// clientCommands names the subcommands that runClient handles.
var clientCommands = map[string]bool{
	"acquire": true,
	"release": true,
	"renew":   true,
	"status":  true,
	"run":     true,
	"cluster": true,
	"events":  true,
}

// cliIO is what a client command touches outside itself, so that tests can
// run commands in-process.
type cliIO struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	environ        func() []string
	// tty reports whether stderr is a terminal (for the waiting display).
	tty func() bool
}

func osIO() cliIO {
	return cliIO{
		stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr,
		getenv: os.Getenv, environ: os.Environ,
		tty: func() bool { return term.IsTerminal(int(os.Stderr.Fd())) },
	}
}

// runClient runs the client command cmd (one of clientCommands) with its
// arguments and returns the exit code.
func runClient(cmd string, args []string) int {
	return clientMain(context.Background(), cmd, args, osIO())
}

// clientFlags holds the flags every client command takes.
type clientFlags struct {
	fs        *pflag.FlagSet
	addr      []string
	authToken string
	// acquireGrace is --acquire-grace (acquire, run; 0: the library's
	// default): api.Config.AcquireGrace.
	acquireGrace durationValue
}

func newClientFlags(cmd string, cio cliIO) *clientFlags {
	f := &clientFlags{fs: pflag.NewFlagSet("baton "+cmd, pflag.ContinueOnError)}
	f.fs.SortFlags = false
	f.fs.SetOutput(cio.stderr)
	f.fs.StringSliceVar(&f.addr, "addr", nil, "node addresses, comma-separated: http(s)://host:port, or baton(s)://host:port for the native protocol (native_listen; acquire, release, renew and run only) (env BATON_ADDR; default "+api.DefaultAddr+")")
	f.fs.StringVar(&f.authToken, "auth-token", "", "bearer token (env BATON_AUTH_TOKEN)")
	f.fs.Usage = func() { printHelp(cio.stdout, cmd, f.fs) }
	return f
}

// graceFlag adds --acquire-grace, for the commands that acquire.
func (f *clientFlags) graceFlag() {
	f.fs.Var(&f.acquireGrace, "acquire-grace", fmt.Sprintf("with --wait: how long a node may take beyond the wait to answer before it counts as silent (paused) and the next node is asked; at least the cluster's sync_timeout + 2s (default %v)", api.DefaultAcquireGrace))
}

// client builds the api.Client from the flags and the environment.
func (f *clientFlags) client(cio cliIO) (*api.Client, error) {
	cs, err := f.clients(cio, false)
	if err != nil {
		return nil, err
	}
	return cs[0], nil
}

// clientPerNode builds one api.Client for each address the flags and the
// environment name (one for the default address when they name none), for
// a command that must keep to one node at a time: `baton events`, since
// each node numbers its own feed.
func (f *clientFlags) clientPerNode(cio cliIO) ([]*api.Client, error) {
	return f.clients(cio, true)
}

// clients builds the api.Client of client, or with perNode one for each
// address.
func (f *clientFlags) clients(cio cliIO, perNode bool) ([]*api.Client, error) {
	cfg := api.Config{
		Token: cio.getenv(api.EnvAuthToken),
		// A waiting acquire is a silent long poll: a node that stopped
		// answering (SIGSTOP, a frozen VM) is found by these pings. The
		// library's 15 s + 5 s kept `baton run --wait` on a paused active
		// for 20 s or more, long after a standby had taken over (which
		// takes under 2 s); a CLI's few connections can afford a ping
		// after each second of silence.
		PingInterval: cliPingInterval,
		PingTimeout:  cliPingTimeout,
		AcquireGrace: time.Duration(f.acquireGrace),
	}
	addrs, from := cio.getenv(api.EnvAddr), api.EnvAddr
	if f.fs.Changed("addr") {
		addrs, from = strings.Join(f.addr, ","), "--addr"
	}
	// Blanks dropped ("a,b," is a and b). A setting that names no address
	// at all (--addr "", BATON_ADDR=" , ") is refused, not taken for no
	// setting (the default address); an empty BATON_ADDR is unset.
	cfg.Addresses = api.SplitAddresses(addrs)
	if len(cfg.Addresses) == 0 && (addrs != "" || from == "--addr") {
		return nil, usagef("%s: no address in %q", from, addrs)
	}
	tokenFrom := api.EnvAuthToken
	if f.authToken != "" {
		cfg.Token, tokenFrom = f.authToken, "--auth-token"
	}
	c, err := api.NewClient(cfg)
	if err != nil {
		// NewClient fails only on its Config, here the addresses or the
		// token: an invalid setting (exit 2) that names where it came from.
		if errors.Is(err, api.ErrTokenUnsendable) {
			from = tokenFrom
		}
		return nil, usagef("%s: %s", from, strings.TrimPrefix(err.Error(), "baton: "))
	}
	if !perNode || len(cfg.Addresses) < 2 {
		return []*api.Client{c}, nil
	}
	c.Close() // the addresses and the token are valid: one Client each
	cs := make([]*api.Client, 0, len(cfg.Addresses))
	for _, a := range cfg.Addresses {
		one := cfg
		one.Addresses = []string{a}
		c, err := api.NewClient(one)
		if err != nil {
			for _, c := range cs {
				c.Close()
			}
			return nil, usagef("%s: %s", from, strings.TrimPrefix(err.Error(), "baton: "))
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// The CLI's HTTP/2 ping: after this much silence on a connection, and
// how long its answer may take before the connection counts as broken.
const (
	cliPingInterval = time.Second
	cliPingTimeout  = 2 * time.Second
)

// durationValue is a pflag.Value for durations given as seconds ("0.5",
// "30") or as Go durations ("1m30s").
type durationValue time.Duration

func (d *durationValue) String() string {
	if *d == 0 {
		return "0" // pflag then says no default: the help text says what 0 means
	}
	return time.Duration(*d).String()
}
func (d *durationValue) Type() string { return "duration" }
func (d *durationValue) Set(s string) error {
	v, err := parseSeconds(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

func parseSeconds(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(s, 64)
	if errors.Is(err, strconv.ErrRange) && math.IsInf(f, 0) {
		err = nil // beyond a float64 (1e400): out of range below, as 1e300 is
	}
	if err == nil && !math.IsNaN(f) {
		if f < 0 {
			return 0, fmt.Errorf("%q is negative", s)
		}
		if f > (1<<62)/float64(time.Second) {
			return 0, fmt.Errorf("%q is out of range (at most %.0f seconds)", s, (1<<62)/float64(time.Second))
		}
		if engine.SecondsBelowResolution(f) || (f == 0 && underflowed(s)) {
			return 0, belowResolution(s)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is neither seconds nor a Go duration", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	if d == 0 && strings.ContainsAny(s, "123456789") {
		return 0, belowResolution(s) // "0.5ns"
	}
	return d, nil
}

// belowResolution is parseSeconds' error for s, a duration above 0 but
// below engine.Resolution (1 ns): neither 0 (for --wait, no limit) nor
// rounded up to 1 ns, another request than the one written; the node
// refuses such a lease or wait too.
func belowResolution(s string) error {
	return fmt.Errorf("%q is above 0 but below 1 ns, the shortest duration a node keeps (0.000000001 or 1ns)", s)
}

// underflowed reports whether s, a decimal number that ParseFloat read as
// 0, has a digit other than 0 before its exponent (1e-400).
func underflowed(s string) bool {
	if strings.ContainsAny(s, "xX") {
		return false
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	return strings.ContainsAny(s, "123456789")
}

// usageError is a command-line mistake: exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// nargs is n arguments in words: "1 argument", "2 arguments".
func nargs(n int) string {
	if n == 1 {
		return "1 argument"
	}
	return strconv.Itoa(n) + " arguments"
}

// clientMain runs one client command.
func clientMain(ctx context.Context, cmd string, args []string, cio cliIO) int {
	var err error
	code := exitOK
	switch cmd {
	case "acquire":
		err = cmdAcquire(ctx, args, cio)
	case "release":
		err = cmdRelease(ctx, args, cio)
	case "renew":
		err = cmdRenew(ctx, args, cio)
	case "status":
		err = cmdStatus(ctx, args, cio)
	case "run":
		code, err = cmdRun(ctx, args, cio)
	case "cluster":
		err = cmdCluster(ctx, args, cio)
	case "events":
		err = cmdEvents(ctx, args, cio)
	default:
		err = usagef("unknown command %q", cmd)
	}
	if err == nil {
		return code
	}
	if errors.Is(err, pflag.ErrHelp) {
		return exitOK
	}
	fmt.Fprintf(cio.stderr, "baton %s: %s\n", cmd, errText(err))
	var ue *usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(cio.stderr, "Run 'baton %s --help' for usage.\n", cmd)
		return exitUsage
	case errors.Is(err, api.ErrInvalidArgument):
		// A value the node refused as invalid_argument (a --lease above
		// its lease_max, which no flag check can know): a usage error as
		// well, in the node's words, which name the field. Exit 1 would
		// say the node could not be reached, which a script may retry.
		return exitUsage
	case code != exitOK:
		return code
	case errors.Is(err, api.ErrTimeout):
		return exitTimeout
	case errors.Is(err, api.ErrGrantEnded):
		// It wraps the not_held that ended it: an acquire's error, not
		// release's or renew's "not held under that token" (exit 5).
		return exitError
	case errors.Is(err, api.ErrNotHeld), errors.Is(err, api.ErrNotHolder):
		return exitNotHolder
	}
	return exitError
}

// parse parses args, turning flag errors into usage errors.
func (f *clientFlags) parse(args []string) error {
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return &usageError{err.Error()}
	}
	if fl := f.fs.Lookup("lease"); fl != nil && fl.Changed {
		if d, ok := fl.Value.(*durationValue); ok && *d == 0 {
			// The server refuses a lease of 0; leaving the flag out is
			// how to ask for the default.
			return usagef("--lease must be more than 0 (leave it out for the default)")
		}
	}
	return nil
}

func parseToken(s string) (uint64, error) {
	t, err := strconv.ParseUint(s, 10, 64)
	if err != nil || t == 0 || t >= api.MaxToken {
		return 0, usagef("TOKEN %q is not a fencing token (an integer from 1 to 2^53-1)", s)
	}
	return t, nil
}

// checkKeyArg checks key, a command's KEY argument, against the rules
// every node applies (engine.CheckKey): a key no node would take is a
// usage error (exit 2) naming KEY, as a TOKEN that can be no fencing
// token is, before any node is asked (whose 400 exits 2 too, but names
// the parameter key, not the argument KEY).
func checkKeyArg(key string) error {
	return keyUsage("KEY", engine.CheckKey(key))
}

// checkKeyFlag checks the value of flag (--key, --prefix, --after: a key
// or a part of one, "" when left out) as checkKeyArg checks a KEY.
func checkKeyFlag(flag, s string) error {
	return keyUsage(flag, engine.CheckKeyText(flag, s))
}

// keyUsage is err, an engine check's *engine.ArgError (or nil), as a
// usage error naming what (the argument or the flag).
func keyUsage(what string, err error) error {
	var ae *engine.ArgError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return usagef("%s %s", what, ae.Reason)
	}
	return usagef("%s: %s", what, err)
}

// modeFlags are the acquire flags of issue 14: --limit, --shared, --owner.
type modeFlags struct {
	limit  holderLimit
	shared bool
	owner  string
	fs     *pflag.FlagSet
}

func newModeFlags(fs *pflag.FlagSet) *modeFlags {
	m := &modeFlags{fs: fs}
	fs.Var(&m.limit, "limit", "holders the key admits at once (above 1: a counting semaphore; 1-10000); the first acquire of a free key sets it (default: the key's limit, 1 for a free key)")
	fs.BoolVar(&m.shared, "shared", false, "hold in shared mode, never beside an exclusive holder: any number of shared holders under the default limit of 1 (a reader of a read/write lock), up to --limit above it")
	fs.Var((*ownerLabel)(&m.owner), "owner", "a label shown wherever the holder is: 1 to 128 bytes of printable UTF-8 (default host:pid; \"\" for none)")
	return m
}

// holderLimit is --limit: an integer from 1 to api.MaxLimit. The flag
// checks it, so that a bad value is a usage error naming --limit (exit 2);
// as an int flag "--limit 0" was taken as "not given" (api.WithLimit(0)
// sent no limit then; it is refused now), where the server refuses
// limit=0.
type holderLimit int

func (l *holderLimit) String() string { return strconv.Itoa(int(*l)) }
func (l *holderLimit) Type() string   { return "int" }

func (l *holderLimit) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > api.MaxLimit {
		return fmt.Errorf("%q is not an integer from 1 to %d", s, api.MaxLimit)
	}
	*l = holderLimit(n)
	return nil
}

// ownerLabel is --owner: "" (none) or what the server accepts as an
// owner (engine.CheckOwner: 1 to 128 bytes of printable UTF-8). The flag
// checks it, so that a bad label is a usage error naming --owner (exit 2),
// as a bad --limit or --lease is; the server's 400 made it exit 1.
type ownerLabel string

func (o *ownerLabel) String() string { return string(*o) }
func (o *ownerLabel) Type() string   { return "string" }

func (o *ownerLabel) Set(s string) error {
	if err := engine.CheckOwner(s); err != nil {
		var ae *engine.ArgError
		if errors.As(err, &ae) {
			return errors.New(ae.Reason)
		}
		return err
	}
	*o = ownerLabel(s)
	return nil
}

// options returns the acquire options the flags ask for.
func (m *modeFlags) options() []api.AcquireOption {
	var opts []api.AcquireOption
	if m.fs.Changed("limit") {
		opts = append(opts, api.WithLimit(int(m.limit)))
	}
	if m.shared {
		opts = append(opts, api.WithShared())
	}
	if m.fs.Changed("owner") {
		opts = append(opts, api.WithOwner(m.owner))
	}
	return opts
}

func cmdAcquire(ctx context.Context, args []string, cio cliIO) error {
	f := newClientFlags("acquire", cio)
	var lease, wait durationValue
	f.fs.Var(&lease, "lease", "lease (default: the server's lease_default)")
	f.fs.Var(&wait, "wait", "longest wait in the queue; 0 = no limit")
	f.graceFlag()
	modes := newModeFlags(f.fs)
	if err := f.parse(args); err != nil {
		return err
	}
	if f.fs.NArg() != 1 {
		return usagef("want KEY, got %s", nargs(f.fs.NArg()))
	}
	if err := checkKeyArg(f.fs.Arg(0)); err != nil {
		return err
	}
	// SIGTERM, SIGINT and SIGHUP end the wait, as in run: nothing is
	// printed, the node withdraws the waiter, and a grant that came with
	// the signal is released (one the cancelled acquire may have been
	// given without hearing of it, by the Client before Close returns).
	// Go's default action ended the process at once, and such a grant
	// stayed held for its whole lease, its token printed nowhere. A
	// signal ignored when baton started (SIGINT, SIGHUP of a background
	// job of a script) stays ignored. They are caught from before the
	// client connects until after it is closed (the deferred Stop runs
	// after the deferred Close): one that came while the client closed,
	// the token printed, ended the process with 143 (breaker report of
	// 2026-12-05: a script that took the exit for a failure left the lock
	// held), and one that came while it connected, with 143 too.
	sigs := make(chan os.Signal, 1)
	for _, s := range []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		if !signal.Ignored(s) {
			signal.Notify(sigs, s)
		}
	}
	defer signal.Stop(sigs)
	c, err := f.client(cio)
	if err != nil {
		return err
	}
	defer c.Close()
	key := f.fs.Arg(0)
	l, sig, released, err := acquireUnlessSignalled(ctx, sigs, c, key, time.Duration(lease), time.Duration(wait), cio, modes.options()...)
	if sig != nil {
		return fmt.Errorf("interrupted by %v while waiting for the lock; no token printed%s", sig, released)
	}
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(cio.stdout, l.Token); err != nil {
		// A token nobody got is a lock nobody can release or pass on:
		// released, and the exit is not 0.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if rerr := l.Release(rctx); rerr != nil {
			return fmt.Errorf("cannot write the token of %q: %w; releasing it: %s", f.fs.Arg(0), err, errText(rerr))
		}
		return fmt.Errorf("cannot write the token of %q: %w; the lock was released", f.fs.Arg(0), err)
	}
	return nil
}

// acquire takes the lock, showing on a terminal that it waits.
// acquireUnlessSignalled is acquire, ended by the first signal on sigs
// (its caller's signal.Notify) while it waits: the acquire's context is
// cancelled (the node withdraws the waiter) and sig is that signal (nil:
// none came). A grant that came with the signal is released here, within
// 10 s, and released tells how that failed ("" when it did not, or
// when nothing was granted); one the cancelled acquire may have been
// given without hearing of it is released by the Client before Close
// returns. A signal that comes after the acquire returned stays in sigs.
func acquireUnlessSignalled(ctx context.Context, sigs <-chan os.Signal, c *api.Client, key string, lease, wait time.Duration, cio cliIO, opts ...api.AcquireOption) (l *api.Lock, sig os.Signal, released string, err error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	interrupted := make(chan os.Signal, 1) // the signal that ended the wait, or nil
	go func() {
		select {
		case s := <-sigs:
			cancel()
			interrupted <- s
		case <-actx.Done():
			interrupted <- nil
		}
	}()
	l, err = acquire(actx, c, key, lease, wait, cio, opts...)
	cancel()
	if sig = <-interrupted; sig != nil && err == nil {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if rerr := l.Release(rctx); rerr != nil {
			released = fmt.Sprintf("; releasing %q: %s", key, errText(rerr))
		}
		rcancel()
	}
	return l, sig, released, err
}

func acquire(ctx context.Context, c *api.Client, key string, lease, wait time.Duration, cio cliIO, opts ...api.AcquireOption) (*api.Lock, error) {
	stop := showWaiting(key, cio)
	l, err := c.Acquire(ctx, key, append([]api.AcquireOption{api.WithLease(lease), api.WithWait(wait)}, opts...)...)
	stop()
	if errors.Is(err, api.ErrTimeout) {
		if wait == 0 {
			// No wait of its own: the node's wait_max ended it.
			return nil, &wrapped{fmt.Sprintf("%q: the node's wait_max ran out (--wait 0 waits at most that long); the lock was not granted", key), err}
		}
		return nil, &wrapped{fmt.Sprintf("%q: the wait ran out after %v; the lock was not granted", key, wait), err}
	}
	return l, err
}

// wrapped is an error with its own message that still Is its cause.
type wrapped struct {
	msg string
	err error
}

func (e *wrapped) Error() string { return e.msg }
func (e *wrapped) Unwrap() error { return e.err }

// showWaiting shows "waiting for KEY (12s)" on stderr, updated every
// second from the first second on, while stderr is a terminal; the returned
// func clears it.
func showWaiting(key string, cio cliIO) (stop func()) {
	if cio.tty == nil || !cio.tty() {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		start := time.Now()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		shown := false
		for {
			select {
			case <-done:
				if shown {
					fmt.Fprint(cio.stderr, "\r\033[K")
				}
				return
			case <-tick.C:
				shown = true
				fmt.Fprintf(cio.stderr, "\r\033[Kbaton: waiting for %q (%s)", key, time.Since(start).Round(time.Second))
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// keyToken parses the flags and the KEY TOKEN arguments of release and
// renew, and opens the client; the caller closes it.
func keyToken(f *clientFlags, args []string, cio cliIO) (c *api.Client, key string, tok uint64, err error) {
	if err := f.parse(args); err != nil {
		return nil, "", 0, err
	}
	if f.fs.NArg() != 2 {
		return nil, "", 0, usagef("want KEY TOKEN, got %s", nargs(f.fs.NArg()))
	}
	if err := checkKeyArg(f.fs.Arg(0)); err != nil {
		return nil, "", 0, err
	}
	if tok, err = parseToken(f.fs.Arg(1)); err != nil {
		return nil, "", 0, err
	}
	if c, err = f.client(cio); err != nil {
		return nil, "", 0, err
	}
	return c, f.fs.Arg(0), tok, nil
}

func cmdRelease(ctx context.Context, args []string, cio cliIO) error {
	f := newClientFlags("release", cio)
	force := f.fs.Bool("force", false, "an operator's release of every holder of KEY (no TOKEN; needs an admin token when the server has admin_tokens or auth_tokens)")
	if err := f.parse(args); err != nil {
		return err
	}
	var tok uint64
	switch {
	case *force && f.fs.NArg() != 1:
		return usagef("--force: want KEY and no TOKEN, got %s", nargs(f.fs.NArg()))
	case !*force && f.fs.NArg() != 2:
		return usagef("want KEY TOKEN, got %s", nargs(f.fs.NArg()))
	}
	if err := checkKeyArg(f.fs.Arg(0)); err != nil {
		return err
	}
	if !*force {
		var err error
		if tok, err = parseToken(f.fs.Arg(1)); err != nil {
			return err
		}
	}
	c, err := f.client(cio)
	if err != nil {
		return err
	}
	defer c.Close()
	if *force {
		return c.ForceRelease(ctx, f.fs.Arg(0))
	}
	return c.Release(ctx, f.fs.Arg(0), tok)
}

func cmdRenew(ctx context.Context, args []string, cio cliIO) error {
	f := newClientFlags("renew", cio)
	var lease durationValue
	f.fs.Var(&lease, "lease", "new lease (default: the grant's lease)")
	c, key, tok, err := keyToken(f, args, cio)
	if err != nil {
		return err
	}
	defer c.Close()
	g, err := c.Renew(ctx, key, tok, time.Duration(lease))
	if err != nil {
		return err
	}
	fmt.Fprintf(cio.stdout, "renewed %q token %d: lease %s, expires %s\n", g.Key, g.Token, secs(g.Lease), g.ExpiresAt.Local().Format(time.RFC3339Nano))
	return nil
}

func secs(s float64) string {
	return (time.Duration(s * float64(time.Second))).String()
}

func cmdStatus(ctx context.Context, args []string, cio cliIO) error {
	f := newClientFlags("status", cio)
	prefix := f.fs.String("prefix", "", "without KEY: list only keys that start with this")
	after := f.fs.String("after", "", "without KEY: list the keys after this one (the last key of the previous page)")
	limit := f.fs.Int("limit", 0, "without KEY: list at most this many (0 = the server's default, 100; at most 10000)")
	asJSON := f.fs.Bool("json", false, "print the server's JSON answer")
	if err := f.parse(args); err != nil {
		return err
	}
	if f.fs.NArg() > 1 {
		return usagef("want at most one KEY, got %s", nargs(f.fs.NArg()))
	}
	if *limit < 0 || *limit > handlers.MaxListLimit {
		// -1 was sent as no limit (the default) and 20000 went to the
		// server, exit 1: both are a bad flag.
		return usagef("--limit must be from 0 (the server's default) to %d, got %d", handlers.MaxListLimit, *limit)
	}
	if f.fs.NArg() == 1 {
		if err := checkKeyArg(f.fs.Arg(0)); err != nil {
			return err
		}
		// They select a page of the listing: for one lock they would
		// be ignored, as if obeyed.
		for _, name := range []string{"prefix", "after", "limit"} {
			if f.fs.Changed(name) {
				return usagef("--%s lists the locks: give it without KEY", name)
			}
		}
	}
	if err := checkKeyFlag("--prefix", *prefix); err != nil {
		return err
	}
	if err := checkKeyFlag("--after", *after); err != nil {
		return err
	}
	c, err := f.client(cio)
	if err != nil {
		return err
	}
	defer c.Close()
	now := time.Now()
	if f.fs.NArg() == 1 {
		st, err := c.Status(ctx, f.fs.Arg(0))
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(cio.stdout, st)
		}
		fmt.Fprintf(cio.stdout, "key:     %s\n", displayKey(st.Key))
		if st.Limit > 1 {
			fmt.Fprintf(cio.stdout, "limit:   %d\n", st.Limit)
		}
		for _, h := range st.Holders {
			fmt.Fprintf(cio.stdout, "holder:  token %d, %s, lease %s, expires in %s%s\n", h.Token, h.Mode, secs(h.Lease), h.ExpiresAt.Sub(now).Round(time.Millisecond), ownerText(h.Owner))
		}
		if len(st.Holders) == 0 {
			fmt.Fprintf(cio.stdout, "holder:  none\n")
		}
		fmt.Fprintf(cio.stdout, "waiters: %d", st.Waiters)
		if st.Waiters > 0 {
			fmt.Fprintf(cio.stdout, " (first: %s%s)", st.OldestWaiterMode, ownerText(st.OldestWaiterOwner))
		}
		fmt.Fprintln(cio.stdout)
		return nil
	}
	ll, err := c.ListPage(ctx, api.ListOptions{Prefix: *prefix, After: *after, Limit: *limit})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(cio.stdout, ll)
	}
	tw := tabwriter.NewWriter(cio.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tTOKEN\tEXPIRES IN\tWAITERS\tOWNER")
	for _, st := range ll.Locks {
		tok, exp, owner := "-", "-", "-"
		if h := st.Holder; h != nil {
			tok, exp = strconv.FormatUint(h.Token, 10), h.ExpiresAt.Sub(now).Round(time.Millisecond).String()
			if h.Owner != "" {
				owner = h.Owner
			}
			if n := len(st.Holders); n > 1 && st.Limit > 1 {
				// A semaphore: the first, and how many of its places hold.
				tok = fmt.Sprintf("%s (+%d of %d, %s)", tok, n-1, st.Limit, h.Mode)
			} else if n > 1 {
				// Readers of a read/write lock (limit 1): any number hold
				// together, so no "of 1".
				tok = fmt.Sprintf("%s (+%d, %s)", tok, n-1, h.Mode)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", displayKey(st.Key), tok, exp, st.Waiters, owner)
	}
	tw.Flush()
	if len(ll.Locks) > 0 && ll.Total > len(ll.Locks) {
		// Total counts every key with the prefix, those up to --after
		// too: whether a page follows this one, only the keys after its
		// last can say.
		last := ll.Locks[len(ll.Locks)-1].Key
		next, err := c.ListPage(ctx, api.ListOptions{Prefix: *prefix, After: last, Limit: 1})
		if err != nil {
			return err
		}
		if len(next.Locks) > 0 {
			fmt.Fprintf(cio.stdout, "(%d of %d shown; next page: --after %q)\n", len(ll.Locks), ll.Total, last)
		}
	}
	return nil
}

// displayKey is key as baton status prints it: as it is when every
// character is printable (unicode.IsPrint, or a space), it does not
// start with a double quote and it neither starts nor ends with a space,
// otherwise quoted (strconv.Quote). A key holds no control characters
// (engine.CheckKey) but may hold format characters such as U+202E
// RIGHT-TO-LEFT OVERRIDE or U+200B ZERO WIDTH SPACE, which, printed raw,
// reorder or hide what a terminal shows: one key would read as another.
// So would a space at either end, which nothing shows (" a" as "a"). A
// key that starts with a quote is quoted too, or it could spell the
// quoted form of another (`"a\u202eb"`).
func displayKey(key string) string {
	if !strings.HasPrefix(key, `"`) && !strings.HasPrefix(key, " ") && !strings.HasSuffix(key, " ") &&
		strings.IndexFunc(key, func(r rune) bool { return r != ' ' && !unicode.IsPrint(r) }) < 0 {
		return key
	}
	return strconv.Quote(key)
}

// ownerText is ", owner X" for a holder or waiter with an owner.
func ownerText(owner string) string {
	if owner == "" {
		return ""
	}
	return ", owner " + owner
}

func printJSON(w io.Writer, v any) error {
	enc := jsonw.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// cmdRun is `baton run KEY [--lease --wait --kill-after] -- COMMAND ARGS...`.
// It returns the exit code along with an error to print (if any).
func cmdRun(ctx context.Context, args []string, cio cliIO) (int, error) {
	f := newClientFlags("run", cio)
	var lease, wait durationValue
	killAfter := durationValue(10 * time.Second)
	f.fs.Var(&lease, "lease", "lease, renewed every half lease while COMMAND runs (default: the server's lease_default)")
	f.fs.Var(&wait, "wait", "longest wait in the queue; 0 = no limit")
	f.fs.Var(&killAfter, "kill-after", "when the lock is lost: SIGKILL this long after SIGTERM if COMMAND still runs")
	f.graceFlag()
	modes := newModeFlags(f.fs)
	noDash := !slices.Contains(args, "--")
	// Without --, COMMAND's own flags would be taken for baton's: they are
	// let through here, so that the message can say to add --.
	f.fs.ParseErrorsAllowlist.UnknownFlags = noDash
	if err := f.parse(args); err != nil {
		return exitUsage, err
	}
	rest := f.fs.Args()
	if noDash && len(rest) >= 2 {
		command := rest[1:]
		if i := slices.Index(args, rest[1]); i >= 0 {
			command = args[i:]
		}
		quoted := make([]string, len(command))
		for i, w := range command {
			quoted[i] = shellQuote(w)
		}
		return exitUsage, usagef("add -- before COMMAND: baton run %s [flags] -- %s", shellQuote(rest[0]), strings.Join(quoted, " "))
	}
	if len(rest) < 2 {
		return exitUsage, usagef("want KEY -- COMMAND [ARGS...]")
	}
	if dash := f.fs.ArgsLenAtDash(); dash >= 0 && dash != 1 {
		return exitUsage, usagef("want exactly one KEY before --, got %d", dash)
	}
	key, command := rest[0], rest[1:]
	if err := checkKeyArg(key); err != nil {
		return exitUsage, err
	}

	// Signals: before COMMAND runs, SIGTERM, SIGHUP, SIGINT and SIGQUIT
	// end the wait; once it runs, they are forwarded to its process group.
	// None is lost in between: the watcher below hands over the signal it
	// took, and those that come later wait in sigs until COMMAND runs.
	// They are caught from before the client connects until after it is
	// closed (as in acquire).
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT)
	defer signal.Stop(sigs)

	c, err := f.client(cio)
	if err != nil {
		return exitError, err
	}
	defer c.Close()

	l, sig, released, err := acquireUnlessSignalled(ctx, sigs, c, key, time.Duration(lease), time.Duration(wait), cio, modes.options()...)
	if sig != nil {
		// The signal came while the lock was being granted or before:
		// COMMAND never starts.
		return exitError, fmt.Errorf("interrupted by %v while waiting for the lock; COMMAND not started%s", sig, released)
	}
	if err != nil {
		if errors.Is(err, api.ErrTimeout) {
			return exitTimeout, err
		}
		return exitError, err
	}
	l.KeepAlive(context.WithoutCancel(ctx))
	release := func() error {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer rcancel()
		return l.Release(rctx)
	}

	var group commandGroup
	// From here on a SIGTSTP (Ctrl+Z) waits in sigs too, and is forwarded
	// once COMMAND runs: caught only when COMMAND starts, one that came
	// just before stopped baton alone.
	if js := group.jobSignals(); len(js) > 0 {
		signal.Notify(sigs, js...)
	}
	cmd := group.command(command, cio.stdin)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = cio.stdin, cio.stdout, cio.stderr
	env := append(cio.environ(), "BATON_KEY="+key, "BATON_TOKEN="+strconv.FormatUint(l.Token, 10))
	if len(f.addr) > 0 {
		env = append(env, api.EnvAddr+"="+strings.Join(f.addr, ","))
	}
	cmd.Env = env
	// COMMAND is started and waited for on one locked OS thread: Linux
	// sends the parent-death signal when the thread that started the child
	// ends, and Go may end idle threads.
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- group.wait()
	}()
	startErr := <-started
	running := group.started(startErr)
	if startErr != nil {
		if rerr := release(); rerr != nil {
			fmt.Fprintf(cio.stderr, "baton run: releasing %q: %s\n", key, errText(rerr))
		}
		return exitNoCommand, fmt.Errorf("cannot start COMMAND: %w", startErr)
	}
	if !running {
		// The guard could not start COMMAND (it said why) or was
		// killed first: nothing to signal; its end comes below.
		sigs = nil
	}

	var waitErr error
	var lostErr error
	var kill <-chan time.Time
loop:
	for {
		select {
		case waitErr = <-exited:
			break loop
		case <-l.Lost():
			if lostErr == nil {
				lostErr = l.Err()
				fmt.Fprintf(cio.stderr, "baton run: %s; sending SIGTERM to %s\n", lostText(lostErr), command[0])
				group.signal(syscall.SIGTERM)
				t := time.NewTimer(time.Duration(killAfter))
				defer t.Stop()
				kill = t.C
			}
		case <-kill:
			fmt.Fprintf(cio.stderr, "baton run: %s still runs %v after SIGTERM; sending SIGKILL\n", command[0], time.Duration(killAfter))
			group.signal(syscall.SIGKILL)
			kill = nil
		case s := <-sigs:
			group.signal(s.(syscall.Signal))
		}
	}
	// COMMAND ended: the terminal goes back to baton's group, and a
	// Ctrl+Z during the final release (up to 10 s when no node answers)
	// stops baton; it was caught for COMMAND's group and dropped.
	group.done()
	defer group.stopOnJobSignals()()
	signalled := lostErr != nil
	if lostErr == nil {
		lostErr = l.Err()
	}
	// Nothing of COMMAND runs on without the lock: what it left running
	// in its group (a shell's background job, one that ignored a Ctrl+C)
	// is killed before the release, as when the lock is lost. Before, a
	// normal end released the lock with them running, and the next
	// holder's COMMAND ran beside them.
	group.signal(syscall.SIGKILL)
	var rerr error
	if lostErr == nil {
		// A lost lock is not released: it is not ours any more (refused
		// as not held, or its lease ran out by our clock, which began
		// counting before the server's: the server's ends within a trip).
		// When no node answered (the active paused), a release only held
		// the exit up by its 5 s of retries.
		rerr = release()
	}
	if lostErr != nil {
		// Said once: when COMMAND was signalled, that message said it.
		if !signalled {
			fmt.Fprintf(cio.stderr, "baton run: %s as %s ended\n", lostText(lostErr), command[0])
		}
		return exitLost, nil
	}
	if rerr != nil {
		fmt.Fprintf(cio.stderr, "baton run: releasing %q: %s\n", key, errText(rerr))
	}
	code := exitOK
	if waitErr != nil {
		var ee *exec.ExitError
		if !errors.As(waitErr, &ee) {
			return exitError, waitErr
		}
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	}
	return code, nil
}

// lostText is the message of a lost lock (l.Err()), without Go's
// "context deadline exceeded" for a renewal that got no answer in time.
func lostText(err error) string {
	msg := errText(err)
	if errors.Is(err, context.DeadlineExceeded) {
		msg = strings.ReplaceAll(msg, context.DeadlineExceeded.Error(), "no node answered in time")
	}
	return msg
}

// errText is err's message without the "baton: " that each wrapped layer
// of the client library starts with: the command already says who speaks.
func errText(err error) string {
	return strings.ReplaceAll(err.Error(), "baton: ", "")
}

// shellQuote writes w as one word of a POSIX shell command line, so that a
// suggested command can be pasted: as it is when the shell would neither
// split nor expand it, else in single quotes.
func shellQuote(w string) string {
	if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}
