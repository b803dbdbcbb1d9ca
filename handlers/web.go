package handlers

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/buildinfo"
	"github.com/baton-io/baton/web"
)

// useCORS installs the CORS middleware first on r, before any route, so
// that preflights are answered whatever comes after (auth, redirects from a
// standby: a preflight may not be redirected or refused for want of a
// token).
func (s *Server) useCORS(r chi.Router) {
	c := newCORS(s.cfg.CORSOrigins)
	if c != nil {
		r.Use(c.Handler)
	}
	s.origins = newOriginGuard(c)
}

// mountWeb adds the status page (GET / and its assets), the JavaScript
// client (GET /baton.js, GET /baton.d.ts, GET /baton-node.js, GET
// /baton-node.d.ts), GET /cluster and GET /events.
//
// The annotation below documents GET / (served by web.Handler); the assets
// under /static/ are not part of the API document.
//
//	@Summary	The status page (HTML; open without a token, its data calls need one)
//	@Tags		operations
//	@Produce	html
//	@Success	200	{string}	string	"the page"
//	@Router		/ [get]
func (s *Server) mountWeb(r chi.Router) {
	page := web.Handler()
	get(r, "/", page.ServeHTTP)
	get(r, web.Prefix+"*", func(w http.ResponseWriter, r *http.Request) {
		// A file the page does not have is an unknown path like any
		// other (noRoute), not web's plain-text 404.
		if !web.Serves(r.URL.Path) {
			s.noRoute(w, r)
			return
		}
		page.ServeHTTP(w, r)
	})
	get(r, web.ClientPath, s.clientModule)
	get(r, web.ClientTypesPath, s.clientTypes)
	get(r, web.NodeClientPath, s.nodeClientModule)
	get(r, web.NodeClientTypesPath, s.nodeClientTypes)
	get(r, "/cluster", s.cluster)
	get(r, "/events", s.events)
}

// clientFiles serves the JavaScript client's files (web.ClientHandler).
var clientFiles = web.ClientHandler()

// clientModule is GET /baton.js: the official JavaScript client, an ES
// module (SPEC section 4). Open without a token (an import cannot send
// one), cacheable (ETag, Cache-Control: public, max-age=300), and with CORS
// headers for the origins in cors_origins, so that a page on another
// origin can import it.
//
//	@Summary	The JavaScript client, an ES module (import { Client } from "https://node/baton.js")
//	@Tags		operations
//	@Produce	text/javascript
//	@Success	200	{string}	string	"the module"
//	@Success	304	{string}	string	"If-None-Match matched its ETag"
//	@Router		/baton.js [get]
func (s *Server) clientModule(w http.ResponseWriter, r *http.Request) {
	clientFiles.ServeHTTP(w, r)
}

// clientTypes is GET /baton.d.ts: the TypeScript declarations of
// /baton.js, served like it.
//
//	@Summary	The TypeScript declarations of /baton.js
//	@Tags		operations
//	@Produce	application/typescript
//	@Success	200	{string}	string	"the declarations"
//	@Success	304	{string}	string	"If-None-Match matched its ETag"
//	@Router		/baton.d.ts [get]
func (s *Server) clientTypes(w http.ResponseWriter, r *http.Request) {
	clientFiles.ServeHTTP(w, r)
}

// nodeClientModule is GET /baton-node.js: the JavaScript client's Node
// entry (Node, Bun, Deno's node compatibility), baton.js over node:http2;
// it imports ./baton.js. Served like /baton.js.
//
//	@Summary	The JavaScript client's Node entry, over node:http2 (import { Client } from "./baton-node.js")
//	@Tags		operations
//	@Produce	text/javascript
//	@Success	200	{string}	string	"the module"
//	@Success	304	{string}	string	"If-None-Match matched its ETag"
//	@Router		/baton-node.js [get]
func (s *Server) nodeClientModule(w http.ResponseWriter, r *http.Request) {
	clientFiles.ServeHTTP(w, r)
}

// nodeClientTypes is GET /baton-node.d.ts: the TypeScript declarations of
// /baton-node.js, served like it.
//
//	@Summary	The TypeScript declarations of /baton-node.js
//	@Tags		operations
//	@Produce	application/typescript
//	@Success	200	{string}	string	"the declarations"
//	@Success	304	{string}	string	"If-None-Match matched its ETag"
//	@Router		/baton-node.d.ts [get]
func (s *Server) nodeClientTypes(w http.ResponseWriter, r *http.Request) {
	clientFiles.ServeHTTP(w, r)
}

// cluster is GET /cluster: this node's view of the cluster, from
// Config.Cluster, or for a single node: itself, active, the only peer.
//
//	@Summary	This node's view of the cluster
//	@Tags		cluster
//	@Produce	json
//	@Success	200	{object}	api.ClusterView
//	@Failure	400	{object}	api.Error	"a parameter or a body was given"
//	@Failure	401	{object}	api.Error	"auth_tokens is set and no valid bearer token was sent"
//	@Header	401	{string}	WWW-Authenticate	"a Bearer challenge (realm baton)"
//	@Security	BearerAuth
//	@Router		/cluster [get]
func (s *Server) cluster(w http.ResponseWriter, r *http.Request) {
	if err := noParams(w, r, "GET /cluster"); err != nil {
		s.writeError(w, r, err)
		return
	}
	var v api.ClusterView
	if s.cfg.Cluster != nil {
		v = s.cfg.Cluster()
	} else {
		v = s.singleNodeView()
	}
	b := buildinfo.Get()
	v.Build = api.Build{Version: b.Version, Commit: b.Commit, Go: b.Go}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) singleNodeView() api.ClusterView {
	now := time.Now().UTC()
	var last uint64
	if s.cfg.LastIndex != nil {
		last = s.cfg.LastIndex()
	}
	return api.ClusterView{
		Self:      s.cfg.Node,
		Role:      api.RoleActive,
		Active:    s.cfg.Node,
		Peers:     []api.PeerView{{URL: s.cfg.Node, Priority: 0, Role: api.RoleActive, Live: true, LastContact: &now, LastIndex: last}},
		LastToken: s.eng.LastToken(),
		LastIndex: last,
	}
}
