package api

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// AcquireOption sets a parameter of Acquire or WithLock.
type AcquireOption func(*acquireOpts)

type acquireOpts struct {
	lease, wait time.Duration
	owner       *string // nil: DefaultOwner
	mode        string
	limit       int
	limitSet    bool // WithLimit was given (limit 0 included)
}

// WithOwner labels the holder (and the waiter) for people: 1 to
// MaxOwnerBytes bytes of printable UTF-8, shown in GET /locks, /events,
// the status page and `baton status`; never an identity check. Without
// it Acquire sends DefaultOwner(); WithOwner("") sends none.
func WithOwner(owner string) AcquireOption {
	return func(o *acquireOpts) { o.owner = &owner }
}

// WithMode sets the mode, ModeExclusive (the default) or ModeShared.
// Shared and exclusive holders never hold together; under the default
// limit of 1 an exclusive holder holds alone and any number of shared
// holders hold together (a read/write lock); with WithLimit(n), n > 1, up
// to n hold at once in either mode (a semaphore). Anything else is refused
// by the server (ErrInvalidArgument).
func WithMode(mode string) AcquireOption {
	return func(o *acquireOpts) { o.mode = mode }
}

// WithShared is WithMode(ModeShared): a reader of a read/write lock.
func WithShared() AcquireOption { return WithMode(ModeShared) }

// WithLimit sets the number of holders the key admits at once (1 to
// MaxLimit): above 1 the key is a counting semaphore, in the default mode
// as in the shared one. The first acquire of a free key sets it; another
// limit while the key exists is refused with ErrLimitMismatch. Without it
// the key's limit applies (1 for a free key). A limit outside 1 to
// MaxLimit, 0 included, fails Acquire with ErrInvalidArgument.
func WithLimit(n int) AcquireOption {
	return func(o *acquireOpts) { o.limit, o.limitSet = n, true }
}

// DefaultOwner is the owner Acquire sends without WithOwner: the host
// name and the process ID, "host:pid" (cut to MaxOwnerBytes bytes).
func DefaultOwner() string { return defaultOwner() }

var defaultOwner = sync.OnceValue(func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	owner := host + ":" + strconv.Itoa(os.Getpid())
	for len(owner) > MaxOwnerBytes || !utf8.ValidString(owner) {
		owner = strings.ToValidUTF8(owner[:min(len(owner), MaxOwnerBytes)], "")
	}
	return owner
})

// WithLease sets the lease: how long the grant lasts without a renewal
// (rounded to the server's resolution; > 0). Without it the server's
// lease_default applies (30 s unless configured).
func WithLease(d time.Duration) AcquireOption {
	return func(o *acquireOpts) { o.lease = d }
}

// WithWait bounds the time in the queue: when it runs out Acquire returns
// ErrTimeout and the lock is not granted. 0 (the default) waits without
// limit, up to the server's wait_max; ctx bounds the wait in any case.
func WithWait(d time.Duration) AcquireOption {
	return func(o *acquireOpts) { o.wait = d }
}

// Lock is a lock held by this client: a grant of the server. Key, Token,
// Lease, ExpiresAt and Node describe the grant as made and never change;
// Expiry gives the expiry after the latest renewal.
//
// What the holder may assume: while Lost is open and Expiry is in the
// future, no other client was granted the lock by the active node, unless
// a failover lost the grant (SPEC section 3). Pass Token to every protected
// resource: one that refuses tokens lower than the highest it has seen
// stays safe even then.
type Lock struct {
	// Key names the lock.
	Key string
	// Token is the fencing token of the grant.
	Token uint64
	// Lease is the lease of the grant.
	Lease time.Duration
	// ExpiresAt is when the grant expires unless renewed, by the server's
	// clock.
	ExpiresAt time.Time
	// Node is the base URL of the node that granted the lock.
	Node string

	c *Client

	mu       sync.Mutex
	lease    time.Duration // current lease (after renewals)
	expiry   time.Time     // server's expiry after the latest renewal
	deadline time.Time     // local, conservative: when the lease surely ran out
	// asleep is suspended() when deadline was set (leftLocked), read
	// from KeepAlive on only: two system calls, kept off the path of an
	// acquire (a suspend between the grant and KeepAlive is not counted).
	asleep time.Duration
	// from is the node that granted the lock or renewed it last:
	// Release asks it first (Client.release).
	from     *address
	released bool
	lost     chan struct{}
	lostErr  error
	kaStop   context.CancelFunc // stops the keep-alive
	kaDone   chan struct{}      // closed when the keep-alive ended
	// kaWake (cap 1, made by KeepAlive) wakes the keep-alive's sleep
	// after a renewal: a shorter lease is renewed at half of it, not on
	// the schedule of the lease renewed before (Renew with 2 s under a
	// keep-alive of 30 s lost the lock at 2 s).
	kaWake chan struct{}
}

// newKey returns a fresh Idempotency-Key: this process's random prefix
// (128 bits from crypto/rand, drawn once) and a sequence number, as
// unique as a random key each and cheaper (no random read per acquire);
// 28 to 39 printable ASCII characters.
func newKey() string {
	var b [48]byte
	k := append(append(b[:0], keyPrefix()...), '-')
	return string(strconv.AppendUint(k, keySeq.Add(1), 36))
}

var (
	keyPrefix = sync.OnceValue(rand.Text)
	keySeq    atomic.Uint64
)

