package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	env "github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"

	"github.com/baton-io/baton/cluster"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// serveConfig is the configuration of `baton serve` (SPEC section 5). Keys
// are flat; BATON_<KEY> in the environment, --key-with-dashes as a flag.
type serveConfig struct {
	Listen           string        `koanf:"listen"`
	Advertise        string        `koanf:"advertise"`
	DataDir          string        `koanf:"data_dir"`
	LeaseDefault     time.Duration `koanf:"lease_default"`
	LeaseMax         time.Duration `koanf:"lease_max"`
	WaitMax          time.Duration `koanf:"wait_max"`
	PollTimeout      time.Duration `koanf:"poll_timeout"`
	MaxKeys          int           `koanf:"max_keys"`
	MaxWaitersPerKey int           `koanf:"max_waiters_per_key"`
	MaxWaiters       int           `koanf:"max_waiters"`
	MaxBody          int64         `koanf:"max_body"`
	LogLevel         string        `koanf:"log_level"`
	AuthTokens       []string      `koanf:"auth_tokens"`
	ClusterSecret    string        `koanf:"cluster_secret"`
	TLSCert          string        `koanf:"tls_cert"`
	TLSKey           string        `koanf:"tls_key"`
	CORSOrigins      []string      `koanf:"cors_origins"`
	Peers            []string      `koanf:"peers"`
	Heartbeat        time.Duration `koanf:"heartbeat"`
	FailoverTimeout  time.Duration `koanf:"failover_timeout"`
	Pprof            bool          `koanf:"pprof"`
}

// settings describes every key: its default and its help text. The flag
// set, the environment and the config file are checked against it.
var settings = []struct {
	key, help string
	def       any
}{
	{"listen", "address to serve on", ":7070"},
	{"advertise", "this node's base URL (default: derived from listen)", ""},
	{"data_dir", "directory for the fencing-token high-water mark", "./baton-data"},
	{"lease_default", "lease when an acquire names none (Go duration)", 30 * time.Second},
	{"lease_max", "largest lease accepted", time.Hour},
	{"wait_max", "largest wait accepted; 0 = no cap", time.Duration(0)},
	{"poll_timeout", "end a long poll early with a resumable 408; 0 = never", time.Duration(0)},
	{"max_keys", "keys held or waited for at once", engine.DefaultConfig().MaxKeys},
	{"max_waiters_per_key", "waiters in one key's queue", engine.DefaultConfig().MaxWaitersPerKey},
	{"max_waiters", "waiters over all keys", engine.DefaultConfig().MaxWaiters},
	{"max_body", "largest request body, in bytes", int64(handlers.DefaultMaxBody)},
	{"log_level", "debug, info, warn or error", "info"},
	{"pprof", "serve Go profiles under /debug/pprof/ (behind auth_tokens)", false},
	{"auth_tokens", "bearer tokens accepted from clients, comma-separated; empty = no auth", []string{}},
	{"cluster_secret", "shared secret for peer endpoints (X-Baton-Cluster-Secret)", ""},
	{"tls_cert", "PEM certificate file: serve HTTPS (HTTP/2 by ALPN)", ""},
	{"tls_key", "PEM private key file for tls_cert", ""},
	{"cors_origins", "origins whose pages may call from browsers, comma-separated (scheme://host[:port], or *); empty = none", []string{}},
	{"peers", "ordered node base URLs, this node among them (first = highest priority), comma-separated; empty = single node", []string{}},
	{"heartbeat", "interval of peer status polls and replication heartbeats", cluster.DefaultHeartbeat},
	{"failover_timeout", "silence after which a peer counts as dead and a standby takes over", cluster.DefaultFailoverTimeout},
}

func known(key string) bool {
	return slices.ContainsFunc(settings, func(s struct {
		key, help string
		def       any
	}) bool {
		return s.key == key
	})
}

