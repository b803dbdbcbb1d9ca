package handlers

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/baton-io/baton/openapi"
)

// The general information of the OpenAPI document; swag reads it from this
// file (scripts/openapi.sh passes it as --generalInfo).
//
//	@title						baton
//	@version					1
//	@description				A distributed lock service: named locks over HTTP/JSON, a long-poll acquire, fencing tokens. Durations are seconds (decimals allowed). Every error body is {"error": "<code>", "message": "<sentence>"}; a 400 names the offending field in "field".
//	@BasePath					/
//	@schemes					http https
//	@securityDefinitions.apikey	BearerAuth
//	@in							header
//	@name						Authorization
//	@description				"Bearer <token>", one of the node's auth_tokens (only when auth_tokens is set).

// initOps sets up what this file and its neighbours add to the router:
// bearer-token authentication (auth.go), /metrics (metrics.go) and
// /openapi.json. New calls it before any route is added.
func (s *Server) initOps(r chi.Router) {
	if s.cfg.Metrics == nil {
		s.cfg.Metrics = NewMetrics()
	}
	s.metrics = s.cfg.Metrics
	s.metrics.bind(s.eng, s.cfg.Gate)
	s.onError = s.metrics.countError
	s.auth = newTokenSet(s.cfg.AuthTokens)
	s.admin = newTokenSet(s.cfg.AdminTokens)
	if s.auth != nil {
		// Without tokens the middleware would only pass requests on: it
		// is left out, one frame less on every parked request's stack.
		r.Use(s.authenticate)
	}
	get(r, "/metrics", s.serveMetrics)
	get(r, "/openapi.json", s.serveOpenAPI)
}

// serveOpenAPI is GET /openapi.json.
//
//	@Summary	This document
//	@Tags		operations
//	@Produce	json
//	@Success	200	{object}	map[string]any	"the OpenAPI (Swagger 2.0) document"
//	@Router		/openapi.json [get]
func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(openapi.JSON)))
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(openapi.JSON)
}