// Acquire takes the lock key, blocking in the key's FIFO queue until it is
// granted, the wait (WithWait) runs out, or ctx ends. The lease (WithLease)
// starts at the grant; keep it with Renew or KeepAlive, end it with Release.
//
// Every Acquire carries a fresh Idempotency-Key, kept across its retries: a
// connection that breaks during the wait makes it repeat on the next
// connection (where it gets the grant made meanwhile, or takes over its
// own place in the queue while the node still holds it: a promoted
// standby keeps a replicated waiter's place for 5 s, a node that saw the
// connection close has dropped the waiter, and the repeat queues anew at
// the tail), failing only after as many attempts as the client
// has connections; a reset of its stream alone (REFUSED_STREAM from a node
// or proxy past its stream limit) is repeated too, up to 10 times; a 307 is
// followed to the active node; a poll_timeout is resumed, and so is a
// 409 superseded (an attempt of its own that it cut off took its place
// over), up to 10 times, under the same key. An attempt with
// a wait that has no answer Config.AcquireGrace (3 s by default) after
// its wait ran out (a node paused, or cut off without a reset) counts as
// failed too: the next connection is asked, for what is left of the wait
// (1 ms: once, without queueing), a 307 naming the silent node not
// followed back to it. No
// repeat can queue it twice or make it wait behind its own grant. A grant answered
// to a repeat may predate it, and one answered half its lease or more
// after its request went out (a wait in the queue) would count its lease
// from that send: either is renewed once before Acquire returns, so that
// the Lock counts its lease from no later than the node does, and a
// KeepAlive does not find it run out.
//
// Errors: ErrTimeout (the wait ran out: not granted), ErrLimit,
// ErrLimitMismatch (WithLimit named another limit than the key's),
// ErrSuperseded (still after 10 repeats, which only another client that
// sent this acquire's key could cause),
// ErrInvalidArgument (as *StatusError), ErrUnauthorized (the Token was
// refused: a 401, or an AUTH refused on a baton:// connection; at once,
// not retried), ErrGrantEnded (the grant ended
// before its answer could be delivered, or before the at-once renewal of
// a grant answered late, and again after each new acquire
// made within what was left of the wait: nothing is held; when the wait
// ran out meanwhile, the error Is ErrTimeout too), ErrUnavailable
// (no connection could be made, dialled again every 200 ms for 10 s
// (failoverPatience) within the wait, or all attempts failed: a grant whose answer was lost
// with the last one is settled in the background as after a cancel, see
// below), a *StatusError for another 5xx (a node's 500, a proxy's 502 or
// 504; settled the same way: the node may have granted) or a 200 whose
// body does not decode (its grant released), ErrClosed, or ctx's error. When ctx ends the waiter
// leaves the queue and Acquire returns at once; a grant made at that moment
// is released again, never left held: one whose answer arrives after the
// cancel is released, and when the outcome is unknown (the node may have
// answered a grant that the cancelled stream no longer delivers) the
// Client asks the node again under the same Idempotency-Key and releases
// what it says was granted. This settling runs in the background, bounded
// by twice ReleaseTimeout; Close waits for it.
//
// Over the native protocol (baton:// addresses) the same holds, with an
// M answer in place of a 307; when ctx ends, the client sends the
// protocol's cancel ("C <key> <id>") on the connection, and the node
// withdraws the waiter at once, as over HTTP. A node of a version
// before that op (one that does not answer the client's first ping on
// the connection) is not sent it: the request stays queued there (a
// waiter that went away would have to close the whole connection, and
// with it every other waiter on it), and its grant, when it comes, is
// released at once. For such nodes WithWait bounds how long it stays;
// without WithWait, a ctx with a deadline names the time left until it
// (rounded up to a millisecond) as the wait, so the node drops the
// waiter when ctx ends (ctx's error is returned, as over HTTP), and a ctx
// without one leaves it queued until granted or the node's wait_max. A
// deadline beyond the node's wait_max is not sent: asked again without a
// wait.
func (c *Client) Acquire(ctx context.Context, key string, opts ...AcquireOption) (l *Lock, err error) {
	var o acquireOpts
	for _, f := range opts {
		f(&o)
	}
	if o.lease < 0 {
		return nil, invalidArgument("lease", "must not be negative, got %v", o.lease)
	}
	if o.wait < 0 {
		return nil, invalidArgument("wait", "must not be negative, got %v", o.wait)
	}
	if o.limitSet && (o.limit < 1 || o.limit > MaxLimit) {
		// 0 would be sent as no limit at all (the key's), where the
		// server refuses limit=0.
		return nil, invalidArgument("limit", "must be an integer from 1 to %d, got %d", MaxLimit, o.limit)
	}
	owner := DefaultOwner()
	if o.owner != nil {
		owner = *o.owner
	}
	if c.native {
		// Before the query string, which the native protocol does not use.
		return c.nAcquire(ctx, key, o, owner)
	}
	q := url.Values{}
	if o.lease > 0 {
		q.Set("lease", seconds(o.lease))
	}
	if o.wait > 0 {
		q.Set("wait", seconds(o.wait))
	}
	if owner != "" {
		q.Set("owner", owner)
	}
	if o.mode != "" {
		q.Set("mode", o.mode)
	}
	if o.limit != 0 {
		q.Set("limit", strconv.Itoa(o.limit))
	}
	pathQuery := lockPath(key, q)
	hdr := http.Header{HeaderIdempotencyKey: {newKey()}}
	// The attempts a silent node left unanswered past their limit: an
	// acquire that ends without a grant settles each (as nAcquire's
	// abandon), for the node may have granted it late, when it resumed,
	// while another node answered the last attempt: that grant is
	// nobody's, and held its key for its whole lease. One that ends with
	// a grant leaves them: a later attempt may hold the same grant under
	// the same Idempotency-Key.
	type silentAttempt struct {
		pathQuery string
		hdr       http.Header
		at        *address
	}
	var silents []silentAttempt
	defer func() {
		if l == nil {
			for _, a := range silents {
				c.settleAcquire(a.pathQuery, a.hdr, 0, a.at)
			}
		}
	}()

	attempts, redirects, resets, restarts, supersedes := 0, 0, 0, 0, 0
	max := c.numConns()
	extra := false // the one round of attempts beyond max after broken connections
	// redialled: no connection could be made and the acquire asked again
	// (keepAsking); an attempt before may have broken with its grant.
	redialled := false
	var avoid *slot
	// silent is the connection of the last attempt that got no answer
	// within its wait and AcquireGrace: a 307 naming its node keeps it
	// avoided (a standby names the paused active until it promotes).
	var silent *slot
	wait := o.wait // the wait pathQuery names (0: none)
	var unavailableSince time.Time
	asked := false // a request went out: the node may hold a place or a grant
	start := time.Now()
	// since is the send of the first attempt whose outcome is unknown: a
	// grant answered to a repeat may date from then (grantSince).
	var since time.Time
	var last *address // the node of the last attempt
	// lost is the node of the last attempt under hdr's key whose answer
	// was lost with its connection (nil: none): settled there if the
	// acquire starts afresh (see StatusGone).
	var lost *address
	for {
		// With a wait, the time to a connection counts toward the
		// attempt's limit: a node paused before the client's first
		// round trip with it completed (the kernel accepts the TCP
		// connection) kept the acquire waiting for the dial, past the
		// wait and AcquireGrace, under a ctx without a deadline.
		pctx, pcancel := ctx, context.CancelFunc(func() {})
		limit := c.attemptLimit(wait)
		if limit > 0 {
			pctx, pcancel = context.WithTimeout(ctx, limit)
		}
		s, cc, err := c.pick(pctx, avoid, true)
		// Read before pcancel, which ends pctx whatever happened.
		bounded := err != nil && limit > 0 && ctx.Err() == nil && pctx.Err() != nil
		pcancel()
		if err != nil {
			if bounded {
				err = fmt.Errorf("%w: acquire %q: no connection was up within the wait and AcquireGrace (%v)", ErrUnavailable, key, limit)
			} else if keepAsking(ctx, err, o.wait, start, &unavailableSince) {
				// No dial succeeded (the node restarting): asked again
				// under the same Idempotency-Key, with what is left of
				// the wait; the connections that break once it is back
				// are a new round of attempts.
				if err = sleep(ctx, reconnectPause); err == nil {
					attempts, extra, avoid, redialled = 0, false, nil, true
					if o.wait > 0 {
						wait = leftOf(o.wait, start)
						if pathQuery, err = setWait(pathQuery, wait); err != nil {
							return nil, err
						}
					}
					continue
				}
			}
			if asked && (ctx.Err() != nil || extra || bounded || redialled) {
				// extra: the attempt before broke with its connection
				// (settled as below, at attempts >= max).
				c.settleAcquire(pathQuery, hdr, 0, last)
			}
			return nil, err
		}
		asked, last = true, s.addr
		sent := time.Now()
		if since.IsZero() {
			since = sent
		}
		r, err := c.sendAcquire(ctx, s, cc, pathQuery, hdr, limit)
		served(&unavailableSince, sent)
		if err == nil {
			// A node answered: attempts counts the failures since (an
			// acquire that waits through several failovers has its
			// connection broken at each, and is moved on each time).
			attempts = 0
		}
		if err != nil {
			var ce *errConn
			if !errors.As(err, &ce) {
				return nil, err
			}
			if again, serr := streamRetry(ctx, ce, &resets); serr != nil {
				c.settleAcquire(pathQuery, hdr, 0, s.addr)
				return nil, serr
			} else if again {
				avoid = nil
				continue
			}
			attempts++
			if attempts == max && !extra && !errors.Is(err, errNoAnswer) && !pingLost(err) {
				// Every connection may have broken at once (a proxy,
				// a NAT or a load balancer reset them all), some
				// before it was noticed (and an attempt on a
				// connection of its own counts too): one more round,
				// whose attempts meet the rest of them, then find
				// every connection down and dial afresh (the error
				// then that dial's).
				extra = true
				attempts = 0
			}
			if attempts >= max {
				// The node may have made a grant whose answer was lost
				// with the connection: settled as after a cancel.
				c.settleAcquire(pathQuery, hdr, 0, s.addr)
				return nil, fmt.Errorf("%w: acquire %q: %d attempts failed, last: %w", ErrUnavailable, key, attempts, err)
			}
			avoid, lost = s, s.addr
			noAnswer := errors.Is(err, errNoAnswer)
			if noAnswer || pingLost(err) {
				// A silent node: the wait ran out there, or the
				// connection's PING went unanswered. It may grant
				// when it resumes: settled if this acquire ends
				// without a grant.
				if !slices.ContainsFunc(silents, func(a silentAttempt) bool {
					return a.at == s.addr && a.hdr.Get(HeaderIdempotencyKey) == hdr.Get(HeaderIdempotencyKey)
				}) {
					silents = append(silents, silentAttempt{pathQuery, hdr, s.addr})
				}
				silent = s
				c.markSilent(s)
			}
			if noAnswer {
				// The next attempt (same Idempotency-Key: it finds a
				// grant that node made and replicated) waits only what
				// is left of the wait.
				wait = leftOf(o.wait, start)
				if pathQuery, err = setWait(pathQuery, wait); err != nil {
					return nil, err
				}
			}
			continue
		}
		var ended error // a grant found ended by grantSince
		switch r.status {
		case http.StatusOK:
			c.answered(s)
			l, err := c.newLock(r, sent)
			if err != nil {
				// A grant the caller cannot use is not left held for
				// its lease: released by its Lock-Token (else found
				// again under the Idempotency-Key).
				c.settleAcquire(pathQuery, hdr, grantToken(r), s.addr)
				return nil, err
			}
			l.from = s.addr
			gl, gerr := l.grantSince(ctx, since, sent, silent)
			if !errors.Is(gerr, ErrGrantEnded) {
				return gl, gerr
			}
			// The renewal of a grant answered late found it ended:
			// nothing is held, as after a 410 grant_ended, and the
			// acquire starts again the same way.
			ended = gerr
			fallthrough
		case http.StatusGone:
			var se error = ended
			if se == nil {
				se = statusError(r)
			}
			left, again, aerr := afresh(se, o.wait, start, &restarts)
			if !again {
				return nil, aerr
			}
			// The grant ended unclaimed (its lease ran out on a new
			// active while this client was stuck on a paused node):
			// nothing is held; a new acquire, with what is left of
			// the wait.
			if lost != nil && lost != s.addr {
				// An attempt under the old key whose answer was lost
				// went to another node, which may hold its grant (two
				// actives at once) that nobody will claim now: settled
				// there, as after a cancel.
				c.settleAcquire(pathQuery, hdr, 0, lost)
			}
			lost = nil
			if pathQuery, err = withWait(pathQuery, left); err != nil {
				return nil, err
			}
			wait = left
			hdr = http.Header{HeaderIdempotencyKey: {newKey()}}
			avoid, redirects, since = nil, 0, time.Time{}
			continue
		case http.StatusTemporaryRedirect:
			if redirects++; redirects > maxRedirects {
				// The nodes still name an active that does not answer
				// (a failover in progress): like a 503, another round
				// after a pause, for failoverPatience.
				if !patient(o.wait, start, &unavailableSince) {
					return nil, fmt.Errorf("%w: acquire %q: more than %d redirects", ErrUnavailable, key, maxRedirects)
				}
				if err := sleep(ctx, redirectPause); err != nil {
					// A node that redirects granted nothing: the
					// preferred one (named last) is asked.
					c.settleAcquire(pathQuery, hdr, 0, nil)
					return nil, err
				}
				redirects = 0
			}
			if pathQuery, err = c.redirect(s, pathQuery, r); err != nil {
				return nil, err
			}
			if since.Equal(sent) {
				// Only this attempt was out, and a node that redirects
				// granted nothing: the next one starts the count.
				since = time.Time{}
			}
			if !c.stillSilent(avoid, silent) {
				avoid = nil
			}
			continue
		case http.StatusRequestTimeout:
			if isPollTimeout(r) {
				// Not granted when the node answered; a grant may come
				// any time after, also before the repeat is sent (the
				// 408 on its way, this process paused): since is this
				// attempt's send, before the node's answer, so that the
				// lease is counted from no later than the grant
				// (grantSince).
				avoid, redirects, since = nil, 0, sent
				continue // resume our place, same Idempotency-Key
			}
			return nil, statusError(r)
		case http.StatusConflict:
			if hasCode(r, http.StatusConflict, CodeSuperseded) && supersedes < maxAfresh {
				// A repeat under this acquire's own Idempotency-Key
				// took its place over: an attempt of this acquire that
				// was cut off unanswered (a node paused past the
				// ping's bound, whose socket still held it) reached
				// the queue after the live one. The place is still
				// there, kept for a repeat: the same key takes it back
				// (breaker T, 2026-12-06, in the JavaScript client).
				supersedes++
				avoid, redirects = nil, 0 // since stays: the cut-off attempt's place may be granted
				continue
			}
			return nil, statusError(r)
		case http.StatusServiceUnavailable:
			// No active node known (a failover in progress), or the
			// node is shutting down: another attempt, after
			// Retry-After (at most a second), for failoverPatience.
			if !patient(o.wait, start, &unavailableSince) {
				// A node that resumed from a pause may still keep a
				// grant for the repeat: settled as after a cancel.
				c.settleAcquire(pathQuery, hdr, 0, s.addr)
				return nil, statusError(r)
			}
			if err := sleep(ctx, retryAfter(r.header, time.Second)); err != nil {
				c.settleAcquire(pathQuery, hdr, 0, s.addr)
				return nil, err
			}
			avoid, redirects = s, 0
			continue
		default:
			if r.status >= 500 {
				// A node's 500, or a proxy's 502 or 504 in place of
				// an answer: the node may have granted (and taken the
				// grant as delivered), so it is settled, as after a
				// 503 given up on.
				c.settleAcquire(pathQuery, hdr, 0, s.addr)
			}
			return nil, statusError(r)
		}
	}
}

