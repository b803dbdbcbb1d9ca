package history

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/baton-io/baton/api"
)

// Client is one kind of client a Loop drives: the official client (Official,
// over HTTP/2 or baton://) or a plain HTTP/1.1 one (H1).
type Client interface {
	// Acquire takes key as r says, waiting up to r.Wait. Its error is
	// the client's: one matching api.ErrTimeout and the other api
	// sentinels for an error answer (an *api.StatusError over HTTP), the
	// connection's for a failed one, and from H1 one wrapping
	// ErrBadAnswer for an answer the contract does not allow.
	Acquire(ctx context.Context, key string, r Request) (Held, error)
}

// Request is one acquire: lease and wait (> 0), the key's limit (0 or 1:
// a mutex), mode (api.ModeShared, or "" for exclusive) and owner label
// ("": the client's default).
type Request struct {
	Lease, Wait time.Duration
	Limit       int
	Mode        string
	Owner       string
}

// Held is a grant a Client received.
type Held interface {
	// Token is the grant's fencing token.
	Token() uint64
	// Renew restarts the lease from now with lease. Its error is the
	// client's, as Client.Acquire's (api.ErrNotHeld or api.ErrNotHolder:
	// the lock is no longer this hold's).
	Renew(ctx context.Context, lease time.Duration) error
	// Release ends the hold. Its error is the client's, as Renew's.
	Release(ctx context.Context) error
}

// ErrBadAnswer is what H1 returns for an answer the contract does not
// allow (a 200 without a token): a violation, not a fault's error.
var ErrBadAnswer = errors.New("history: an answer the contract does not allow")

// Official is the official client as a Loop's Client.
func Official(cl *api.Client) Client { return official{cl} }

type official struct{ cl *api.Client }

type officialLock struct{ *api.Lock }

func (l officialLock) Token() uint64 { return l.Lock.Token }

func (o official) Acquire(ctx context.Context, key string, r Request) (Held, error) {
	opts := []api.AcquireOption{api.WithLease(r.Lease), api.WithWait(r.Wait)}
	if r.Limit > 1 {
		opts = append(opts, api.WithLimit(r.Limit))
	}
	if r.Mode == api.ModeShared {
		opts = append(opts, api.WithShared())
	}
	if r.Owner != "" {
		opts = append(opts, api.WithOwner(r.Owner))
	}
	lk, err := o.cl.Acquire(ctx, key, opts...)
	if err != nil {
		return nil, err
	}
	return officialLock{lk}, nil
}

// H1 is a plain HTTP/1.1 client, as curl or a black-box checker is: one
// POST /locks/{key}?lease=&wait= per attempt with an Idempotency-Key kept
// across its retries, 307 redirects followed (net/http's own), a 503 or a
// failed connection retried on the next address, a poll_timeout repeated;
// releases and renewals retried every 200 ms for 5 s the same way. It keeps
// no connection state of its own: each call takes a pooled HTTP/1.1
// connection (HTTP/2 off), so a waiter is a connection parked on a node.
type H1 struct {
	addrs []string
	hc    *http.Client
	next  atomic.Uint64
	seq   atomic.Uint64
	id    string
	// Grace is how long an attempt may run past its wait before its node
	// is taken for silent and the next address is asked.
	Grace time.Duration
	// Text asks for text/plain answers (Accept: text/plain), as shell
	// scripts do: a grant's body is its token and a newline, which must
	// match its Lock-Token header; an error's body is "<code>: <message>".
	Text bool
}

// NewH1 returns an H1 over addrs (base URLs, http://host:port).
func NewH1(addrs []string) *H1 {
	var p http.Protocols
	p.SetHTTP1(true)
	tr := &http.Transport{Protocols: &p, MaxIdleConnsPerHost: 4}
	return &H1{addrs: addrs, hc: &http.Client{Transport: tr}, id: rand.Text(), Grace: 3 * time.Second}
}

// Close closes the idle connections.
func (c *H1) Close() { c.hc.CloseIdleConnections() }

// do sends one request to the next address (round robin), with a timeout
// of limit, and decodes the answer: a 200 into out, an error answer into
// an *api.StatusError. A failed connection comes back as it failed.
func (c *H1) do(ctx context.Context, method, path string, q url.Values, hdr http.Header, limit time.Duration, out any) error {
	base := c.addrs[(c.next.Add(1)-1)%uint64(len(c.addrs))]
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if c.Text {
		req.Header.Set("Accept", "text/plain")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return fmt.Errorf("%s %s: %d answer cut short: %w", method, base, resp.StatusCode, err)
	}
	if resp.StatusCode == http.StatusOK {
		return decode(method, base+path, c.Text, resp.Header, body, out)
	}
	var e api.Error
	if c.Text {
		code, msg, _ := strings.Cut(strings.TrimSpace(string(body)), ": ")
		e.Code, e.Message = code, msg
	} else {
		_ = json.Unmarshal(body, &e)
	}
	return &api.StatusError{StatusCode: resp.StatusCode, Code: e.Code, Message: e.Message, Field: e.Field}
}

