package cluster

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"

	"github.com/baton-io/baton/api"
)

// HeaderSecret carries the cluster secret (Config.Secret) on peer requests:
// Node sets it on every request it sends to a peer, and Node.Handler
// requires it on every peer endpoint. Both halves of the check live here.
const HeaderSecret = "X-Baton-Cluster-Secret"

// requireSecret returns the middleware of the peer endpoints: a request
// whose HeaderSecret is not secret (compared in constant time, over
// SHA-256 digests so that lengths leak nothing) is answered 401
// {"error":"unauthorized"} and logged (without the secret) at warn level.
// An empty secret lets every request through: the cluster then runs
// without peer authentication.
func requireSecret(secret string, log *slog.Logger) func(http.Handler) http.Handler {
	want := sha256.Sum256([]byte(secret))
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
			log.Warn("refused peer request", "reason", reason, "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			writeJSON(w, http.StatusUnauthorized, api.Error{Code: api.CodeUnauthorized, Message: "peer request refused: " + reason + " (" + HeaderSecret + ")"})
		})
	}
}