// maxAfresh bounds how many times one Acquire starts again after its
// grant ended unclaimed (afresh).
const maxAfresh = 10

// afresh reports whether an acquire answered err starts again as a new
// acquire (a fresh Idempotency-Key or id), and with which wait: err is
// grant_ended (the grant of this acquire ended before its answer was
// delivered, as when its lease ran out on a new active while the client
// was stuck on a paused node: nothing is held), fewer than maxAfresh
// restarts were made (*restarts counts them), and at least a millisecond
// is left of wait since start (wait 0, no limit: 0).
//
// When it does not start again it returns the error to answer: err, or,
// when what stopped it is that the wait ran out, err wrapped so that it
// Is ErrTimeout too: the acquire was not granted within its wait and
// nothing is held, which a caller checks with errors.Is(err, ErrTimeout)
// (WithLock's users did, and took a paused active's grant_ended for a
// failure).
func afresh(err error, wait time.Duration, start time.Time, restarts *int) (time.Duration, bool, error) {
	if !errors.Is(err, ErrGrantEnded) || *restarts >= maxAfresh {
		return 0, false, err
	}
	left := time.Duration(0)
	if wait > 0 {
		if left = wait - time.Since(start); left < time.Millisecond {
			return 0, false, fmt.Errorf("%w: %w", ErrTimeout, err)
		}
	}
	*restarts++
	return left, true, nil
}

