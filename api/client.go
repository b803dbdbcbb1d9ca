// Package api is the official Go client of baton, the distributed lock
// service, and the home of its wire types (wire.go), which the server's
// handlers use too.
//
// A Client keeps one persistent HTTP/2 connection per node address (two when
// a single address is given), multiplexes every call over them (cleartext
// h2c for http:// addresses, HTTP/2 by ALPN for https://), and behaves as
// SPEC section 4 says: round-robin over the live connections, a broken
// connection redialled in the background every 3 s, acquires retried on the
// next connection under the same Idempotency-Key, releases retried every
// 200 ms for 5 s, 307 redirects followed to the active node, and poll
// timeouts resumed. Past the node's HTTP/2 stream limit it opens more
// connections, and acquires always leave streams free for renewals,
// releases and status calls (see pick), which therefore never wait behind
// parked acquires.
//
// With baton:// (or batons://) addresses the Client speaks the native
// protocol of SPEC section 2b instead, with the same API and behaviours,
// requests pipelined on its connections (native.go); the read calls
// (Status, List, ListPage, Cluster, Events), which that protocol lacks,
// then fail with an error that Is errors.ErrUnsupported.
//
//	c, err := api.NewClient(api.DefaultConfig())
//	...
//	defer c.Close()
//	err = c.WithLock(ctx, "orders/42", func(ctx context.Context, token uint64) error {
//		return process(ctx, token) // pass token to the protected resource
//	}, api.WithLease(30*time.Second))
package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Environment variables read by DefaultConfig.
const (
	// EnvAddr names the nodes: a comma-separated list of base URLs
	// ("http://10.0.0.1:7070,http://10.0.0.2:7070", or
	// "baton://10.0.0.1:7071,..." for the native protocol); a bare
	// host:port means http://.
	EnvAddr = "BATON_ADDR"
	// EnvAuthToken is the bearer token sent to the nodes (the server's
	// auth_tokens). It is not BATON_TOKEN, which `baton run` sets to the
	// fencing token of the lock it holds.
	EnvAuthToken = "BATON_AUTH_TOKEN"
)

// DefaultAddr is the address used when neither Config.Addresses nor
// BATON_ADDR names one.
const DefaultAddr = "http://127.0.0.1:7070"

// Defaults of the Config fields (SPEC section 4 fixes the first three).
const (
	DefaultReconnectInterval = 3 * time.Second
	DefaultReleaseRetry      = 200 * time.Millisecond
	DefaultReleaseTimeout    = 5 * time.Second
	DefaultDialTimeout       = 5 * time.Second
	DefaultPingInterval      = 2 * time.Second
	DefaultPingTimeout       = 3 * time.Second
	DefaultAcquireGrace      = 3 * time.Second
)

// maxBody bounds the answers the client reads, in bytes.
const maxBody = 4 << 20

// Config sets up a Client. The zero value of a field means its default.
type Config struct {
	// Addresses lists the nodes' base URLs, e.g. "http://10.0.0.1:7070" or
	// "https://baton.example:7070"; a bare "host:port" means http://.
	// "baton://10.0.0.1:7071" ("batons://" with TLS) names a node's
	// native_listen: the Client then speaks the native protocol (SPEC
	// section 2b) with the same API and behaviours, except that Status,
	// List, Cluster and the other read calls, which that protocol does not
	// have, fail with an error that Is errors.ErrUnsupported. All addresses
	// must be of one protocol. Default: BATON_ADDR, else DefaultAddr (a
	// BATON_ADDR that names no address, only blanks and commas, makes
	// NewClient fail naming it).
	Addresses []string
	// Token is a bearer token, sent as "Authorization: Bearer <Token>"
	// (native protocol: "AUTH <Token>" first on every connection); ""
	// sends none. DefaultConfig reads BATON_AUTH_TOKEN.
	Token string
	// TLSConfig is used for https:// and batons:// addresses; nil means
	// the system's roots. Over HTTP the client offers only "h2" by ALPN.
	TLSConfig *tls.Config
	// ConnsPerAddress is the number of connections kept to each address.
	// 0 = 2 when one address is given (one dropping does not interrupt
	// service), 1 otherwise.
	ConnsPerAddress int
	// DialTimeout bounds one connection attempt (TCP and TLS). 0 = 5 s.
	DialTimeout time.Duration
	// ReconnectInterval is the pause between attempts to redial a broken
	// connection. 0 = 3 s. A call that finds no connection up and none
	// dialling has every one that is down dialled at once (once per call).
	ReconnectInterval time.Duration
	// ReleaseRetry is the pause between release attempts. 0 = 200 ms.
	ReleaseRetry time.Duration
	// ReleaseTimeout bounds how long a release is retried. 0 = 5 s.
	ReleaseTimeout time.Duration
	// PingInterval: a connection that received nothing for this long is
	// checked with a ping (an HTTP/2 PING; over the native protocol a
	// "P <word>" line, sent once when the connection is up and then
	// after one to one and a half PingIntervals of quiet); PingTimeout later without an answer it counts as broken,
	// and the calls on it move on to the next connection. Long polls
	// are silent, and a paused node (SIGSTOP, a frozen VM) keeps its
	// connections open while its standbys promote after their
	// failover_timeout (1 s by default): so that a waiting acquire
	// goes to the new active, a silent node is noticed within
	// PingInterval + PingTimeout (HTTP; 1.5 PingInterval + PingTimeout
	// native), 5 s (6 s) by default. 0 = 2 s and 3 s. A native
	// connection to a node that does not know the ping (a version
	// before it closes the connection on the first one) is not pinged
	// again.
	PingInterval, PingTimeout time.Duration
	// AcquireGrace is how long an acquire attempt that names a wait
	// (WithWait) is given beyond that wait before its node is taken for
	// silent (paused, or cut off without a reset) and the next connection
	// is asked, for what is left of the wait. A node answers by the end
	// of the wait, but a grant made at its last moment first waits for
	// the cluster's sync_standbys, up to its sync_timeout: set
	// AcquireGrace to at least sync_timeout + 2 s (a margin for the
	// network and a loaded node), else such a grant is taken for a
	// silent node's and the acquire moves on (the grant is then
	// released). 0 = 3 s (DefaultAcquireGrace), which suits the default
	// sync_timeout of 1 s. Negative: NewClient fails.
	AcquireGrace time.Duration
	// DialContext, if set, opens the TCP connections (tests, custom
	// networks). Default: a net.Dialer.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// UserAgent is sent with every request. "" = "baton-go".
	UserAgent string
}