// loadConfig builds the configuration from, in rising precedence: defaults,
// the YAML file named by --config or BATON_CONFIG, the environment, flags.
// An unknown key in the file, a malformed value or an invalid setting is an
// error that names the key.
func loadConfig(args []string, environ []string) (serveConfig, error) {
	fs := pflag.NewFlagSet("baton serve", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.String("config", "", "YAML config file (env BATON_CONFIG)")
	for _, s := range settings {
		name := strings.ReplaceAll(s.key, "_", "-")
		help := fmt.Sprintf("%s (env BATON_%s)", s.help, strings.ToUpper(s.key))
		switch d := s.def.(type) {
		case string:
			fs.String(name, d, help)
		case time.Duration:
			fs.Duration(name, d, help)
		case int:
			fs.Int(name, d, help)
		case int64:
			fs.Int64(name, d, help)
		case []string:
			fs.StringSlice(name, d, help)
		case bool:
			fs.Bool(name, d, help)
		}
	}
	if err := fs.Parse(args); err != nil {
		return serveConfig{}, err
	}
	if fs.NArg() > 0 {
		return serveConfig{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}

	ko := koanf.New(".")
	defaults := map[string]any{}
	for _, s := range settings {
		defaults[s.key] = s.def
	}
	_ = ko.Load(confmap.Provider(defaults, "."), nil)

	path, _ := fs.GetString("config")
	if path == "" {
		path = lookupEnv(environ, "BATON_CONFIG")
	}
	if path != "" {
		fk := koanf.New(".")
		if err := fk.Load(file.Provider(path), yaml.Parser()); err != nil {
			return serveConfig{}, fmt.Errorf("config: %s: %w", path, err)
		}
		keys := fk.Keys()
		sort.Strings(keys)
		for _, k := range keys {
			if !known(k) {
				return serveConfig{}, fmt.Errorf("config: %s: unknown setting %q", path, k)
			}
		}
		_ = ko.Merge(fk)
	}
	_ = ko.Load(env.Provider(".", env.Opt{
		Prefix:      "BATON_",
		EnvironFunc: func() []string { return environ },
		TransformFunc: func(k, v string) (string, any) {
			k = strings.ToLower(strings.TrimPrefix(k, "BATON_"))
			if !known(k) {
				return "", nil // BATON_ADDR and friends belong to the client
			}
			if isList(k) {
				return k, splitList(v)
			}
			return k, v
		},
	}), nil)
	_ = ko.Load(posflag.ProviderWithFlag(fs, ".", ko, func(f *pflag.Flag) (string, any) {
		if f.Name == "config" {
			return "", nil
		}
		return strings.ReplaceAll(f.Name, "-", "_"), posflag.FlagVal(fs, f)
	}), nil)

	var c serveConfig
	if err := ko.UnmarshalWithConf("", &c, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	return c, c.validate()
}

func lookupEnv(environ []string, name string) string {
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// validate checks what the components do not: addresses and sizes. The
// engine's Config.Validate checks the rest and names the key too.
func (c *serveConfig) validate() error {
	if err := c.validateSecurity(); err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("listen: %q is not host:port: %v", c.Listen, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("listen: %q has no valid port (0 to 65535): %v", c.Listen, err)
	}
	if c.Advertise == "" {
		if host == "" || host == "0.0.0.0" || host == "::" {
			host, _ = os.Hostname()
			if host == "" {
				host = "127.0.0.1"
			}
		}
		c.Advertise = c.scheme() + "://" + net.JoinHostPort(host, port)
	}
	if u, err := url.Parse(c.Advertise); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("advertise: %q is not an http(s) base URL", c.Advertise)
	}
	c.Advertise = strings.TrimRight(c.Advertise, "/")
	if len(c.Peers) > 0 {
		for i, p := range c.Peers {
			c.Peers[i] = strings.TrimRight(strings.TrimSpace(p), "/")
		}
		cc := c.clusterConfig()
		if err := cc.Validate(); err != nil {
			return err
		}
	}
	if c.DataDir == "" {
		return errors.New("data_dir: must not be empty (the fencing-token high-water mark lives there)")
	}
	if c.MaxBody < 64 {
		return fmt.Errorf("max_body: must be at least 64 bytes, got %d", c.MaxBody)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log_level: must be debug, info, warn or error, got %q", c.LogLevel)
	}
	if err := handlers.ValidateCORSOrigins(c.CORSOrigins); err != nil {
		return fmt.Errorf("cors_origins: %w", err)
	}
	return c.engineConfig().Validate()
}

func (c *serveConfig) engineConfig() engine.Config {
	ec := engine.DefaultConfig()
	ec.DataDir = c.DataDir
	ec.LeaseDefault = c.LeaseDefault
	ec.LeaseMax = c.LeaseMax
	ec.WaitMax = c.WaitMax
	ec.PollTimeout = c.PollTimeout
	ec.MaxKeys = c.MaxKeys
	ec.MaxWaitersPerKey = c.MaxWaitersPerKey
	ec.MaxWaiters = c.MaxWaiters
	return ec
}

func (c *serveConfig) clusterConfig() cluster.Config {
	return cluster.Config{
		Self:            c.Advertise,
		Peers:           c.Peers,
		Heartbeat:       c.Heartbeat,
		FailoverTimeout: c.FailoverTimeout,
		Secret:          c.ClusterSecret,
	}
}