// pingLost reports whether err is the end of an HTTP/2 connection whose
// PING went unanswered (Config.PingTimeout): the node is silent (paused,
// or cut off without a reset), not gone. net/http says so only in the
// error's text.
func pingLost(err error) bool {
	return err != nil && strings.Contains(err.Error(), "http2: client connection lost")
}

// attemptLimit bounds one acquire attempt that names wait: wait +
// Config.AcquireGrace (the time the client gives a node beyond the wait
// before it takes it for silent); 0 (no bound but ctx and the
// connection's) without a wait.
func (c *Client) attemptLimit(wait time.Duration) time.Duration {
	if wait <= 0 {
		return 0
	}
	return wait + c.cfg.AcquireGrace
}

// ctxWait is the wait that a baton:// acquire without WithWait names when
// ctx has a deadline (ok false: none): the time left until it, rounded up
// to a whole millisecond, at least 1 ms. The native protocol has no
// cancel, so without it a waiter whose caller gave up stayed queued on
// the node until granted (and released at once), delaying the waiters
// behind it and counting toward max_waiters.
func ctxWait(ctx context.Context) (time.Duration, bool) {
	d, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	left := (time.Until(d) + time.Millisecond - 1).Truncate(time.Millisecond)
	return max(left, time.Millisecond), true
}

// leftOf is what is left at least of wait since start for an attempt
// after a silent one: a millisecond once it ran out (ask once more, do
// not queue).
func leftOf(wait time.Duration, start time.Time) time.Duration {
	return max(wait-time.Since(start), time.Millisecond)
}

// setWait returns the acquire pathQuery with its wait set to d (> 0),
// everything else kept: a repeat under the same Idempotency-Key may
// shorten its wait.
func setWait(pathQuery string, d time.Duration) (string, error) {
	u, err := url.Parse(pathQuery)
	if err != nil {
		return "", fmt.Errorf("baton: acquire: %w", err)
	}
	q := u.Query()
	q.Set("wait", seconds(d))
	u.RawQuery = q.Encode()
	return u.RequestURI(), nil
}

// withWait returns the acquire pathQuery with its wait set to d (0: none)
// and without a redirect's ticket (which named the earlier acquire).
func withWait(pathQuery string, d time.Duration) (string, error) {
	u, err := url.Parse(pathQuery)
	if err != nil {
		return "", fmt.Errorf("baton: acquire: %w", err)
	}
	q := u.Query()
	q.Del("wait")
	q.Del("ticket")
	if d > 0 {
		q.Set("wait", seconds(d))
	}
	u.RawQuery = q.Encode()
	return u.RequestURI(), nil
}

// sendAcquire is send for a long poll: the request is cancelled when ctx
// ends. An acquire cancelled that way may still have been granted: the
// node may have written the 200 before the stream's reset reached it, or
// the answer may be on its way. So when ctx ends, a grant whose status and
// Lock-Token arrived is released, and an outcome that did not arrive is
// settled by the Idempotency-Key (settleAcquire), both in the background;
// only an answer read in full that is neither a grant, a poll_timeout nor
// a 503 needs nothing. With limit > 0, a request still unanswered after
// limit is cancelled too, and fails as an *errConn that Is errNoAnswer:
// the node is silent; the outcome is unknown, and the caller's next
// attempt asks again under the same Idempotency-Key.
func (c *Client) sendAcquire(ctx context.Context, s *slot, cc *http.ClientConn, pathQuery string, hdr http.Header, limit time.Duration) (*response, error) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	var expired atomic.Bool
	if limit > 0 {
		t := time.AfterFunc(limit, func() {
			expired.Store(true)
			cancel()
		})
		defer t.Stop()
	}
	stop := context.AfterFunc(ctx, cancel)
	closing := context.AfterFunc(c.ctx, cancel)
	defer closing()
	r, err := c.send(rctx, s, cc, http.MethodPost, pathQuery, hdr)
	if !stop() {
		// ctx ended.
		switch tok := grantToken(r); {
		case tok != 0:
			c.settleAcquire(pathQuery, hdr, tok, s.addr)
		case err != nil, isPollTimeout(r), r.status == http.StatusServiceUnavailable, r.status == http.StatusTemporaryRedirect:
			// No answer; or a poll_timeout (the node keeps the place for
			// a grace, and may grant it meanwhile); or a 503, which a
			// node resuming from a pause answers to a grant it keeps for
			// the repeat; or a 307 (a demoted active at a handoff: the
			// place went to the node it names, where it would be granted
			// to nobody).
			c.settleAcquire(pathQuery, hdr, 0, s.addr)
		}
		return nil, ctx.Err()
	}
	if c.ctx.Err() != nil {
		return nil, ErrClosed
	}
	if err != nil && expired.Load() {
		return nil, &errConn{err: fmt.Errorf("%w (its wait + %v) from %s: %w", errNoAnswer, c.cfg.AcquireGrace, s.addr.base.Host, err)}
	}
	if err != nil && errors.Is(err, context.Canceled) {
		return nil, &errConn{err: err}
	}
	return r, err
}