// DefaultConfig returns a Config with Addresses from BATON_ADDR (or
// DefaultAddr when it is unset or empty; none when it names no address,
// only blanks and commas, which NewClient refuses naming it), Token from
// BATON_AUTH_TOKEN, and every other field at its default.
func DefaultConfig() Config {
	cfg := Config{
		Addresses:         []string{DefaultAddr},
		Token:             os.Getenv(EnvAuthToken),
		DialTimeout:       DefaultDialTimeout,
		ReconnectInterval: DefaultReconnectInterval,
		ReleaseRetry:      DefaultReleaseRetry,
		ReleaseTimeout:    DefaultReleaseTimeout,
		PingInterval:      DefaultPingInterval,
		PingTimeout:       DefaultPingTimeout,
		AcquireGrace:      DefaultAcquireGrace,
	}
	if v := os.Getenv(EnvAddr); v != "" {
		// One that names no address (blanks, separators) leaves
		// Addresses empty: NewClient reports it (envAddrError).
		cfg.Addresses = SplitAddresses(v)
	}
	return cfg
}

// envAddrError is NewClient's error for a Config without Addresses when
// BATON_ADDR is set but names no address (only blanks and separators):
// a mistake to report, as the CLI does, rather than dial DefaultAddr,
// which may be another node than the one meant. nil otherwise.
func envAddrError() error {
	if v := os.Getenv(EnvAddr); v != "" && len(SplitAddresses(v)) == 0 {
		return fmt.Errorf("baton: %s=%q names no address (want http(s)://host:port or baton(s)://host:port, comma-separated; unset it for %s)", EnvAddr, v, DefaultAddr)
	}
	return nil
}

// SplitAddresses splits a comma-separated address list (the BATON_ADDR
// format), dropping blanks.
func SplitAddresses(s string) []string {
	var out []string
	for a := range strings.SplitSeq(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// parseAddress turns a configured address into a base URL: scheme http,
// https, baton or batons (the native protocol, which needs a port: there
// is no default native_listen), a host with a port (1 to 65535), no path.
func parseAddress(s string) (*url.URL, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("baton: address %q: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" && !nativeScheme(u.Scheme) {
		return nil, fmt.Errorf("baton: address %q: scheme must be http, https, baton or batons", s)
	}
	if u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return nil, fmt.Errorf("baton: address %q: want scheme://host:port", s)
	}
	if p := u.Port(); p != "" {
		// url.Parse takes any digits; a TCP port is 1 to 65535.
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return nil, fmt.Errorf("baton: address %q: port %s: want 1 to 65535", s, p)
		}
	}
	host := u.Host
	if nativeScheme(u.Scheme) && u.Port() == "" {
		return nil, fmt.Errorf("baton: address %q: a %s:// address needs a port (the node's native_listen)", s, u.Scheme)
	}
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	return &url.URL{Scheme: u.Scheme, Host: host}, nil
}

// Client talks to a baton cluster. It is safe for concurrent use; share one
// per process. Its connections are dialled in the background from
// NewClient on; Close ends them.
//
// Connection management: every connection is an *http.ClientConn made by
// http.Transport.NewClientConn (Go 1.26), so the Client, not a pool, decides
// how many connections exist: exactly ConnsPerAddress per address, each kept
// by one goroutine that dials it, waits for it to break (the ClientConn's
// state hook reports Err() != nil: peer gone, PING unanswered, GOAWAY
// finished), and redials every ReconnectInterval. Calls pick a live
// connection round-robin (preferring the active node once a 307 named it
// or it served a change: answered) and reserve one of its HTTP/2 streams;
// when every connection of the node is at its stream limit for the call,
// pick adds an extra connection
// (kept by its own goroutine, closed once idle).
type Client struct {
	cfg       Config
	tr        *http.Transport
	connsPer  int
	userAgent string
	// native: the addresses are baton:// or batons://, served by nkeep,
	// npick and the n* calls of native.go.
	native bool
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // slot keepers and lock keep-alives

	mu        sync.Mutex
	addrs     []*address
	slots     []*slot
	preferred *address
	rr        uint64
	changed   chan struct{} // closed and replaced on every slot state change
	closed    bool

	// Settlements of cancelled acquires (settleAcquire): Close waits for
	// them before it closes the connections they need. closing stops new
	// ones from starting.
	closing  bool
	settling sync.WaitGroup
	// lates counts the baton:// acquires given up by their callers (ctx
	// ended) whose answer has not come yet (lateHold): it may be a grant,
	// which only a settlement started before closing releases. Close waits
	// for them, up to ReleaseTimeout, before it sets closing: latesIdle,
	// made by Close while some are out, is closed when the last one came.
	// (Counted under mu, not in a WaitGroup: an acquire may be given up
	// while Close waits.)
	lates     int
	latesIdle chan struct{}
}

// lateOut and lateIn count an acquire given up by its caller whose answer
// is still to come (Client.lates), and its answer's coming.
func (c *Client) lateOut() {
	c.mu.Lock()
	c.lates++
	c.mu.Unlock()
}

func (c *Client) lateIn() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lates--; c.lates == 0 && c.latesIdle != nil {
		close(c.latesIdle)
		c.latesIdle = nil
	}
}

// address is one node.
type address struct {
	base  *url.URL // scheme://host:port
	slots []*slot
	// growFailed is when the dial of an extra connection last failed:
	// no other is tried for ReconnectInterval.
	growFailed time.Time
	// noPing: a native connection to the node ended because the node
	// does not know the ping op (an older version): its next ones are
	// not pinged.
	noPing bool
}

type slotState int

const (
	slotDialing slotState = iota // a dial is in progress
	slotUp
	slotDown // waiting to redial
)