// decode reads a 200's body into out: JSON, or with text a grant's token
// (out a *api.Grant), checked against the Lock-Token header, and nothing
// else.
func decode(method, where string, text bool, h http.Header, body []byte, out any) error {
	g, grant := out.(*api.Grant)
	if !text {
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("%w: %s %s: 200 %q: %v", ErrBadAnswer, method, where, body, err)
		}
		if grant && h.Get(api.HeaderLockToken) != strconv.FormatUint(g.Token, 10) {
			return fmt.Errorf("%w: %s %s: 200 %q with Lock-Token %q", ErrBadAnswer, method, where, body, h.Get(api.HeaderLockToken))
		}
		return nil
	}
	if !grant {
		return nil
	}
	tok, err := strconv.ParseUint(strings.TrimSuffix(string(body), "\n"), 10, 64)
	if err != nil || !strings.HasSuffix(string(body), "\n") || h.Get(api.HeaderLockToken) != strconv.FormatUint(tok, 10) {
		return fmt.Errorf("%w: %s %s: text 200 %q with Lock-Token %q", ErrBadAnswer, method, where, body, h.Get(api.HeaderLockToken))
	}
	g.Token = tok
	return nil
}

// retryable reports whether err may be retried on another address: a
// failed connection, a 503, or a poll_timeout (place kept).
func retryable(err error) bool {
	var se *api.StatusError
	if !errors.As(err, &se) {
		return !errors.Is(err, ErrBadAnswer)
	}
	return se.StatusCode == http.StatusServiceUnavailable || se.Code == api.CodePollTimeout || se.StatusCode == http.StatusTemporaryRedirect
}

func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }

// Acquire implements Client.
func (c *H1) Acquire(ctx context.Context, key string, r Request) (Held, error) {
	hdr := http.Header{api.HeaderIdempotencyKey: {c.id + "-" + strconv.FormatUint(c.seq.Add(1), 10)}}
	deadline := time.Now().Add(r.Wait)
	var last error
	for {
		// What is left of the wait; after it ran out over failed
		// attempts, the shortest wait learns the first attempts' outcome
		// (the same grant, or the same 408) under the same key.
		left := max(time.Until(deadline), time.Millisecond)
		q := url.Values{"lease": {seconds(r.Lease)}, "wait": {seconds(left)}}
		if r.Limit > 1 {
			q.Set("limit", strconv.Itoa(r.Limit))
		}
		if r.Mode != "" {
			q.Set("mode", r.Mode)
		}
		if r.Owner != "" {
			q.Set("owner", r.Owner)
		}
		var g api.Grant
		err := c.do(ctx, http.MethodPost, "/locks/"+url.PathEscape(key), q, hdr, left+c.Grace, &g)
		if err == nil && g.Token == 0 {
			err = fmt.Errorf("%w: POST /locks/%s: 200 with no token: %+v", ErrBadAnswer, key, g)
		}
		if err == nil {
			return &h1Lock{c: c, key: key, token: g.Token, expiry: g.ExpiresAt}, nil
		}
		if !retryable(err) || ctx.Err() != nil {
			if last != nil {
				return nil, fmt.Errorf("%w (before: %v)", err, last)
			}
			return nil, err
		}
		last = err
		var se *api.StatusError
		if !errors.As(err, &se) || se.Code != api.CodePollTimeout {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

var errPollTimeout = &api.StatusError{Code: api.CodePollTimeout}

type h1Lock struct {
	c     *H1
	key   string
	token uint64
	// expiry is the expires_at of the grant or of the latest renewal
	// answered (zero with Text: the body is the token alone).
	expiry time.Time
}

func (l *h1Lock) Token() uint64 { return l.token }

// Expiry is the expires_at the node announced for the grant or the latest
// renewal (zero when the answers were text: announcedEnd).
func (l *h1Lock) Expiry() time.Time { return l.expiry }

// call sends method (DELETE, PATCH) with q until an answer that is not
// retryable, every 200 ms for 5 s.
func (l *h1Lock) call(ctx context.Context, method string, q url.Values, out *json.RawMessage) error {
	q.Set("token", strconv.FormatUint(l.token, 10))
	end := time.Now().Add(5 * time.Second)
	var sent bool
	for {
		err := l.c.do(ctx, method, "/locks/"+url.PathEscape(l.key), q, nil, 2*time.Second, out)
		if err == nil || !retryable(err) || time.Now().After(end) || ctx.Err() != nil {
			var se *api.StatusError
			if method == http.MethodDelete && sent && errors.As(err, &se) && (errors.Is(err, api.ErrNotHeld) || errors.Is(err, api.ErrNotHolder)) {
				// An earlier attempt may have reached a node and ended
				// the hold: not a lost hold the checker may count (a
				// renewal that reached one ended nothing).
				return fmt.Errorf("%s after a retry: %s", method, se.Error())
			}
			return err
		}
		var se *api.StatusError
		// A 307 was not acted on; a failed connection may have been, and
		// so may a 503: a node may make a release its log then fails to
		// write, which the log writes once it recovers (api.Client.Release
		// counts a 5xx so too).
		sent = sent || !errors.As(err, &se) || se.StatusCode >= 500
		time.Sleep(200 * time.Millisecond)
	}
}

// Renew implements Held.
func (l *h1Lock) Renew(ctx context.Context, lease time.Duration) error {
	var out json.RawMessage
	err := l.call(ctx, http.MethodPatch, url.Values{"lease": {seconds(lease)}}, &out)
	var g api.Grant
	if err == nil && !l.c.Text && json.Unmarshal(out, &g) == nil {
		l.expiry = g.ExpiresAt
	}
	return err
}

// Release implements Held.
func (l *h1Lock) Release(ctx context.Context) error {
	var out json.RawMessage
	return l.call(ctx, http.MethodDelete, url.Values{}, &out)
}