// isPollTimeout reports whether r is a 408 poll_timeout (the node ended
// the long poll early and keeps the place for a repeat).
func isPollTimeout(r *response) bool { return hasCode(r, http.StatusRequestTimeout, CodePollTimeout) }

// hasCode reports whether r is an error answer of status with code.
func hasCode(r *response, status int, code string) bool {
	if r == nil || r.status != status {
		return false
	}
	var se *StatusError
	return errors.As(statusError(r), &se) && se.Code == code
}

// grantToken returns the token of r when r is a grant (200) whose token
// arrived (in Lock-Token, else in the body), and 0 otherwise.
func grantToken(r *response) uint64 {
	if r == nil || r.status != http.StatusOK {
		return 0
	}
	if tok, err := strconv.ParseUint(r.header.Get(HeaderLockToken), 10, 64); err == nil {
		return tok
	}
	var g Grant
	if json.Unmarshal(r.body, &g) == nil {
		return g.Token
	}
	return 0
}

// settleWait is the wait of the repeat that settles a cancelled acquire:
// a repeat that the node takes for a new acquire (the first one's place is
// gone) times out at once instead of parking.
const settleWait = "0.001"

// settleAcquire ends, in the background, whatever a cancelled acquire
// (pathQuery, with its Idempotency-Key in hdr) may have left on the node:
// with token != 0, the grant whose answer arrived after the cancel is
// released; with token 0 the outcome is unknown, so the acquire is
// repeated under the same Idempotency-Key with a wait of 1 ms. The node
// then answers the grant it made (released at once), 410 grant_ended, 408
// (the place was gone: the repeat timed out, nothing held), or takes the
// place over if the first request was still parked (the repeat is
// cancelled after releaseAttempt and asked again). A repeat that comes to a
// free key may be granted afresh; that grant is released at once too.
// Asking is bounded by ReleaseTimeout, the release by another. The
// goroutine is the Client's: Close waits for it.
//
// at is the node the acquire's last attempt went to (nil: not known), the
// one that may hold its place or grant, and that granted token: the
// repeat asks it first, and the release goes to the node that granted,
// where a not_held or not_holder from another node is no answer (two
// actives at once, a split brain: the node the Client came to prefer meanwhile
// knows nothing of the grant, and it stayed held for its lease).
func (c *Client) settleAcquire(pathQuery string, hdr http.Header, token uint64, at *address) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.settling.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.settling.Done()
		key := lockKeyFromPath(pathQuery)
		if token == 0 {
			token, at = c.askAgain(pathQuery, hdr, at)
		}
		if token == 0 {
			return
		}
		rctx, cancel := context.WithTimeout(c.ctx, c.cfg.ReleaseTimeout)
		defer cancel()
		_ = c.release(rctx, key, token, at)
	}()
}

// askAgain repeats a cancelled acquire under its Idempotency-Key with a
// wait of settleWait until the node gives a definite answer, for at most
// ReleaseTimeout, each attempt asking at first (nil: the preferred node).
// It returns the token of a grant and the node that granted it, or 0 when
// nothing is held under this acquire (or no answer came in time).
func (c *Client) askAgain(pathQuery string, hdr http.Header, at *address) (uint64, *address) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.ReleaseTimeout)
	defer cancel()
	u, err := url.Parse(pathQuery)
	if err != nil {
		return 0, nil
	}
	q := u.Query()
	q.Set("wait", settleWait)
	u.RawQuery = q.Encode()
	pq := u.RequestURI()
	for {
		actx, acancel := context.WithTimeout(ctx, releaseAttempt)
		r, s, err := c.callAt(actx, http.MethodPost, pq, hdr, nil, at)
		acancel()
		if err == nil {
			if r.status == http.StatusOK {
				return grantToken(r), s.addr
			}
			if r.status < 500 && r.status != http.StatusTooManyRequests {
				// 408, 409 superseded, 410 grant_ended, 4xx: nothing
				// is held under this Idempotency-Key.
				return 0, nil
			}
		}
		if sleep(ctx, c.cfg.ReleaseRetry) != nil {
			return 0, nil
		}
	}
}

func lockKeyFromPath(pathQuery string) string {
	u, err := url.Parse(pathQuery)
	if err != nil {
		return ""
	}
	k, _ := url.PathUnescape(u.EscapedPath()[len("/locks/"):])
	return k
}

func (c *Client) newLock(r *response, sent time.Time) (*Lock, error) {
	var g Grant
	if err := json.Unmarshal(r.body, &g); err != nil {
		return nil, fmt.Errorf("baton: acquire: bad answer: %w", err)
	}
	lease := time.Duration(g.Lease * float64(time.Second))
	return &Lock{
		Key:       g.Key,
		Token:     g.Token,
		Lease:     lease,
		ExpiresAt: g.ExpiresAt,
		Node:      g.Node,
		c:         c,
		lease:     lease,
		expiry:    g.ExpiresAt,
		deadline:  sent.Add(lease),
		lost:      make(chan struct{}),
	}, nil
}

// suspended is how long the machine has been suspended since it booted
// (suspendedSinceBoot; a variable for tests).
var suspended = suspendedSinceBoot

// leftLocked is how much of the lease is left by the local count (l.mu
// held): the time until deadline, less the time the machine was suspended
// since deadline was set. Go's monotonic clock, and every timer with it,
// stands still during a suspend (Linux), while the node's clock runs on:
// after a laptop resumed, the deadline alone still said held of a lease
// that the node had ended in the meantime.
func (l *Lock) leftLocked() time.Duration {
	return time.Until(l.deadline) - (suspended() - l.asleep)
}

// left is leftLocked, taking l.mu.
func (l *Lock) left() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leftLocked()
}