// slot is one connection to one address, kept by one goroutine (keep).
type slot struct {
	addr *address
	// extra: dialled because every connection was at its stream limit
	// (pick); never redialled, closed once idle.
	extra   bool
	state   slotState
	cc      *http.ClientConn // while up (HTTP)
	nw      *nwire           // while up (native)
	broken  chan struct{}    // closed when cc breaks
	lastErr error
	redial  chan struct{} // one slot: dial now instead of after the pause
	// heard counts the reads that brought bytes on the slot's
	// connections (hearing, which dials them); silentHeard is heard when
	// a call last found the slot's connection silent (markSilent), so
	// that the node's next answer on it or on a later connection shows
	// (answersAgainLocked).
	heard       atomic.Uint64
	silentHeard uint64
}

// heardKey carries a slot's heard counter in the context of its dials,
// for hearing.
type heardKey struct{}

// hearing wraps dial so that a connection dialled under a context that
// carries a slot's heard counter (heardKey) counts on it each read that
// brings bytes: the node answered on it (any answer, a ping's, or the
// late answer of a call given up).
func hearing(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if h, ok := ctx.Value(heardKey{}).(*atomic.Uint64); ok && err == nil {
			return heardConn{conn, h}, nil
		}
		return conn, err
	}
}

// heardConn counts its reads that brought bytes on heard.
type heardConn struct {
	net.Conn
	heard *atomic.Uint64
}

func (c heardConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.heard.Add(1)
	}
	return n, err
}

// NewClient returns a Client for cfg's addresses and starts dialling them in
// the background (it does not wait for them). It fails only on an invalid
// Config.
func NewClient(cfg Config) (*Client, error) {
	if len(cfg.Addresses) == 0 {
		if err := envAddrError(); err != nil {
			return nil, err
		}
		cfg.Addresses = DefaultConfig().Addresses
	}
	setDefault(&cfg.DialTimeout, DefaultDialTimeout)
	setDefault(&cfg.ReconnectInterval, DefaultReconnectInterval)
	setDefault(&cfg.ReleaseRetry, DefaultReleaseRetry)
	setDefault(&cfg.ReleaseTimeout, DefaultReleaseTimeout)
	setDefault(&cfg.PingInterval, DefaultPingInterval)
	setDefault(&cfg.PingTimeout, DefaultPingTimeout)
	if cfg.AcquireGrace < 0 {
		return nil, fmt.Errorf("baton: AcquireGrace must be >= 0 (0: the default, %v), got %v", DefaultAcquireGrace, cfg.AcquireGrace)
	}
	setDefault(&cfg.AcquireGrace, DefaultAcquireGrace)
	if cfg.ConnsPerAddress < 0 {
		return nil, fmt.Errorf("baton: ConnsPerAddress must be >= 0, got %d", cfg.ConnsPerAddress)
	}
	for i := 0; i < len(cfg.Token); i++ {
		// The server's auth_tokens are printable ASCII without spaces;
		// anything else cannot be sent, and is not echoed (a secret).
		if c := cfg.Token[i]; c <= ' ' || c > '~' {
			return nil, fmt.Errorf("%w, got a byte 0x%02x at offset %d", ErrTokenUnsendable, c, i)
		}
	}
	var bases []*url.URL
	seen := map[string]bool{}
	for _, a := range cfg.Addresses {
		u, err := parseAddress(a)
		if err != nil {
			return nil, err
		}
		if len(bases) > 0 && nativeScheme(u.Scheme) != nativeScheme(bases[0].Scheme) {
			return nil, fmt.Errorf("baton: addresses %q and %q: all addresses must be of one protocol, http(s):// or baton(s)://", bases[0], u)
		}
		if !seen[u.String()] {
			seen[u.String()] = true
			bases = append(bases, u)
		}
	}
	per := cfg.ConnsPerAddress
	if per == 0 {
		per = 1
		if len(bases) == 1 {
			per = 2
		}
	}
	dial := cfg.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	dial = hearing(dial)
	var protos http.Protocols
	protos.SetHTTP2(true)            // https: ALPN offers h2 only
	protos.SetUnencryptedHTTP2(true) // http: h2c with prior knowledge
	var tlsCfg *tls.Config
	if cfg.TLSConfig != nil {
		tlsCfg = cfg.TLSConfig.Clone()
	}
	tr := &http.Transport{
		DialContext:         dial,
		TLSClientConfig:     tlsCfg,
		TLSHandshakeTimeout: cfg.DialTimeout,
		Protocols:           &protos,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout: cfg.PingInterval,
			PingTimeout:     cfg.PingTimeout,
		},
		// No Proxy: an HTTP proxy would break long polls and h2c.
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = "baton-go"
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		cfg:       cfg,
		tr:        tr,
		connsPer:  per,
		userAgent: ua,
		ctx:       ctx,
		cancel:    cancel,
		changed:   make(chan struct{}),
		native:    nativeScheme(bases[0].Scheme),
		dial:      dial,
	}
	c.mu.Lock()
	for _, u := range bases {
		c.addAddressLocked(u)
	}
	c.mu.Unlock()
	return c, nil
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

// addAddressLocked adds a node with connsPer slots and starts their keepers.
func (c *Client) addAddressLocked(u *url.URL) *address {
	a := &address{base: u}
	for range c.connsPer {
		s := &slot{addr: a, state: slotDialing, redial: make(chan struct{}, 1)}
		a.slots = append(a.slots, s)
		c.slots = append(c.slots, s)
		c.wg.Add(1)
		if c.native {
			go c.nkeep(s)
		} else {
			go c.keep(s)
		}
	}
	c.addrs = append(c.addrs, a)
	return a
}

// Close first waits for the settlement of acquires cancelled before it
// (over baton://, for the answer such an acquire's node still owes, up to
// ReleaseTimeout; then each settlement bounded by twice ReleaseTimeout: a
// grant such an acquire may have got is released, see Acquire), then
// closes every connection (in-flight
// calls fail with ErrClosed), stops the background goroutines (redialling
// and keep-alives; their Locks report lost) and waits for them. Locks are
// not released: their leases run out. Close is idempotent and returns nil.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.lates > 0 && c.latesIdle == nil {
		c.latesIdle = make(chan struct{})
	}
	idle := c.latesIdle
	c.mu.Unlock()
	if idle != nil {
		t := time.NewTimer(c.cfg.ReleaseTimeout)
		select {
		case <-idle:
		case <-t.C:
			// A node that knows no cancel (C) keeps the request queued:
			// its answer may not come before a grant; the connections'
			// end below hands it to its settlement.
		}
		t.Stop()
	}
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.settling.Wait()
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		c.notifyLocked()
	}
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	return nil
}

