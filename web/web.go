// Package web is baton's status page and its JavaScript client: one HTML
// page, its script and its style sheet, and the client module baton.js with
// its types baton.d.ts (web/js), embedded in the binary so that they work
// offline and need nothing but the node that serves them.
//
// The page reads GET /cluster and GET /locks of the node it came from
// through baton.js (a standby answers reads from its replica, with
// Baton-Replica-Lag, which the page shows), and the GET /events stream, and
// shows the cluster, the locks and the recent events, live; until a listing
// succeeds it says "loading" or "unknown", never that no lock is held. With
// client auth it asks for the bearer token and keeps it in sessionStorage,
// sending it only as an Authorization header, never in a URL.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static js/baton.js js/baton.d.ts js/baton-node.js js/baton-node.d.ts
var files embed.FS

// Prefix is the path under which the page's assets are served; GET / is the
// page itself.
const Prefix = "/static/"

// contentSecurityPolicy lets the page load only its own files and talk to
// any node (a standby's page reads the locks from the active).
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src *; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

type asset struct {
	body  []byte
	ctype string
	etag  string
}

var assets = func() map[string]asset {
	m := map[string]asset{}
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ctype := mime.TypeByExtension(path.Ext(p))
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		m[p] = asset{body: b, ctype: ctype, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		panic("web: reading the embedded files: " + err.Error())
	}
	return m
}()

// Serves reports whether Handler serves path, a request's URL.Path: / (the
// page) and /static/{name} for each of the page's files. Handler answers
// any other path with Go's plain 404; a server with an error answer of its
// own asks Serves first and gives that instead.
func Serves(path string) bool {
	_, _, ok := pageFile(path)
	return ok
}

// pageFile returns the file Handler serves at path and its name, ok false
// for none: / is index.html, which no /static/ path serves.
func pageFile(path string) (name string, a asset, ok bool) {
	name, ok = "index.html", path == "/"
	if !ok {
		name, ok = strings.CutPrefix(path, Prefix)
	}
	if !ok || name == "index.html" && path != "/" {
		return "", asset{}, false
	}
	a, ok = assets["static/"+name]
	return name, a, ok
}

// Handler returns the handler of the page: GET / is the page, GET
// /static/{name} its files; anything else is 404 (see Serves). Answers
// carry an ETag (If-None-Match gives 304), Cache-Control: no-cache and a
// strict Content-Security-Policy.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, a, ok := pageFile(r.URL.Path)
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.ctype)
		h.Set("ETag", a.etag)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if name == "index.html" {
			h.Set("Content-Security-Policy", contentSecurityPolicy)
		}
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
	})
}

// Client paths: the official JavaScript client (SPEC section 4), an ES
// module, and its TypeScript declarations; and its Node entry,
// baton-node.js (the same client over node:http2, importing ./baton.js),
// with its declarations.
const (
	ClientPath          = "/baton.js"
	ClientTypesPath     = "/baton.d.ts"
	NodeClientPath      = "/baton-node.js"
	NodeClientTypesPath = "/baton-node.d.ts"
)

// clientMaxAge is how long, in seconds, a browser or a CDN may use its copy
// of the client without asking again; after that it revalidates with the
// ETag (304 when unchanged).
const clientMaxAge = 300

// ClientHandler serves the JavaScript client: GET /baton.js and
// /baton-node.js (Content-Type text/javascript), GET /baton.d.ts and
// /baton-node.d.ts (application/typescript), from the
// files embedded in the binary (web/js). Answers carry an ETag
// (If-None-Match gives 304) and Cache-Control: public, max-age=300. CORS
// headers, for an import from a page on another origin, come from the
// server's cors_origins middleware. Any other path is 404.
func ClientHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a asset
		switch r.URL.Path {
		case ClientPath:
			a = assets["js/baton.js"]
			a.ctype = "text/javascript; charset=utf-8"
		case ClientTypesPath:
			a = assets["js/baton.d.ts"]
			a.ctype = "application/typescript; charset=utf-8"
		case NodeClientPath:
			a = assets["js/baton-node.js"]
			a.ctype = "text/javascript; charset=utf-8"
		case NodeClientTypesPath:
			a = assets["js/baton-node.d.ts"]
			a.ctype = "application/typescript; charset=utf-8"
		default:
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.ctype)
		h.Set("ETag", a.etag)
		h.Set("Cache-Control", fmt.Sprintf("public, max-age=%d", clientMaxAge))
		h.Set("X-Content-Type-Options", "nosniff")
		http.ServeContent(w, r, path.Base(r.URL.Path), time.Time{}, bytes.NewReader(a.body))
	})
}