// grantSince completes a Lock answered to the attempt sent at sent, the
// first attempt of the acquire whose outcome was unknown having been sent
// at since. A grant answered to a repeat (since before sent: an earlier
// attempt's connection broke, or it was answered 503, poll_timeout or
// superseded, or a 307 after either) may have
// been made before the repeat went out, as early as since, and its lease
// runs from then on the node: counted from sent, the keep-alive would
// renew late and count the lock held past the node's expiry. So its
// lease is counted from since and, because since may be long ago (an
// attempt parked for long), renewed at once: the renewal's send is then
// where it counts from. A renewal refused means the grant ended before
// its answer arrived: ErrGrantEnded. Any other failure (or none within a
// quarter lease) leaves the lease counted from since. The renewal passes
// over silent, the connection of an earlier attempt that got no answer
// (nil: none): the node that answered the grant is the active, and the
// renewal would wait the quarter lease on the paused node named before.
//
// A grant answered half a lease or more after its attempt was sent (it
// waited in the queue) is renewed at once too: its lease runs from the
// grant on the node, but counted from the send it has (nearly) run out
// here, and the keep-alive, finding it run out, marked the lock lost
// before trying a renewal.
func (l *Lock) grantSince(ctx context.Context, since, sent time.Time, silent *slot) (*Lock, error) {
	if !since.Before(sent) && time.Since(sent) < l.lease/2 {
		return l, nil
	}
	l.deadline = since.Add(l.lease)
	// Bounded as one attempt of the keep-alive.
	rctx, cancel := context.WithTimeout(ctx, max(l.lease/4, 100*time.Millisecond))
	defer cancel()
	if _, err := l.renew(rctx, 0, silent); errors.Is(err, ErrNotHeld) || errors.Is(err, ErrNotHolder) {
		return nil, fmt.Errorf("%w: %q token %d: %w", ErrGrantEnded, l.Key, l.Token, err)
	}
	return l, nil
}

