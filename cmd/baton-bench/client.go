package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/baton-io/baton/api"
)

// locker is what a workload drives: one lock client, used by one workload
// client (one goroutine) at a time.
type locker interface {
	// Acquire long-polls POST /locks/{key}; it returns the fencing token of
	// the grant, errTimeout on a 408, or another error.
	Acquire(ctx context.Context, key string, lease, wait float64) (uint64, error)
	// Release sends DELETE /locks/{key}?token=N and waits for its 200.
	Release(ctx context.Context, key string, token uint64) error
}

// acqMode is an acquire's mode and limit (issue 14).
type acqMode struct {
	shared bool
	limit  int // 0: none named
}

// modeLocker is a locker that can acquire in a mode (semaphore, rwmix).
type modeLocker interface {
	AcquireMode(ctx context.Context, key string, lease, wait float64, m acqMode) (uint64, error)
}

// lockerSet hands each workload client its locker (client i calls For(i)
// once, and uses the locker from one goroutine), and closes every
// connection when the run ends.
type lockerSet interface {
	For(i int) locker
	Close()
}

// errTimeout is a 408 answer to an acquire: the wait ran out, no grant.
var errTimeout = errors.New("acquire timed out (408)")

// statusError is an unexpected HTTP answer.
type statusError struct {
	op     string
	status int
	body   string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s: HTTP %d: %s", e.op, e.status, strings.TrimSpace(e.body))
}

// transportOptions tunes the plain net/http clients.
type transportOptions struct {
	proto string // "h1" or "h2c"
	// conns is the number of independent transports (so, for h2c,
	// connections) the clients are spread over, round-robin.
	conns int
	// dialSem bounds concurrent dials so that thousands of waiters
	// arriving at once do not overflow the listen backlog.
	dialSem chan struct{}
	// accept is "json" or "text".
	accept string
}

// loopbackDialer dials only 127.0.0.0/8 and bounds concurrent dials.
func loopbackDialer(sem chan struct{}) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if err := checkLoopback(addr); err != nil {
			return nil, err
		}
		if sem != nil {
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return d.DialContext(ctx, "tcp4", addr)
	}
}

// checkLoopback refuses any address that is not an IPv4 loopback address
// (127.0.0.0/8) or "localhost": the bench sends traffic nowhere else.
func checkLoopback(hostport string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("address %q: %w", hostport, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() == nil || ip.To4()[0] != 127 {
		return fmt.Errorf("address %q is not in 127.0.0.0/8: baton-bench only talks to loopback", hostport)
	}
	return nil
}

// newTransport builds one plain net/http transport for proto.
func newTransport(o transportOptions, maxIdle int) *http.Transport {
	t := &http.Transport{
		DialContext:         loopbackDialer(o.dialSem),
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: maxIdle,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	p := new(http.Protocols)
	switch o.proto {
	case "h2c":
		// HTTP/2 over cleartext TCP with prior knowledge (Go 1.24+).
		p.SetUnencryptedHTTP2(true)
		t.HTTP2 = &http.HTTP2Config{
			// Past the server's stream limit, open another connection
			// rather than queueing in the client.
			StrictMaxConcurrentRequests: false,
		}
	default:
		p.SetHTTP1(true)
	}
	t.Protocols = p
	return t
}

// plainSet is a lockerSet of plain net/http clients over o.conns
// transports.
type plainSet struct {
	clients    []*http.Client
	transports []*http.Transport
	base       string
	accept     string
}

// newPlainSet builds the plain clients of one run: clients clients against
// addr, spread over o.conns transports.
func newPlainSet(addr string, o transportOptions, clients int) *plainSet {
	n := o.conns
	if n < 1 {
		n = 1
	}
	if n > clients && clients > 0 {
		n = clients
	}
	perTransport := (clients + n - 1) / n
	s := &plainSet{base: "http://" + addr + "/locks/", accept: "application/json"}
	if o.accept == "text" {
		s.accept = "text/plain"
	}
	for i := 0; i < n; i++ {
		t := newTransport(o, perTransport+4)
		s.transports = append(s.transports, t)
		s.clients = append(s.clients, &http.Client{Transport: t, CheckRedirect: followLoopbackOnly})
	}
	return s
}

// followLoopbackOnly follows redirects (a standby's 307) only to loopback.
func followLoopbackOnly(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("too many redirects")
	}
	return checkLoopback(req.URL.Host)
}

// For returns a new locker for client i, on transport i mod n.
func (s *plainSet) For(i int) locker {
	return &plainLocker{hc: s.clients[i%len(s.clients)], base: s.base, accept: s.accept}
}

// Close closes every idle connection of every transport.
func (s *plainSet) Close() {
	for _, t := range s.transports {
		t.CloseIdleConnections()
	}
}

// plainLocker speaks the HTTP API with nothing but net/http. It belongs to
// one workload client (its calls are sequential).
type plainLocker struct {
	hc        *http.Client
	base      string // http://addr/locks/
	accept    string
	post, del cachedReq
}

// cachedReq is a request kept for reuse on the same key.
type cachedReq struct {
	key string
	req *http.Request
}

// sentKey carries an optional counter of requests written to the wire.
type sentKey struct{}

// withSentCounter returns ctx that makes the plain client count, in c, the
// requests it has finished writing (waiters workload: to know when all
// waiters are at the server).
func withSentCounter(ctx context.Context, c *atomic.Int64) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { c.Add(1) },
	})
}

