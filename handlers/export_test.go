package handlers

import "net/http"

// BehindOriginGuard returns h behind s's refusal of cross-origin writes
// (originGuard), which ServeHTTP applies before it routes: the chain a
// request to s goes through, for comparing s with its Router.
func (s *Server) BehindOriginGuard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.refusedCrossOrigin(w, r) {
			h.ServeHTTP(w, r)
		}
	})
}