// retryAfter reads a Retry-After in seconds, capped at limit.
func retryAfter(h http.Header, limit time.Duration) time.Duration {
	n, err := strconv.ParseFloat(h.Get("Retry-After"), 64)
	if err != nil || n < 0 {
		return limit
	}
	return min(time.Duration(n*float64(time.Second)), limit)
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// releaseAttempt bounds one release attempt: above what a release sent
// to the standby just after the active died waits there by default, the
// failover (failover_timeout, 1 s, and two heartbeats: the standby holds
// the call until it is the active) and then the default sync_timeout (1 s,
// for which a promoted node that still counts a synchronous standby live,
// one that does not acknowledge, holds a change before it degrades and
// answers; with no live peer it degrades at once). Cut before that, the attempt
// released the lock unanswered, and the retries ran to ReleaseTimeout
// (breaker T, 2026-12-06: 5 s where 1.2 s sufficed with a 1 s cut; a
// verifier: 4 of 16 runs with a 2 s cut).
const releaseAttempt = 3 * time.Second

// Release releases the lock key held under token, so that it passes to the
// next waiter. It is retried every ReleaseRetry (200 ms) for up to
// ReleaseTimeout (5 s), or until ctx ends, until a node confirms it. It
// returns nil once released; ErrNotHeld or ErrNotHolder (as *StatusError)
// when the lock was not ours (any more) — unless an earlier attempt may
// have released it (its connection was lost, or it was answered
// unavailable or internal: a node may make a release that its log then
// fails to write), in which case that attempt released it and nil is
// returned; ErrInvalidArgument for a bad key or token; ErrUnauthorized,
// at once, when the node refuses the Config.Token; else the last failure
// (wrapping ErrUnavailable) or ctx's error.
func (c *Client) Release(ctx context.Context, key string, token uint64) error {
	return c.release(ctx, key, token, nil)
}

// release is Release of a grant made by the node from (nil: not known):
// each round of attempts asks from first, and a not_held or not_holder
// ends it only when from answered it, or a node it redirected to (a node
// that from was not asked through may be another active, in a split brain,
// that knows nothing of the grant): else it is retried as after no answer.
func (c *Client) release(ctx context.Context, key string, token uint64, from *address) error {
	if c.native {
		return c.nRelease(ctx, key, token, from)
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ReleaseTimeout)
	defer cancel()
	pathQuery := lockPath(key, url.Values{"token": {strconv.FormatUint(token, 10)}})
	ambiguous := false // an attempt may have reached the server
	// elsewhere: a node neither from nor reached through it answered
	// not_held or not_holder.
	elsewhere := false
	var last error
	redirects := 0
	var avoid *slot
	want := from     // the node a round asks first (nil after a 307)
	var via *address // the node this round asked first
	for {
		s, cc, err := c.pickAt(ctx, want, avoid, false)
		want = nil
		if err == nil && via == nil {
			via = s.addr
		}
		if err == nil {
			var r *response
			// One attempt may not eat the whole window: a connection
			// that went silent (no RST, PING not yet due) is left for
			// the next one.
			actx, acancel := context.WithTimeout(ctx, releaseAttempt)
			r, err = c.send(actx, s, cc, http.MethodDelete, pathQuery, nil)
			if err != nil && actx.Err() != nil && ctx.Err() == nil {
				err = &errConn{err: fmt.Errorf("no answer within %v", releaseAttempt)}
			}
			acancel()
			var ce *errConn
			switch {
			case errors.As(err, &ce):
				ambiguous = true
				avoid = s
			case err != nil:
			case r.status == http.StatusOK:
				c.answered(s)
				return nil
			case r.status == http.StatusTemporaryRedirect:
				if redirects++; redirects > maxRedirects {
					// The nodes still name an active that does not
					// answer (a failover in progress): retried after
					// the pause, within ReleaseTimeout.
					err = fmt.Errorf("%w: release %q: more than %d redirects", ErrUnavailable, key, maxRedirects)
					redirects = 0
					break
				}
				if pathQuery, err = c.redirect(s, pathQuery, r); err != nil {
					return err
				}
				// The node named is the one to ask, even if an attempt
				// there went unanswered before (avoid would skip it).
				avoid = nil
				continue
			case (r.status == http.StatusNotFound || r.status == http.StatusConflict) && from != nil && via != from:
				// Not the node that granted, nor one it named: that
				// node is asked again (also after it failed).
				err = statusError(r)
				avoid = nil
				elsewhere = true
			case r.status == http.StatusNotFound || r.status == http.StatusConflict:
				if ambiguous {
					return nil
				}
				return statusError(r)
			case r.status >= 500 || r.status == http.StatusTooManyRequests:
				err = statusError(r)
				ambiguous = ambiguous || r.status >= 500
			default:
				return statusError(r)
			}
		}
		redirects = 0 // not a redirect: the next attempt counts anew
		want, via = from, nil
		if errors.Is(err, ErrClosed) {
			return err
		}
		if err != nil && ctx.Err() == nil {
			last = err
		}
		if sleep(ctx, c.cfg.ReleaseRetry) != nil {
			if ambiguous && elsewhere {
				// The granting node never answered again (it died with
				// the answer of an attempt that may have released:
				// a failover), and the node that answered does not
				// hold the lock for us: as after an ambiguous attempt
				// on one node, that attempt released it. Reported as
				// not_holder, a release made before a failover read
				// as a lock taken away (WithLock failed after fn).
				return nil
			}
			if last == nil {
				if parent.Err() != nil {
					return parent.Err()
				}
				return c.releaseUnconfirmed(key)
			}
			return fmt.Errorf("baton: release %q not confirmed: %w", key, last)
		}
	}
}

// releaseUnconfirmed is the error of a release of key that no node
// answered within ReleaseTimeout (the caller's ctx still live): it wraps
// context.DeadlineExceeded.
func (c *Client) releaseUnconfirmed(key string) error {
	return fmt.Errorf("baton: release %q not confirmed within %v: %w", key, c.cfg.ReleaseTimeout, context.DeadlineExceeded)
}

// ForceRelease is an operator's release of key: every holder is
// released and the queue moves on (SPEC section 2, DELETE
// /locks/{key}?force=true). With admin_tokens (or auth_tokens) set on the
// server, the client's Token must be one of the admin_tokens, else
// ErrForbidden. Errors: ErrNotHeld (nobody holds the key), ErrForbidden,
// ErrInvalidArgument, ErrUnavailable, ErrClosed, ctx's error.
//
// A force is not safe to repeat blindly: it releases every holder, so a
// repeat after the first was made would also release the holders the
// queue moved on to. It is sent under an idempotency key of its own (over
// HTTP its Idempotency-Key, over baton:// the id= of "R <key> force"),
// which the node remembers with the force (for two minutes, replicated to
// its standbys): an attempt whose answer was lost (the connection broke,
// or the HTTP/2 stream was reset, after it was sent: a reset, a node
// killed, a failover) is repeated on the next connection or node like any
// other call, and the repeat is answered as the first was without forcing
// again. A standby's redirect (307, M) is followed. When ctx ends while
// the force is in flight, ctx's error comes back, and the force may have
// been made: look at the key's holders (Status) before forcing again.
// `baton release --force` does the same.
func (c *Client) ForceRelease(ctx context.Context, key string) error {
	if c.native {
		return c.nForceRelease(ctx, key)
	}
	hdr := http.Header{HeaderIdempotencyKey: {newKey()}}
	r, err := c.call(ctx, http.MethodDelete, lockPath(key, url.Values{"force": {"true"}}), hdr)
	if err != nil {
		return err
	}
	if r.status != http.StatusOK {
		return statusError(r)
	}
	return nil
}

// Renew restarts the lease of the lock key held under token, from now, with
// lease (0 = the grant's lease). It blocks for one round trip, moving on to
// the next connection if one fails. Errors: ErrNotHeld or ErrNotHolder
// (the lock is not ours any more), ErrInvalidArgument, ErrUnavailable,
// ErrClosed, ctx's error. A negative lease is refused (ErrInvalidArgument,
// Field "lease"), not sent as 0.
func (c *Client) Renew(ctx context.Context, key string, token uint64, lease time.Duration) (*Grant, error) {
	if lease < 0 {
		return nil, invalidArgument("lease", "must not be negative, got %v", lease)
	}
	g, _, err := c.renew(ctx, key, token, lease, nil)
	return g, err
}

// renew is Renew whose first attempt passes over the connection avoid
// (callAvoiding, ncall over the native protocol); it returns the
// connection of its last attempt.
func (c *Client) renew(ctx context.Context, key string, token uint64, lease time.Duration, avoid *slot) (*Grant, *slot, error) {
	if c.native {
		return c.nRenew(ctx, key, token, lease, avoid)
	}
	q := url.Values{"token": {strconv.FormatUint(token, 10)}}
	if lease > 0 {
		q.Set("lease", seconds(lease))
	}
	r, s, err := c.callAvoiding(ctx, http.MethodPatch, lockPath(key, q), nil, avoid)
	if err != nil {
		return nil, s, err
	}
	if r.status != http.StatusOK {
		return nil, s, statusError(r)
	}
	var g Grant
	if err := json.Unmarshal(r.body, &g); err != nil {
		return nil, s, fmt.Errorf("baton: renew: bad answer: %w", err)
	}
	return &g, s, nil
}

// Release releases the lock (see Client.Release: retried for up to 5 s)
// and stops its keep-alive. It asks first the node that granted or last
// renewed the lock, where a not_held or not_holder from another node not
// reached through it does not end it (two actives at once: the other one
// knows nothing of the grant) — except at the end of the retries, when
// an attempt that may have reached the granting node went unanswered
// (it died with the answer: a failover), where it means that attempt
// released the lock (nil). A second call returns nil. Errors:
// ErrNotHeld, ErrNotHolder (the lock was lost before), ErrUnavailable,
// ctx's error.
func (l *Lock) Release(ctx context.Context) error {
	l.stopKeepAlive()
	l.mu.Lock()
	done, from := l.released, l.from
	l.mu.Unlock()
	if done {
		return nil
	}
	err := l.c.release(ctx, l.Key, l.Token, from)
	if err == nil || errors.Is(err, ErrNotHeld) || errors.Is(err, ErrNotHolder) {
		l.mu.Lock()
		l.released = true
		l.mu.Unlock()
	}
	return err
}

// Renew restarts the lease from now with lease (0 = the current lease) and
// updates Expiry. It blocks for one round trip. When the server says the
// lock is not ours (ErrNotHeld, ErrNotHolder) the Lock is marked lost.
// Errors as Client.Renew (a negative lease refused, the lock not marked
// lost).
func (l *Lock) Renew(ctx context.Context, lease time.Duration) error {
	if lease < 0 {
		return invalidArgument("lease", "must not be negative, got %v", lease)
	}
	_, err := l.renew(ctx, lease, nil)
	return err
}

// renew is Renew whose first attempt passes over the connection avoid
// (Client.renew); it returns the connection of its last attempt.
func (l *Lock) renew(ctx context.Context, lease time.Duration, avoid *slot) (*slot, error) {
	l.mu.Lock()
	if lease <= 0 {
		lease = l.lease
	}
	l.mu.Unlock()
	sent, asleep := time.Now(), suspended()
	g, s, err := l.c.renew(ctx, l.Key, l.Token, lease, avoid)
	if err != nil {
		if errors.Is(err, ErrNotHeld) || errors.Is(err, ErrNotHolder) {
			l.markLost(err)
		}
		return s, err
	}
	l.mu.Lock()
	l.lease = time.Duration(g.Lease * float64(time.Second))
	l.expiry = g.ExpiresAt
	l.deadline, l.asleep = sent.Add(l.lease), asleep
	if s != nil {
		l.from = s.addr
	}
	if l.kaWake != nil {
		select {
		case l.kaWake <- struct{}{}:
		default:
		}
	}
	l.mu.Unlock()
	return s, nil
}

// Expiry returns when the lock expires unless renewed, by the server's
// clock, after the latest successful renewal.
func (l *Lock) Expiry() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiry
}

// Lost returns a channel that is closed when the lock is known to be lost:
// a renewal was refused (ErrNotHeld, ErrNotHolder), the keep-alive could not
// renew before the lease ran out (on Linux counting the time the machine
// was suspended, which Go's monotonic clock leaves out: after a resume the
// keep-alive finds within a second that a longer suspend ended the lease),
// or the Client was closed under a running
// keep-alive. Without KeepAlive only Renew detects a loss. A lock that was
// released is not "lost": the channel stays open.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Err returns nil while the lock is not known to be lost, and after that an
// error that Is ErrLost and wraps the cause.
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostErr
}