// notifyLocked wakes everything waiting for a slot state change.
func (c *Client) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// keep owns one slot's connection: dial, wait for the break, pause, redial,
// until Close. An extra slot is dialled once and ends (leaving the
// address) when its connection breaks or has been idle for a
// ReconnectInterval.
func (c *Client) keep(s *slot) {
	defer c.wg.Done()
	scheme, host := s.addr.base.Scheme, s.addr.base.Host
	pause := time.NewTimer(0)
	defer pause.Stop()
	var idle <-chan time.Time
	if s.extra {
		t := time.NewTicker(c.cfg.ReconnectInterval)
		defer t.Stop()
		idle = t.C
		defer c.removeSlot(s)
	}
	for {
		dctx, cancel := context.WithTimeout(context.WithValue(c.ctx, heardKey{}, &s.heard), c.cfg.DialTimeout)
		cc, err := c.tr.NewClientConn(dctx, scheme, host)
		if err == nil {
			if err = c.handshake(dctx, cc, s.addr.base); err != nil {
				cc.Close()
				cc = nil
			}
		}
		cancel()
		if c.ctx.Err() != nil {
			if cc != nil {
				cc.Close()
			}
			return
		}
		if err != nil && s.extra {
			c.mu.Lock()
			s.addr.growFailed = time.Now()
			c.mu.Unlock()
			return
		}
		if err == nil {
			broken := make(chan struct{})
			c.mu.Lock()
			s.state, s.cc, s.broken, s.lastErr = slotUp, cc, broken, nil
			c.notifyLocked()
			c.mu.Unlock()
			cc.SetStateHook(func(cc *http.ClientConn) {
				if cc.Err() != nil {
					c.markBroken(s, cc)
				}
			})
		wait:
			for {
				select {
				case <-broken:
					break wait
				case <-c.ctx.Done():
					break wait
				case <-idle:
					if c.retireIfIdle(s, cc) {
						break wait
					}
				}
			}
			cc.SetStateHook(nil)
			cc.Close()
			c.markBroken(s, cc)
			if c.ctx.Err() != nil || s.extra {
				return
			}
		} else {
			c.markDown(s, err)
		}
		if !c.awaitRedial(s, pause) {
			return
		}
	}
}

// handshake makes one round trip (GET /healthz, open without a token) on
// the new connection cc before it is used: once its answer is in, so are
// the node's SETTINGS, which come first. Until then the transport assumes
// 100 streams, and calls reserved beyond a lower limit would wait in the
// transport behind parked acquires. Any answer will do; an error is a
// failed dial.
func (c *Client) handshake(ctx context.Context, cc *http.ClientConn, base *url.URL) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base.String()+"/healthz", nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", c.userAgent)
	resp, err := cc.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("first round trip: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	resp.Body.Close()
	return nil
}

// markDown records that s's dial failed with err.
func (c *Client) markDown(s *slot, err error) {
	c.mu.Lock()
	s.state, s.lastErr = slotDown, err
	c.notifyLocked()
	c.mu.Unlock()
}

// awaitRedial waits ReconnectInterval (SPEC section 4: a connection that
// is down is dialled again every 3 s by default), or less when a redial is
// asked for, then marks s dialling. It reports false when the Client
// closes meanwhile. pause is the caller's timer, reused.
func (c *Client) awaitRedial(s *slot, pause *time.Timer) bool {
	pause.Reset(c.cfg.ReconnectInterval)
	select {
	case <-pause.C:
	case <-s.redial:
	case <-c.ctx.Done():
		return false
	}
	c.mu.Lock()
	s.state = slotDialing
	c.notifyLocked()
	c.mu.Unlock()
	return true
}

// retireIfIdle takes the extra connection cc of s out of service when no
// request is in flight or reserved on it. Under c.mu, as pick reserves, so
// that no call is sent on a connection being closed.
func (c *Client) retireIfIdle(s *slot, cc *http.ClientConn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.cc != cc || s.state != slotUp || cc.InFlight() > 0 {
		return false
	}
	s.state, s.cc = slotDown, nil
	s.lastErr = errors.New("idle extra connection closed")
	close(s.broken)
	c.notifyLocked()
	return true
}

// removeSlot takes the extra slot s off its address and the Client.
func (c *Client) removeSlot(s *slot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.state = slotDown
	s.addr.slots = slices.DeleteFunc(s.addr.slots, func(x *slot) bool { return x == s })
	c.slots = slices.DeleteFunc(c.slots, func(x *slot) bool { return x == s })
	c.notifyLocked()
}

// markBroken takes cc out of service if it is still s's connection. It may
// run inside cc's state hook, so it only takes c.mu briefly and never calls
// into cc.
func (c *Client) markBroken(s *slot, cc *http.ClientConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.cc != cc || s.state != slotUp {
		return
	}
	s.state, s.cc = slotDown, nil
	s.lastErr = cc.Err()
	if s.lastErr == nil {
		s.lastErr = errors.New("connection closed")
	}
	close(s.broken)
	c.notifyLocked()
}

// Stream capacity. A node limits the HTTP/2 streams of one connection
// (MaxConcurrentStreams, 1000 for baton), and parked acquires hold theirs
// for as long as they wait: so that a renewal or a release never waits
// behind them, an acquire takes a stream only where shortStreams (at most
// a quarter of the limit) stay free for the short calls, and when every
// connection is that full, pick dials an extra connection to the node
// (up to maxExtra per address), closed again once idle.
const (
	shortStreams = 16
	maxExtra     = 64
)

