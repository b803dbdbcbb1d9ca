package cluster

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/baton-io/baton/api"
)

// HeaderSecret carries the cluster secret (Config.Secret) on peer requests:
// Node sets it on every request it sends to a peer, and Node.Handler
// requires it on every peer endpoint. Both halves of the check live here.
const HeaderSecret = "X-Baton-Cluster-Secret"

// requireSecret returns the middleware of the peer endpoints: a request
// whose HeaderSecret is not secret (compared in constant time, over
// SHA-256 digests so that lengths leak nothing) is answered 401
// {"error":"unauthorized"} and logged (without the secret) at warn level,
// once a minute per remote host and reason (refusalLog). An empty secret
// lets every request through: the cluster then runs without peer
// authentication.
func requireSecret(secret string, log *slog.Logger) func(http.Handler) http.Handler {
	return requireSecretAt(secret, log, time.Now)
}

// requireSecretAt is requireSecret with the clock of its log's rate limit.
func requireSecretAt(secret string, log *slog.Logger, now func() time.Time) func(http.Handler) http.Handler {
	want := sha256.Sum256([]byte(secret))
	refusals := &refusalLog{log: log, now: now, last: map[string]*refusal{}}
	return func(next http.Handler) http.Handler {
		if secret == "" {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got := sha256.Sum256([]byte(r.Header.Get(HeaderSecret)))
			if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
				next.ServeHTTP(w, r)
				return
			}
			reason := "wrong cluster secret"
			if r.Header.Get(HeaderSecret) == "" {
				reason = "no cluster secret"
			}
			refusals.warn(reason, r)
			writeJSON(w, http.StatusUnauthorized, api.Error{Code: api.CodeUnauthorized, Message: "peer request refused: " + reason + " (" + HeaderSecret + ")"})
		})
	}
}

// refusalEvery is how often a refusal of the same remote host for the same
// reason is logged: a peer with another secret polls every heartbeat, and
// every poll is refused (ten lines a second from a three-node cluster).
const refusalEvery = time.Minute

// refusalLog logs refused peer requests, the first of each (remote host,
// reason) and then at most one per refusalEvery, with the count of those
// left out since the last line.
type refusalLog struct {
	log  *slog.Logger
	now  func() time.Time
	mu   sync.Mutex
	last map[string]*refusal // by host and reason
}

type refusal struct {
	at         time.Time // when the last line was logged
	suppressed int       // refusals since, not logged
}

func (l *refusalLog) warn(reason string, r *http.Request) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	key := host + " " + reason
	now := l.now()
	l.mu.Lock()
	e := l.last[key]
	if e != nil && now.Sub(e.at) < refusalEvery {
		e.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := 0
	if e != nil {
		suppressed = e.suppressed
	}
	if len(l.last) >= 1024 {
		clear(l.last) // many hosts: forget them rather than grow
	}
	l.last[key] = &refusal{at: now}
	l.mu.Unlock()
	l.log.Warn("refused peer request", "reason", reason, "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "suppressed", suppressed)
}
