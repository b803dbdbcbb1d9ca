// Package web is baton's status page: one HTML page, its script and its
// style sheet, embedded in the binary so that the page works offline and
// needs nothing but the node that serves it.
//
// The page reads GET /cluster, GET /locks and the GET /events stream of the
// node it came from (or, on a standby, of the active that /cluster names),
// and shows the cluster, the locks and the recent events, live. With client
// auth it asks for the bearer token and keeps it in sessionStorage, sending
// it only as an Authorization header, never in a URL.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
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
	err := fs.WalkDir(files, "static", func(p string, d fs.DirEntry, err error) error {
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
		m[strings.TrimPrefix(p, "static/")] = asset{body: b, ctype: ctype, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		panic("web: reading the embedded files: " + err.Error())
	}
	return m
}()

// Handler returns the handler of the page: GET / is the page, GET
// /static/{name} its files; anything else is 404. Answers carry an ETag
// (If-None-Match gives 304), Cache-Control: no-cache and a strict
// Content-Security-Policy.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := "index.html", r.URL.Path == "/"
		if !ok {
			name, ok = strings.CutPrefix(r.URL.Path, Prefix)
		}
		a, found := assets[name]
		if !ok || !found || name == "index.html" && r.URL.Path != "/" {
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
