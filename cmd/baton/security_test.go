package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/baton-io/baton/internal/testproc"
)

func TestSecuritySettings(t *testing.T) {
	dir := t.TempDir()
	yml := filepath.Join(dir, "baton.yaml")
	if err := os.WriteFile(yml, []byte("auth_tokens: [y1, y2]\ncluster_secret: s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--data-dir", dir}
	for _, c := range []struct {
		name    string
		args    []string
		env     []string
		tokens  []string
		errName string // the key the error must start with
	}{
		{name: "none", tokens: nil},
		{name: "env, comma-separated", env: []string{"BATON_AUTH_TOKENS=a, b,,c"}, tokens: []string{"a", "b", "c"}},
		{name: "flag", args: []string{"--auth-tokens", "f1,f2"}, env: []string{"BATON_AUTH_TOKENS=e"}, tokens: []string{"f1", "f2"}},
		{name: "file", args: []string{"--config", yml}, tokens: []string{"y1", "y2"}},
		{name: "tls_cert without tls_key", args: []string{"--tls-cert", junk}, errName: "tls_key"},
		{name: "tls_key without tls_cert", args: []string{"--tls-key", junk}, errName: "tls_cert"},
		{name: "tls_cert not PEM", args: []string{"--tls-cert", junk, "--tls-key", junk}, errName: "tls_cert"},
		{name: "tls_key missing", args: []string{"--tls-cert", junk, "--tls-key", filepath.Join(dir, "nope.pem")}, errName: "tls_key"},
		{name: "cluster_secret with spaces", env: []string{"BATON_CLUSTER_SECRET= s "}, errName: "cluster_secret"},
		{name: "auth_tokens of commas only", env: []string{"BATON_AUTH_TOKENS=,"}, errName: "auth_tokens"},
		{name: "auth_tokens of blanks only", env: []string{"BATON_AUTH_TOKENS= "}, errName: "auth_tokens"},
		// A token with a space inside worked over HTTP but could never
		// pass a native AUTH line (fields are split at spaces); control
		// characters and non-ASCII cannot be sent in a header either.
		{name: "auth_tokens with a space inside", args: []string{"--auth-tokens", "a b"}, errName: "auth_tokens"},
		{name: "auth_tokens with a tab inside", env: []string{"BATON_AUTH_TOKENS=c\td"}, errName: "auth_tokens"},
		{name: "auth_tokens not ASCII", env: []string{"BATON_AUTH_TOKENS=jeton-é"}, errName: "auth_tokens"},
		{name: "admin_tokens with a space inside", args: []string{"--admin-tokens", "ad min"}, errName: "admin_tokens"},
		{name: "auth_tokens printable", args: []string{"--auth-tokens", "a-b.c_d~e+f/g=,x:y@z"}, tokens: []string{"a-b.c_d~e+f/g=", "x:y@z"}},
		{name: "cluster_secret with a newline", env: []string{"BATON_CLUSTER_SECRET=s\nt"}, errName: "cluster_secret"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := loadConfig(append(slices.Clone(base), c.args...), c.env)
			if c.errName != "" {
				if err == nil || !strings.HasPrefix(err.Error(), c.errName+":") {
					t.Fatalf("error %v, want one naming %s", err, c.errName)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.AuthTokens, c.tokens) && !(len(cfg.AuthTokens) == 0 && len(c.tokens) == 0) {
				t.Fatalf("auth_tokens %q, want %q", cfg.AuthTokens, c.tokens)
			}
		})
	}
}

// A token list of commas or blanks only is refused, naming the flag or
// the key, rather than taken as empty: that turned authentication off
// ("--auth-tokens ," served everyone) and let anyone force a release.
func TestTokensOfCommasOnlyRefused(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"--auth-tokens", " , "}, {"--admin-tokens", ","}} {
		if _, err := loadConfig([]string{"--data-dir", dir, args[0], args[1]}, nil); err == nil || !strings.Contains(err.Error(), `"`+args[0]+`" flag`) {
			t.Errorf("%s %q: %v, want an error naming %s", args[0], args[1], err, args[0])
		}
	}
	if _, err := loadConfig([]string{"--data-dir", dir, "--auth-tokens", ""}, nil); err != nil {
		t.Errorf(`--auth-tokens "": %v; an empty value is no authentication`, err)
	}
}