// pick returns a live connection, round-robin, with one of its HTTP/2
// streams reserved for the caller (the RoundTrip that follows uses it):
// among the preferred (active) address's connections if it has one up,
// else among all; avoid (the connection that just failed) only when there
// is no other. A long call (an acquire) takes a stream only from a
// connection that keeps shortStreams free; when none has room, an extra
// connection is dialled and waited for, and past maxExtra the call queues
// for a stream of a full connection (the transport holds it until one
// ends). While no connection is up but one is being dialled it waits for
// that dial; with none up and none dialling it has those that are down
// dialled at once, and fails with ErrUnavailable when they fail too
// (noConnLocked).
func (c *Client) pick(ctx context.Context, avoid *slot, long bool) (*slot, *http.ClientConn, error) {
	return c.pickAt(ctx, nil, avoid, long)
}

// pickAt is pick with want (nil: none) in place of the preferred address:
// the node a call must ask first (the one that granted what a settle
// releases).
func (c *Client) pickAt(ctx context.Context, want *address, avoid *slot, long bool) (*slot, *http.ClientConn, error) {
	redialed := false
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, nil, ErrClosed
		}
		if cands := c.candidatesLocked(avoid, want); len(cands) > 0 {
			n := uint64(len(cands))
			start := c.rr
			c.rr++
			var buf [8]picked
			order := buf[:0]
			for i := range n {
				s := cands[(start+i)%n]
				order = append(order, picked{s, s.cc})
			}
			c.mu.Unlock()
			// Reserve runs cc's state hook, which may take c.mu
			// (markBroken): never under c.mu.
			for _, p := range order {
				if p.cc != nil && room(p.cc, long) && p.cc.Reserve() == nil {
					if c.stillUp(p) {
						return p.s, p.cc, nil
					}
					p.cc.Release() // retired meanwhile (retireIfIdle)
				}
			}
			c.mu.Lock()
			chosen := order[0].s
			if c.closed || chosen.state != slotUp || chosen.cc == nil {
				c.mu.Unlock()
				continue
			}
			if !c.growLocked(chosen.addr) {
				// No more connections: queue for a stream of this one.
				cc := chosen.cc
				c.mu.Unlock()
				return chosen, cc, nil
			}
		}
		ch, err := c.noConnLocked(&redialed)
		c.mu.Unlock()
		if err != nil {
			return nil, nil, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// picked is a connection pick tries, with the slot it was s's connection
// of when it was read under c.mu.
type picked struct {
	s  *slot
	cc *http.ClientConn
}

// stillUp reports whether p.cc is still p.s's connection in service: a
// stream reserved on it outside c.mu counts in its InFlight from then on,
// so retireIfIdle, which checks that under c.mu, leaves it alone.
func (c *Client) stillUp(p picked) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return p.s.cc == p.cc && p.s.state == slotUp
}

// candidatesLocked returns the live connections a call may use: the
// preferred (active) address's if it has one up, else all; none while the
// preferred address has none up but one dialling (just learned from a 307
// or an M: wait for its first dial rather than ask the redirecting node
// again); avoid (the connection that just failed) only when there is no
// other. When avoid is the preferred address's, that node is what failed
// (a silent active leaves every connection to it open): the call goes to
// the other addresses, whose 307 names the active again, or the new one.
// want, if not nil, stands in for the preferred address (pickAt).
func (c *Client) candidatesLocked(avoid *slot, want *address) []*slot {
	var cands []*slot
	waitPreferred := false
	p, wait := c.preferred, true
	if want != nil {
		// Asked first when up, never waited for: it may be a node that
		// is gone (a failover) while the active is up.
		p, wait = want, false
	}
	if p != nil && (avoid == nil || avoid.addr != p) {
		cands = upSlots(p.slots)
		waitPreferred = wait && len(cands) == 0 && anyDialing(p.slots)
	}
	if len(cands) == 0 && !waitPreferred {
		cands = upSlots(c.slots)
		if avoid != nil && avoid.addr == c.preferred {
			if others := slices.DeleteFunc(slices.Clone(cands), func(s *slot) bool { return s.addr == avoid.addr }); len(others) > 0 {
				cands = others
			}
		}
	}
	if len(cands) > 1 && avoid != nil {
		for i, s := range cands {
			if s == avoid {
				cands = append(cands[:i:i], cands[i+1:]...)
				break
			}
		}
	}
	return cands
}

// noConnLocked is what a call does when candidatesLocked has none: wait
// for the returned channel (the next slot state change) while a dial is in
// progress; else, the first time for this call (*redialed false), ask
// every connection that is down to dial now, and wait for those dials;
// else fail with ErrUnavailable and the last connection error, which is
// then that of a dial made for this call; but when a node refused the
// client's token (a native connection's AUTH), with that refusal, a
// *StatusError that Is ErrUnauthorized only, as the 401 of the HTTP path
// is: waiting or retrying would not change it. A connection that is down
// otherwise waits up to ReconnectInterval for its next dial: a call made
// meanwhile failed with the error of the connection's end (the nodes
// killed), though the nodes were back and answering.
func (c *Client) noConnLocked(redialed *bool) (<-chan struct{}, error) {
	if anyDialing(c.slots) {
		return c.changed, nil
	}
	if !*redialed {
		*redialed = true
		asked := false
		for _, s := range c.slots {
			if s.state == slotDown && !s.extra && refusal(s.lastErr) == nil {
				select {
				case s.redial <- struct{}{}:
				default:
				}
				asked = true
			}
		}
		if asked {
			return c.changed, nil
		}
	}
	var lastErr error
	for _, s := range c.slots {
		if se := refusal(s.lastErr); se != nil {
			return nil, se
		}
		if s.lastErr != nil {
			lastErr = s.lastErr
		}
	}
	if lastErr == nil {
		return nil, fmt.Errorf("%w: no connection", ErrUnavailable)
	}
	return nil, fmt.Errorf("%w: no connection: %w", ErrUnavailable, lastErr)
}

// room reports whether cc has a stream for a call: any free stream for a
// short one; for a long one (an acquire), one beyond those kept for the
// short calls.
func room(cc *http.ClientConn, long bool) bool {
	free := cc.Available()
	if !long {
		return free > 0
	}
	limit := free + cc.InFlight()
	return free > min(shortStreams, limit/4)
}

