package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"strings"
)

// This file holds the settings of issue 6 that config.go and serve.go only
// call: auth_tokens, cluster_secret, tls_cert and tls_key.

// validateSecurity checks auth_tokens, cluster_secret, tls_cert and
// tls_key; a TLS pair that cannot be loaded is refused naming the key.
func (c *serveConfig) validateSecurity() error {
	for i, t := range c.AuthTokens {
		c.AuthTokens[i] = strings.TrimSpace(t)
		if err := checkToken(c.AuthTokens[i]); err != nil {
			return fmt.Errorf("auth_tokens: entry %d %v", i+1, err)
		}
	}
	for i, t := range c.AdminTokens {
		c.AdminTokens[i] = strings.TrimSpace(t)
		if err := checkToken(c.AdminTokens[i]); err != nil {
			return fmt.Errorf("admin_tokens: entry %d %v", i+1, err)
		}
	}
	if strings.TrimSpace(c.ClusterSecret) != c.ClusterSecret {
		return fmt.Errorf("cluster_secret: must not start or end with white space")
	}
	if i := strings.IndexFunc(c.ClusterSecret, func(r rune) bool { return r < 0x20 || r == 0x7f }); i >= 0 {
		return fmt.Errorf("cluster_secret: has the control character %U at byte %d: it cannot be sent in the X-Baton-Cluster-Secret header", c.ClusterSecret[i], i)
	}
	switch {
	case c.TLSCert == "" && c.TLSKey == "":
		return nil
	case c.TLSCert == "":
		return fmt.Errorf("tls_cert: must be set when tls_key is")
	case c.TLSKey == "":
		return fmt.Errorf("tls_key: must be set when tls_cert is")
	}
	_, err := c.tlsConfig()
	return err
}

// securityWarnings returns what a node started with c should warn about at
// start, one message per entry (none when nothing): auth_tokens guard the
// lock API but not the peer endpoints (/_cluster/...), which only
// cluster_secret guards, so a cluster with auth_tokens and no
// cluster_secret lets anyone who reaches a port read every lock and token
// from the replication stream and ask for a handoff.
//
// A node without auth_tokens whose listen or native_listen is beyond the
// loopback interface (the default ":7070" is every interface) lets anyone
// who reaches it take, release and force-release every lock: it is
// warned about too, as Redis's protected mode and etcd's insecure
// listeners are, but it starts (a private network may be all the
// protection it needs).
func (c *serveConfig) securityWarnings() []string {
	var w []string
	if len(c.Peers) > 0 && len(c.AuthTokens) > 0 && c.ClusterSecret == "" {
		w = append(w, "auth_tokens is set but cluster_secret is not: the peer endpoints (/_cluster/...) answer anyone who reaches this port, replication stream and handoffs included; set the same cluster_secret on every node")
	}
	if len(c.AuthTokens) == 0 {
		for _, a := range []string{c.Listen, c.NativeListen} {
			if a != "" && !loopbackOnly(a) {
				w = append(w, fmt.Sprintf("auth_tokens is empty and %q is not a loopback address: anyone who reaches it may take, release and force-release every lock; set auth_tokens, or listen on 127.0.0.1", a))
			}
		}
	}
	return w
}

// loopbackOnly reports whether the listen address hostport (host:port,
// already validated) takes connections from this machine only: its host
// is "localhost" or a loopback IP. An empty host, an unspecified address
// (0.0.0.0, ::) or any other name or address is every interface, or may
// be reached from elsewhere.
func loopbackOnly(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkToken reports why t cannot be a bearer token (an entry of
// auth_tokens or admin_tokens): a client sends it as "Authorization:
// Bearer <t>" and, over the native protocol, as the one field of "AUTH
// <t>", so it must be printable ASCII without spaces (a space split the
// AUTH line, and that token could never authenticate there).
func checkToken(t string) error {
	if t == "" {
		return fmt.Errorf("is empty")
	}
	for i := 0; i < len(t); i++ {
		if t[i] < 0x21 || t[i] > 0x7e {
			return fmt.Errorf("has the byte %#02x at %d: a token is printable ASCII without spaces (it is sent as Bearer <token> and as AUTH <token>)", t[i], i)
		}
	}
	return nil
}

// tlsConfig loads tls_cert and tls_key; nil without TLS. The server adds
// h2 and http/1.1 to NextProtos itself (ALPN).
func (c *serveConfig) tlsConfig() (*tls.Config, error) {
	if c.TLSCert == "" {
		return nil, nil
	}
	certPEM, err := os.ReadFile(c.TLSCert)
	if err != nil {
		return nil, fmt.Errorf("tls_cert: cannot read the certificate: %v", err)
	}
	keyPEM, err := os.ReadFile(c.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("tls_key: cannot read the private key: %v", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// The certificate is parsed first: an error about it names
		// tls_cert; one about the key, or a pair that does not match,
		// names tls_key.
		name := "tls_key"
		if strings.Contains(err.Error(), "certificate input") || strings.Contains(err.Error(), "x509:") {
			name = "tls_cert"
		}
		return nil, fmt.Errorf("%s: cannot use the TLS certificate %q with the key %q: %v", name, c.TLSCert, c.TLSKey, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// scheme is "https" when this node serves TLS, else "http".
func (c *serveConfig) scheme() string {
	if c.TLSCert != "" {
		return "https"
	}
	return "http"
}

// splitList splits a comma-separated environment value into a list,
// dropping empty entries.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