func (l *Lock) markLost(cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lostErr != nil || l.released {
		return
	}
	l.lostErr = fmt.Errorf("%w: %q token %d: %w", ErrLost, l.Key, l.Token, cause)
	close(l.lost)
}

// KeepAlive renews the lock in the background every half lease (counted
// from the last successful renewal, its own or a Renew's, whose lease it
// then keeps) until ctx ends, Release is called, the
// Client is closed, or the lock is lost. A failed renewal is retried (every
// lease/10, at most every second) until the lease would have run out; then,
// or when the server refuses a renewal, the lock counts as lost: Lost is
// closed and Err says why. It returns at once; a second call while one runs
// does nothing. Stopping the keep-alive does not release the lock.
func (l *Lock) KeepAlive(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kaDone != nil || l.released || l.lostErr != nil {
		return
	}
	c := l.c
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		l.lostErr = fmt.Errorf("%w: %q token %d: %w", ErrLost, l.Key, l.Token, ErrClosed)
		close(l.lost)
		return
	}
	c.wg.Add(1)
	c.mu.Unlock()
	l.asleep = suspended()
	kctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	l.kaStop, l.kaDone, l.kaWake = stop, done, make(chan struct{}, 1)
	go func() {
		defer c.wg.Done()
		defer close(done)
		defer stop()
		defer context.AfterFunc(c.ctx, stop)()
		l.keepAlive(kctx)
	}()
}

func (l *Lock) stopKeepAlive() {
	l.mu.Lock()
	stop, done := l.kaStop, l.kaDone
	l.kaStop = nil
	l.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

func (l *Lock) keepAlive(ctx context.Context) {
	for {
		l.mu.Lock()
		lease, left, slept, wake := l.lease, l.leftLocked(), suspended()-l.asleep, l.kaWake
		l.mu.Unlock()
		if left <= 0 && slept > 0 {
			l.markLost(fmt.Errorf("the lease ran out while this machine was suspended (%v)", slept.Round(time.Millisecond)))
			return
		}
		if wait := left - lease/2; wait > 0 {
			// In steps: a suspend during the sleep is seen after it. A
			// renewal (Renew) wakes it: the lease may have changed.
			t := time.NewTimer(min(wait, suspendCheck))
			select {
			case <-t.C:
			case <-wake:
				t.Stop()
			case <-ctx.Done():
				t.Stop()
				l.keepAliveEnded()
				return
			}
			continue
		}
		retry := min(max(lease/10, 10*time.Millisecond), time.Second)
		// avoid is the connection an attempt of this round left
		// unanswered: the next attempts pass over it. Without it every
		// attempt went to the preferred (active) node again, and an
		// active paused or cut off without a reset (its connections stay
		// open until a PING fails, up to 20 s) lost a short lease that the
		// promoted standby would have renewed.
		var avoid *slot
		// refused is the error of this round's last attempt that ended
		// before its time (a node's refusal, such as a 503 when its log
		// cannot write, or a refused connection), which says why the
		// lease ran out when the round's last attempt got no answer in
		// time (it had only what was left of the lease).
		var refused error
		for {
			// One attempt gets at most a quarter lease, so that a
			// silent connection leaves time for another.
			actx, acancel := context.WithTimeout(ctx, min(l.left(), max(lease/4, 100*time.Millisecond)))
			s, err := l.renew(actx, lease, avoid)
			silent := actx.Err() != nil && ctx.Err() == nil
			acancel()
			if err == nil {
				break
			}
			if silent && s != nil {
				avoid = s
				l.c.markSilent(s)
			}
			if !silent {
				refused = err
			} else if refused != nil {
				err = fmt.Errorf("%w; the last attempt: %w", refused, err)
			}
			if errors.Is(err, ErrNotHeld) || errors.Is(err, ErrNotHolder) {
				return // Renew marked it lost
			}
			if ctx.Err() != nil {
				l.keepAliveEnded()
				return
			}
			if l.left() <= 0 {
				l.markLost(fmt.Errorf("lease ran out before a renewal succeeded: %w", err))
				return
			}
			if sleep(ctx, min(retry, l.left())) != nil {
				l.keepAliveEnded()
				return
			}
		}
	}
}

// keepAliveEnded: the keep-alive's context ended. If that was Client.Close,
// the lock can no longer be renewed: it counts as lost.
func (l *Lock) keepAliveEnded() {
	if l.c.ctx.Err() != nil {
		l.markLost(ErrClosed)
	}
}

// WithLock acquires key (see Acquire for opts and errors), keeps it alive
// in the background, and runs fn with the fencing token and a context that
// is cancelled (cause: an error that Is ErrLost) if the lock is lost. When
// fn returns, or panics, the lock is released (retried for up to 5 s, even
// if ctx has ended; a panic goes on after the release), unless it was lost
// by then. It returns fn's error, joined with an error that Is ErrLost if
// the lock was lost while fn ran, and with the release's error if the
// release failed.
func (c *Client) WithLock(ctx context.Context, key string, fn func(ctx context.Context, token uint64) error, opts ...AcquireOption) error {
	l, err := c.Acquire(ctx, key, opts...)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	l.KeepAlive(context.WithoutCancel(ctx))
	watch := make(chan struct{})
	go func() {
		defer close(watch)
		select {
		case <-l.Lost():
			cancel(l.Err())
		case <-fctx.Done():
		}
	}()
	returned := false
	defer func() {
		if !returned {
			// fn panicked (or called runtime.Goexit): the lock is
			// released on the way up. A net/http server recovers a
			// handler's panic and goes on, and the keep-alive, whose
			// context never ends, held the lock for as long as the
			// Client lived.
			_ = l.Release(context.WithoutCancel(ctx))
		}
	}()
	ferr := fn(fctx, l.Token)
	returned = true
	lostErr := l.Err()
	var rerr error
	if lostErr == nil {
		// A lost lock is not this holder's to release: asked for all the
		// same, an unreachable node held WithLock up for the release's
		// 5 s of retries after fn had already been told (as baton run,
		// which does not ask either).
		rerr = l.Release(context.WithoutCancel(ctx))
	}
	cancel(nil)
	<-watch
	if lostErr != nil {
		if errors.Is(rerr, ErrNotHeld) || errors.Is(rerr, ErrNotHolder) {
			rerr = nil
		}
		if errors.Is(ferr, lostErr) {
			// fn returned the loss itself (context.Cause of its ctx):
			// joined again, its message came twice.
			return errors.Join(ferr, rerr)
		}
		return errors.Join(ferr, lostErr, rerr)
	}
	return errors.Join(ferr, rerr)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