// growLocked makes sure an extra connection to a is being dialled, and
// reports whether one is (false: the address has maxExtra already, or the
// last extra dial failed less than a ReconnectInterval ago).
func (c *Client) growLocked(a *address) bool {
	extras := 0
	for _, s := range a.slots {
		if s.extra {
			if s.state == slotDialing {
				return true
			}
			extras++
		}
	}
	if extras >= maxExtra || time.Since(a.growFailed) < c.cfg.ReconnectInterval {
		return false
	}
	s := &slot{addr: a, extra: true, state: slotDialing, redial: make(chan struct{}, 1)}
	a.slots = append(a.slots, s)
	c.slots = append(c.slots, s)
	c.wg.Add(1)
	go c.keep(s)
	c.notifyLocked()
	return true
}

func anyDialing(ss []*slot) bool {
	for _, s := range ss {
		if s.state == slotDialing {
			return true
		}
	}
	return false
}

func upSlots(ss []*slot) []*slot {
	var out []*slot
	for _, s := range ss {
		if s.state == slotUp {
			out = append(out, s)
		}
	}
	return out
}

// numConns is the number of connection slots (up or not).
func (c *Client) numConns() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.slots)
}

// prefer makes the node at base (from a 307's Location) the one calls go to,
// adding it if it is not known yet.
func (c *Client) prefer(loc *url.URL) error {
	base, err := parseAddress(loc.Scheme + "://" + loc.Host)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	for _, a := range c.addrs {
		if a.base.String() == base.String() {
			c.preferred = a
			if len(upSlots(a.slots)) == 0 {
				// A node just named this one the active: worth a dial now,
				// not after the reconnect pause. Meanwhile pick waits for
				// that dial instead of asking the standbys again.
				for _, s := range a.slots {
					if s.state == slotDown {
						s.state = slotDialing
						select {
						case s.redial <- struct{}{}:
						default:
						}
					}
				}
				c.notifyLocked()
			}
			return nil
		}
	}
	const maxAddrs = 64
	if len(c.addrs) >= maxAddrs {
		return fmt.Errorf("%w: redirected to %s, but already %d nodes are known", ErrUnavailable, base, maxAddrs)
	}
	c.preferred = c.addAddressLocked(base)
	c.notifyLocked()
	return nil
}

// answered makes the node of s the preferred address (the one calls ask
// first), as a redirect naming it does: it has just served a change (a
// grant, a release, a renewal, a forced release), which only the active
// node does. Without it, after an acquire that moved on from a silent
// active (paused) to the promoted standby and was granted there, the
// calls that followed still went to the silent node first (a release
// lost releaseAttempt there, an acquire its wait + AcquireGrace). Reads
// are not counted: a standby serves them. Same rule over HTTP (a 2xx)
// and baton:// (an O answer).
func (c *Client) answered(s *slot) {
	c.mu.Lock()
	if !c.closed {
		c.preferred = s.addr
	}
	c.mu.Unlock()
}

// stillSilent is the one rule, over HTTP and baton://, for a connection an
// attempt passes over (avoid) once a 307 or an M arrived (prefer has taken
// the node it names): it stays passed over only when it is silent (the
// connection that left an earlier attempt of the caller unanswered: a
// paused node) and the redirect named its node again (a standby that has
// not yet seen the failover), or the next attempt would wait on the
// silent node again. Any other redirect lifts it: the node named is the
// one to ask, also when this call's connection to it broke (it is
// dialled again).
//
// Once the node answered on the slot after the call found it silent
// (markSilent: the cut between client and node healed, the node resumed;
// on the same connection or a later one), it is not silent any more, and
// a redirect naming it lifts avoid too. Kept passed over, an acquire whose
// connection to an active cut off from the client (no failover: the
// standbys still reach it and name it) went round the standbys'
// redirects after the cut healed until failoverPatience and failed
// unavailable, and a keep-alive's renewals did until the lease ran out.
func (c *Client) stillSilent(avoid, silent *slot) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return avoid != nil && avoid == silent && c.preferred == avoid.addr && !answersAgainLocked(avoid)
}

// markSilent records that a call found the connection s has now silent
// (no answer within its bound, or its ping unanswered): stillSilent
// keeps s passed over until the node answers on s again.
func (c *Client) markSilent(s *slot) {
	c.mu.Lock()
	s.silentHeard = s.heard.Load()
	c.mu.Unlock()
}

// answersAgainLocked reports whether s is up and its node answered on it
// (any bytes read, on the connection found silent or on a later one)
// since markSilent. A paused node accepts TCP connections (its kernel
// does) but sends nothing on any.
func answersAgainLocked(s *slot) bool {
	return s.state == slotUp && s.heard.Load() != s.silentHeard
}

// response is an answer read in full.
type response struct {
	status int
	header http.Header
	body   []byte
	// cut: the answer was longer than maxBody, and body is its first
	// maxBody bytes.
	cut bool
}

// errConn marks a failure of the connection (or of the transfer on it), as
// opposed to an answer from the server. stream: the connection stayed up,
// only the call's stream was reset (a node or proxy past its stream limit
// refuses a stream with REFUSED_STREAM while the client cannot know the
// limit yet: the call was not processed).
type errConn struct {
	err    error
	stream bool
}

// Stream resets. A call whose stream alone was reset is repeated, at most
// maxStreamRetries times, after a pause that grows by streamRetryPause;
// these repeats do not count as connection attempts.
const (
	maxStreamRetries = 10
	streamRetryPause = 10 * time.Millisecond
)

// streamRetry reports whether the call that failed with ce may be
// repeated as a stream reset (the retries so far in *n), after the pause;
// an error when ctx ended during the pause.
func streamRetry(ctx context.Context, ce *errConn, n *int) (bool, error) {
	if !ce.stream || *n >= maxStreamRetries {
		return false, nil
	}
	*n++
	return true, sleep(ctx, time.Duration(*n)*streamRetryPause)
}

func (e *errConn) Error() string { return e.err.Error() }
func (e *errConn) Unwrap() error { return e.err }