// keyPath escapes a key for the URL path (keys may contain '/').
func keyPath(key string) string {
	return (&url.URL{Path: key}).EscapedPath()
}

// fmtSecs formats seconds for a query string.
func fmtSecs(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// request returns the client's request for method on key, reusing the
// previous one when only the query changes: a load generator that
// allocates and parses a fresh request per call eats the CPU the server
// needs on a small machine. A plainLocker serves one workload client, whose
// calls are sequential, and a request is touched again only after its
// response body was closed.
func (l *plainLocker) request(ctx context.Context, method, key, query string) (*http.Request, error) {
	slot := &l.post
	if method == http.MethodDelete {
		slot = &l.del
	}
	if slot.req == nil || slot.key != key || slot.req.Context() != ctx {
		req, err := http.NewRequestWithContext(ctx, method, l.base+keyPath(key), nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", l.accept)
		*slot = cachedReq{key: key, req: req}
	}
	slot.req.URL.RawQuery = query
	return slot.req, nil
}

// Acquire implements locker.
func (l *plainLocker) Acquire(ctx context.Context, key string, lease, wait float64) (uint64, error) {
	return l.acquire(ctx, key, "lease="+fmtSecs(lease)+"&wait="+fmtSecs(wait))
}

// AcquireMode implements modeLocker.
func (l *plainLocker) AcquireMode(ctx context.Context, key string, lease, wait float64, m acqMode) (uint64, error) {
	q := "lease=" + fmtSecs(lease) + "&wait=" + fmtSecs(wait)
	if m.shared {
		q += "&mode=shared"
	}
	if m.limit > 0 {
		q += "&limit=" + strconv.Itoa(m.limit)
	}
	return l.acquire(ctx, key, q)
}

func (l *plainLocker) acquire(ctx context.Context, key, query string) (uint64, error) {
	req, err := l.request(ctx, http.MethodPost, key, query)
	if err != nil {
		return 0, err
	}
	resp, err := l.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer closeBody(resp)
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusRequestTimeout:
		return 0, errTimeout
	default:
		return 0, &statusError{"acquire " + key, resp.StatusCode, readSmall(resp.Body)}
	}
	if h := resp.Header.Get(api.HeaderLockToken); h != "" {
		tok, err := strconv.ParseUint(h, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("acquire %s: bad %s header %q", key, api.HeaderLockToken, h)
		}
		return tok, nil
	}
	body := readSmall(resp.Body)
	if l.accept == "text/plain" {
		tok, err := strconv.ParseUint(strings.TrimSpace(body), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("acquire %s: bad text body %q", key, body)
		}
		return tok, nil
	}
	var g api.Grant
	if err := json.Unmarshal([]byte(body), &g); err != nil {
		return 0, fmt.Errorf("acquire %s: bad JSON body %q: %w", key, body, err)
	}
	return g.Token, nil
}

// Release implements locker.
func (l *plainLocker) Release(ctx context.Context, key string, token uint64) error {
	req, err := l.request(ctx, http.MethodDelete, key, "token="+strconv.FormatUint(token, 10))
	if err != nil {
		return err
	}
	resp, err := l.hc.Do(req)
	if err != nil {
		return err
	}
	defer closeBody(resp)
	if resp.StatusCode != http.StatusOK {
		return &statusError{"release " + key, resp.StatusCode, readSmall(resp.Body)}
	}
	return nil
}

// readSmall reads at most 4 KiB of a body as a string.
func readSmall(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 4<<10))
	return string(b)
}

// closeBody drains (bounded) and closes a response body so that the
// connection is reused.
func closeBody(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// queueLen asks GET /locks/{key} how many waiters the key has (baton and
// the floor answer it). ok is false when the target does not tell.
func queueLen(ctx context.Context, hc *http.Client, addr, key string) (n int, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/locks/"+keyPath(key), nil)
	if err != nil {
		return 0, false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, false
	}
	defer closeBody(resp)
	if resp.StatusCode != http.StatusOK {
		return 0, false
	}
	var st api.LockStatus
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&st); err != nil {
		return 0, false
	}
	return st.Waiters, true
}

// totalWaiters returns the waiters queued at the target: baton's
// baton_waiters gauge (GET /metrics), or, where there is none (the
// floor), the sum of GET /locks/{key} over the n keys named by key.
func totalWaiters(ctx context.Context, hc *http.Client, addr string, key func(i int) string, n int) (int, bool) {
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	v, err := metricValue(mctx, hc, addr, "baton_waiters")
	cancel()
	if err == nil {
		return int(v), true
	}
	sum := 0
	for i := 0; i < n; i++ {
		q, ok := queueLen(ctx, hc, addr, key(i))
		if !ok {
			return 0, false
		}
		sum += q
	}
	return sum, true
}