// admin_tokens (issue 14) load like auth_tokens; an empty entry is refused
// naming the key.
func TestAdminTokensSetting(t *testing.T) {
	dir := t.TempDir()
	cfg, err := loadConfig([]string{"--data-dir", dir, "--admin-tokens", "ops1, ops2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.AdminTokens, []string{"ops1", "ops2"}) {
		t.Fatalf("admin_tokens %q", cfg.AdminTokens)
	}
	yml := filepath.Join(dir, "baton.yaml")
	if err := os.WriteFile(yml, []byte("admin_tokens: [ops, \" \"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig([]string{"--data-dir", dir, "--config", yml}, nil); err == nil || !strings.HasPrefix(err.Error(), "admin_tokens:") {
		t.Fatalf("an empty entry: %v, want an error naming admin_tokens", err)
	}
}

// A node that serves TLS but advertises (and is listed in peers as)
// http:// started, and its peers' polls, plain HTTP to its TLS port, were
// answered 400: each side took the other for dead, both became active, and
// no log said why. It is refused at start, naming advertise. An https://
// advertise without tls_cert stays allowed (a TLS proxy in front).
func TestTLSNodeAdvertisingHTTPRefused(t *testing.T) {
	dir := t.TempDir()
	cert, key, _ := testproc.SelfSigned(t, dir)
	tls := []string{"--data-dir", dir, "--listen", "127.0.0.1:7070", "--tls-cert", cert, "--tls-key", key}
	for _, c := range []struct {
		args []string
		ok   bool
	}{
		{args: []string{"--advertise", "http://127.0.0.1:7070", "--peers", "http://127.0.0.1:7070,http://127.0.0.2:7070"}},
		{args: []string{"--advertise", "http://127.0.0.1:7070"}},
		{args: []string{"--advertise", "https://127.0.0.1:7070", "--peers", "https://127.0.0.1:7070,https://127.0.0.2:7070"}, ok: true},
		{args: nil, ok: true}, // derived: https://
	} {
		cfg, err := loadConfig(append(slices.Clone(tls), c.args...), nil)
		if c.ok {
			if err != nil {
				t.Fatalf("%v: %v", c.args, err)
			}
			if !strings.HasPrefix(cfg.Advertise, "https://") {
				t.Fatalf("%v: advertise %q", c.args, cfg.Advertise)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), "advertise:") || !strings.Contains(err.Error(), "https://") {
			t.Fatalf("%v: error %v, want one naming advertise and https://", c.args, err)
		}
	}
	// Without TLS, an https:// advertise (a TLS proxy in front) is kept.
	if _, err := loadConfig([]string{"--data-dir", dir, "--listen", "127.0.0.1:7070", "--advertise", "https://lock.example.com:443", "--peers", "https://lock.example.com:443"}, nil); err != nil {
		t.Fatalf("https advertise without tls_cert: %v", err)
	}
}

// An empty entry in a YAML list ("- " alone on its line, YAML's null) was
// read as the string "<nil>": in auth_tokens or admin_tokens, a bearer
// token anyone could send ("Authorization: Bearer <nil>" took and forced
// a lock). An empty entry of any list in the file is refused, naming the
// key and the entry.
func TestEmptyYAMLListEntryRefused(t *testing.T) {
	dir := t.TempDir()
	for _, text := range []string{
		"auth_tokens:\n  - tok1\n  - \n",
		"admin_tokens:\n  -\n",
		"auth_tokens: [tok1, \"\"]\n",
		"cors_origins:\n  - https://a.example\n  - ~\n",
	} {
		path := filepath.Join(dir, "baton.yaml")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadConfig([]string{"--data-dir", dir, "--config", path}, nil)
		if err == nil || !strings.Contains(err.Error(), "is empty") {
			t.Errorf("%q: error %v (auth_tokens %q, admin_tokens %q), want one saying an entry is empty", text, err, cfg.AuthTokens, cfg.AdminTokens)
		}
	}
}