// send makes one request on the connection cc of slot s. pathQuery is the
// path and query ("/locks/a?token=1"). Transport failures come back as
// *errConn (and mark s broken if cc is), ctx errors as ctx.Err(). When the
// status and headers arrived but the body did not, the error comes with a
// response that has them (and the part of the body read): an acquire that
// is cancelled while its grant is read learns the token from Lock-Token.
func (c *Client) send(ctx context.Context, s *slot, cc *http.ClientConn, method, pathQuery string, hdr http.Header) (*response, error) {
	u := *s.addr.base
	ref, err := url.Parse(pathQuery)
	if err != nil {
		cc.Release() // the stream pick reserved
		return nil, err
	}
	u.Path, u.RawPath, u.RawQuery = ref.Path, ref.RawPath, ref.RawQuery
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		cc.Release()
		return nil, err
	}
	h := req.Header
	for k, v := range hdr {
		h[k] = v
	}
	h.Set("Accept", "application/json")
	h.Set("User-Agent", c.userAgent)
	if c.cfg.Token != "" {
		h.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	var partial *response
	resp, err := cc.RoundTrip(req)
	if err == nil {
		var body []byte
		body, err = io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
		resp.Body.Close()
		cut := len(body) > maxBody
		if cut {
			body = body[:maxBody]
		}
		if err == nil {
			return &response{status: resp.StatusCode, header: resp.Header, body: body, cut: cut}, nil
		}
		partial = &response{status: resp.StatusCode, header: resp.Header, body: body}
	}
	if ctx.Err() != nil {
		return partial, ctx.Err()
	}
	if cc.Err() != nil {
		c.markBroken(s, cc)
	}
	if c.ctx.Err() != nil {
		return partial, ErrClosed
	}
	return partial, &errConn{err: err, stream: cc.Err() == nil}
}

// statusError builds the *StatusError of an answer.
func statusError(r *response) error {
	se := &StatusError{StatusCode: r.status}
	var e Error
	if json.Unmarshal(r.body, &e) == nil {
		se.Code, se.Message, se.Field = e.Code, e.Message, e.Field
	}
	if se.Message == "" {
		se.Message = strings.TrimSpace(string(bytes.ToValidUTF8(r.body[:min(len(r.body), 200)], nil)))
	}
	return se
}

// redirect resolves a 307's Location against the request and makes its node
// the preferred one; it returns the path and query to repeat.
func (c *Client) redirect(s *slot, pathQuery string, r *response) (string, error) {
	loc := r.header.Get("Location")
	if loc == "" {
		return "", fmt.Errorf("baton: 307 without Location from %s", s.addr.base)
	}
	reqURL, _ := s.addr.base.Parse(pathQuery)
	to, err := reqURL.Parse(loc)
	if err != nil {
		return "", fmt.Errorf("baton: 307 with bad Location %q: %w", loc, err)
	}
	if err := c.prefer(to); err != nil {
		return "", err
	}
	return to.RequestURI(), nil
}

// maxRedirects bounds the 307s (native M answers) one call follows in a
// row: an answer that is not a redirect (503, a poll timeout, unavailable)
// starts the count again, so that an acquire or a release retried through
// a failover, each attempt of which may be redirected once, is not failed
// for redirects that were no loop.
const maxRedirects = 10

// redirectPause is how long an acquire waits before it follows redirects
// again after maxRedirects of them in a row: during a failover a standby
// still names the dead active until it has seen the promotion (about
// failover_timeout), so running out of redirects then is a failover in
// progress, retried like a 503 for failoverPatience, not a final error.
// (A release retries then as after any failed attempt: after ReleaseRetry,
// within ReleaseTimeout.)
const redirectPause = 100 * time.Millisecond

// failoverPatience is how long an acquire goes on asking while the nodes
// answer that no active node is known (503 unavailable over HTTP, E
// unavailable over the native protocol): a failover takes
// failover_timeout (1 s by default) and a promotion, and a node shutting
// down or resuming from a pause says the same for a moment. Those answers
// do not use up the attempts a broken connection counts (SPEC section 4:
// as many as there are connections); this bound, or ctx, ends them.
var failoverPatience = 10 * time.Second // a variable for tests

// unavailableFor tracks an acquire's run of unavailable answers: the time
// of the first (zero before one) and whether the run is still within
// failoverPatience.
func unavailableFor(first *time.Time) bool {
	if first.IsZero() {
		*first = time.Now()
		return true
	}
	return time.Since(*first) < failoverPatience
}

// reconnectPause is how long an acquire that found no connection up
// (every dial failed: its node restarting, a dead active before the
// failover) waits before it dials again (keepAsking).
const reconnectPause = 200 * time.Millisecond

// keepAsking reports whether an acquire that started at start with wait
// (0: none) and could not get a connection (err, from pick) asks again
// after reconnectPause: err Is ErrUnavailable (every dial failed; not a
// refusal of the client's token, not ErrClosed), ctx is live, the wait has
// not run out, and the run of unavailable answers and failed dials (*first,
// unavailableFor) is within failoverPatience, as for 503s. The node may
// keep the waiter's place under its Idempotency-Key across a restart
// (SPEC section 4), and a failover's new active does for 5 s.
func keepAsking(ctx context.Context, err error, wait time.Duration, start time.Time, first *time.Time) bool {
	if ctx.Err() != nil || !errors.Is(err, ErrUnavailable) || refusal(err) != nil {
		return false
	}
	return patient(wait, start, first)
}

// patient reports whether an acquire that started at start with wait (0:
// none) asks again after an unavailable answer, a run of redirects to a
// node that does not answer, or dials that all failed: while its wait
// has not run out and the run (*first, unavailableFor) is within
// failoverPatience.
func patient(wait time.Duration, start time.Time, first *time.Time) bool {
	if wait > 0 && time.Since(start) >= wait {
		return false
	}
	return unavailableFor(first)
}

// servedPause is how long an acquire attempt must have been in flight to
// count as served: a node that cannot serve it answers at once (503, E
// unavailable), and a node that parks it or holds it to a poll_timeout
// is serving.
const servedPause = time.Second

// served restarts an acquire's failover patience (unavailableFor's first)
// when its attempt sent at sent was in flight for servedPause or more: a
// node served it since, and a later failover gets its own
// failoverPatience rather than what is left of an earlier one's.
func served(first *time.Time, sent time.Time) {
	if time.Since(sent) >= servedPause {
		*first = time.Time{}
	}
}

// call makes a request that is safe to repeat (everything but an acquire,
// which has its own loop, and the repeat of an acquire under its
// Idempotency-Key in hdr; a forced release is, under its own key in hdr):
// on a connection failure it moves on to the next connection, failing after as many attempts as there are connections; a
// reset of its stream alone is repeated (streamRetry); 307s are followed. It returns the first answer that is not a redirect.
func (c *Client) call(ctx context.Context, method, pathQuery string, hdr http.Header) (*response, error) {
	r, _, err := c.callAvoiding(ctx, method, pathQuery, hdr, nil)
	return r, err
}

// callAvoiding is call whose first attempt passes over the connection
// avoid (nil: none), as pick does after a failure: the connection a
// caller's earlier call left unanswered (a silent node: paused, or cut
// off without a reset). A 307 naming another node than avoid's lifts it;
// one naming avoid's node (a standby that has not yet seen the failover)
// does not, or the next attempt would wait on the silent node again. A
// connection that fails within the call is passed over until the next
// 307, whichever node that names. It
// also returns the connection of its last attempt (nil
// when none was sent), for the caller's next call to avoid.
func (c *Client) callAvoiding(ctx context.Context, method, pathQuery string, hdr http.Header, avoid *slot) (*response, *slot, error) {
	return c.callAt(ctx, method, pathQuery, hdr, avoid, nil)
}

// callAt is callAvoiding whose first attempt asks want (nil: the
// preferred address) first (pickAt).
func (c *Client) callAt(ctx context.Context, method, pathQuery string, hdr http.Header, avoid *slot, want *address) (*response, *slot, error) {
	if c.native {
		return nil, nil, httpOnly(method + " " + pathQuery)
	}
	attempts, redirects, resets := 0, 0, 0
	max := c.numConns()
	given := avoid
	var last *slot
	for {
		s, cc, err := c.pickAt(ctx, want, avoid, false)
		want = nil
		if err != nil {
			return nil, last, err
		}
		last = s
		r, err := c.send(ctx, s, cc, method, pathQuery, hdr)
		if err != nil {
			var ce *errConn
			if !errors.As(err, &ce) {
				return nil, s, err
			}
			if again, serr := streamRetry(ctx, ce, &resets); serr != nil {
				return nil, s, serr
			} else if again {
				avoid = nil
				continue
			}
			attempts++
			if attempts >= max {
				return nil, s, fmt.Errorf("%w: %s %s: %d attempts failed, last: %w", ErrUnavailable, method, pathQuery, attempts, err)
			}
			avoid, given = s, nil
			continue
		}
		if r.status == http.StatusTemporaryRedirect {
			if redirects++; redirects > maxRedirects {
				return nil, s, fmt.Errorf("baton: %s %s: more than %d redirects", method, pathQuery, maxRedirects)
			}
			if pathQuery, err = c.redirect(s, pathQuery, r); err != nil {
				return nil, s, err
			}
			if avoid != nil && !c.stillSilent(avoid, given) {
				avoid, given = nil, nil
			}
			continue
		}
		if method != http.MethodGet && r.status/100 == 2 {
			c.answered(s)
		}
		return r, s, nil
	}
}

// getJSON GETs pathQuery and decodes a 200 answer into v.
func (c *Client) getJSON(ctx context.Context, pathQuery string, v any) error {
	r, err := c.call(ctx, http.MethodGet, pathQuery, nil)
	if err != nil {
		return err
	}
	if r.status != http.StatusOK {
		return statusError(r)
	}
	if r.cut {
		// Decoded, the cut answer failed "unexpected end of JSON
		// input", which named neither the cause nor the way out.
		msg := fmt.Sprintf("baton: GET %s: the answer is larger than %d MiB, the most the client reads", pathQuery, maxBody>>20)
		if path, _, _ := strings.Cut(pathQuery, "?"); path == "/locks" {
			msg += ": ask for fewer keys at once (a smaller limit, then the next page after the last key)"
		}
		return errors.New(msg)
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		return fmt.Errorf("baton: GET %s: bad answer: %w", pathQuery, err)
	}
	return nil
}

// lockPath is the path of key: /locks/ + key, each byte escaped as a path
// needs ('/' stays: "orders/42" is /locks/orders/42), except in a key
// with a dot segment ("a/../b", "./c", ".."), whose slashes are escaped
// too (%2F), as baton.js does: proxies and HTTP stacks normalize a path's
// dot segments, which would name another lock (or none).
func lockPath(key string, q url.Values) string {
	u := url.URL{Path: "/locks/" + key, RawQuery: q.Encode()}
	if hasDotSegment(key) {
		u.RawPath = "/locks/" + strings.ReplaceAll(url.PathEscape(key), ".", "%2E")
	}
	return u.RequestURI()
}

// hasDotSegment reports whether key, as a path, has a "." or ".." segment.
func hasDotSegment(key string) bool {
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// seconds formats d as the API's decimal seconds.
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// Status returns the state of the lock key: its holder (nil when free) and
// the number of waiters. It blocks for one round trip (moving on to the
// next connection if one fails). Errors: *StatusError (ErrInvalidArgument
// for a bad key), ErrUnavailable, ErrClosed, ctx's error; over the native
// protocol (baton:// addresses), which has no read op, always an error
// that Is errors.ErrUnsupported (use a Client with the node's http://
// address).
func (c *Client) Status(ctx context.Context, key string) (*LockStatus, error) {
	var st LockStatus
	if err := c.getJSON(ctx, lockPath(key, nil), &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// List returns the locks whose keys start with prefix ("" = all), sorted by
// key, at most limit of them (0 = the server's default), and the total count
// of matching keys. Errors as ListPage.
func (c *Client) List(ctx context.Context, prefix string, limit int) (*LockList, error) {
	return c.ListPage(ctx, ListOptions{Prefix: prefix, Limit: limit})
}

// Cluster returns one node's view of the cluster (GET /cluster): itself,
// its role, the active node, the peers and the last token. It asks the node
// the next connection leads to, which is the active one once a redirect
// named it. Errors as Status.
func (c *Client) Cluster(ctx context.Context) (*ClusterView, error) {
	var v ClusterView
	if err := c.getJSON(ctx, "/cluster", &v); err != nil {
		return nil, err
	}
	return &v, nil
}
