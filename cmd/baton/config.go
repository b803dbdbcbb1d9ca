package main

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/cluster"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/wal"
)

// serveConfig is the configuration of `baton serve` (SPEC section 5). Keys
// are flat; BATON_<KEY> in the environment, --key-with-dashes as a flag.
type serveConfig struct {
	Listen           string        `koanf:"listen"`
	Advertise        string        `koanf:"advertise"`
	DataDir          string        `koanf:"data_dir"`
	Fsync            string        `koanf:"fsync"`
	FsyncInterval    time.Duration `koanf:"fsync_interval"`
	RepairLog        bool          `koanf:"repair_log"`
	LeaseDefault     time.Duration `koanf:"lease_default"`
	LeaseMax         time.Duration `koanf:"lease_max"`
	WaitMax          time.Duration `koanf:"wait_max"`
	PollTimeout      time.Duration `koanf:"poll_timeout"`
	MaxKeys          int           `koanf:"max_keys"`
	MaxWaitersPerKey int           `koanf:"max_waiters_per_key"`
	MaxWaiters       int           `koanf:"max_waiters"`
	MaxBody          int64         `koanf:"max_body"`
	LogLevel         string        `koanf:"log_level"`
	LogFormat        string        `koanf:"log_format"`
	AuthTokens       []string      `koanf:"auth_tokens"`
	AdminTokens      []string      `koanf:"admin_tokens"`
	ClusterSecret    string        `koanf:"cluster_secret"`
	TLSCert          string        `koanf:"tls_cert"`
	TLSKey           string        `koanf:"tls_key"`
	CORSOrigins      []string      `koanf:"cors_origins"`
	Peers            []string      `koanf:"peers"`
	Heartbeat        time.Duration `koanf:"heartbeat"`
	FailoverTimeout  time.Duration `koanf:"failover_timeout"`
	SyncStandbys     int           `koanf:"sync_standbys"`
	SyncTimeout      time.Duration `koanf:"sync_timeout"`
	Pprof            bool          `koanf:"pprof"`
	NativeListen     string        `koanf:"native_listen"`
}

// settings describes every key: its default and its help text. The flag
// set, the environment and the config file are checked against it.
var settings = []struct {
	key, help string
	def       any
}{
	{"listen", "address to serve on", ":7070"},
	{"advertise", "this node's base URL (default: derived from listen)", ""},
	{"native_listen", "address of the native protocol (SPEC 2b; TLS when tls_cert is set); empty = off", ""},
	{"data_dir", "directory of the log of changes, its snapshots and the fencing-token high-water mark", "./baton-data"},
	{"fsync", "when the log is flushed to the disk: always (before the answer), interval (in the background) or never (left to the OS)", "interval"},
	{"fsync_interval", "with fsync interval: the longest time between a write and its fsync (at most 100ms)", maxFsyncInterval},
	{"repair_log", "start even if the log is damaged: keep the records before the damage, drop it and all after it; a corrupt token-hwm is dropped", false},
	{"lease_default", "lease when an acquire names none (Go duration)", 30 * time.Second},
	{"lease_max", "largest lease accepted", time.Hour},
	{"wait_max", "largest wait accepted; 0 = no cap", time.Duration(0)},
	{"poll_timeout", "end a long poll early with a resumable 408; 0 = never, else at least 100ms", time.Duration(0)},
	{"max_keys", "keys held or waited for at once", engine.DefaultConfig().MaxKeys},
	{"max_waiters_per_key", "waiters in one key's queue", engine.DefaultConfig().MaxWaitersPerKey},
	{"max_waiters", "waiters over all keys", engine.DefaultConfig().MaxWaiters},
	{"max_body", "largest request body, in bytes", int64(handlers.DefaultMaxBody)},
	{"log_level", "debug, info, warn or error", "info"},
	{"log_format", "text (key=value lines) or json (one JSON object a line)", "text"},
	{"pprof", "serve Go profiles under /debug/pprof/ (behind auth_tokens)", false},
	{"auth_tokens", "bearer tokens accepted from clients, comma-separated; empty = no auth", []string{}},
	{"admin_tokens", "bearer tokens that may also force a release (DELETE ?force=true), comma-separated; when set, or when auth_tokens is, only they may", []string{}},
	{"cluster_secret", "shared secret for peer endpoints (X-Baton-Cluster-Secret)", ""},
	{"tls_cert", "PEM certificate file: serve HTTPS (HTTP/2 by ALPN)", ""},
	{"tls_key", "PEM private key file for tls_cert", ""},
	{"cors_origins", "origins whose pages may call from browsers, comma-separated (scheme://host[:port], or *); empty = none", []string{}},
	{"peers", "ordered node base URLs, this node among them (first = highest priority), comma-separated, at most " + strconv.Itoa(cluster.MaxPeers) + "; empty = single node", []string{}},
	{"heartbeat", "interval of peer status polls and replication heartbeats", cluster.DefaultHeartbeat},
	{"failover_timeout", "silence after which a peer counts as dead and a standby takes over", cluster.DefaultFailoverTimeout},
	{"sync_standbys", "standbys that must have written a grant, renew or release to their logs before it is answered; 0 = asynchronous replication", 0},
	{"sync_timeout", "how long a change waits for sync_standbys before the active goes on without them (degraded, until they are back)", cluster.DefaultSyncTimeout},
}

// setting returns the description of key, and whether it is one.
func setting(key string) (def any, ok bool) {
	for _, s := range settings {
		if s.key == key {
			return s.def, true
		}
	}
	return nil, false
}

func known(key string) bool {
	_, ok := setting(key)
	return ok
}

// The variables `baton run` sets for its COMMAND.
const (
	envRunKey   = "BATON_KEY"
	envRunToken = "BATON_TOKEN"
)

// clientEnv are the BATON_* variables of the command-line client and of
// `baton run`'s COMMAND (api.EnvAddr, api.EnvAuthToken, BATON_KEY,
// BATON_TOKEN), plus BATON_CONFIG: `baton serve` ignores them; any other
// BATON_* variable that names no setting stops the start.
var clientEnv = map[string]bool{
	api.EnvAddr: true, api.EnvAuthToken: true, envRunKey: true, envRunToken: true,
	"BATON_CONFIG": true,
}

// configError is a setting that cannot be used: it names the key, the value
// as given and where it came from.
type configError struct {
	key, value, source, problem string
}

func (e *configError) Error() string {
	return fmt.Sprintf("%s: %q from %s: %s", e.key, e.value, e.source, e.problem)
}

// origin is where a setting's value came from, and the value as given.
type origin struct {
	source string // "the default", "file F", "environment variable BATON_K", "flag --k"
	raw    string
}

// loadConfig builds the configuration from, in rising precedence: defaults,
// the YAML file named by --config or BATON_CONFIG, the environment, flags.
// An unknown key in the file, an unknown BATON_* variable, a malformed value
// (a bare number for a duration among them) or an invalid setting is an
// error that names the key, the value and where it came from.
func loadConfig(args []string, environ []string) (serveConfig, error) {
	fs := pflag.NewFlagSet("baton serve", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.String("config", "", "YAML config file (env BATON_CONFIG)")
	for _, s := range settings {
		name := strings.ReplaceAll(s.key, "_", "-")
		help := fmt.Sprintf("%s (env BATON_%s)", s.help, strings.ToUpper(s.key))
		f := fs.VarPF(&settingFlag{key: s.key, def: s.def, text: formatValue(s.def)}, name, "", help)
		if _, ok := s.def.(bool); ok {
			f.NoOptDefVal = "true"
		}
	}
	fs.Usage = func() { printHelp(os.Stdout, "serve", fs) }
	if err := fs.Parse(args); err != nil {
		return serveConfig{}, err
	}
	if fs.NArg() > 0 {
		return serveConfig{}, fmt.Errorf("unexpected argument %q (settings are flags: --key value)", fs.Arg(0))
	}

	values := map[string]any{}
	origins := map[string]origin{}
	for _, s := range settings {
		values[s.key] = s.def
		origins[s.key] = origin{source: "the default", raw: formatValue(s.def)}
	}
	set := func(key string, raw any, o origin) error {
		if raw == nil {
			// "key:", "key: ~" or "key: null" in YAML: a list left
			// empty is an empty list (every list's default); any other
			// setting left empty is a mistake to name, not its default
			// (an empty sync_standbys ran without synchronous standbys,
			// unsaid).
			if _, list := values[key].([]string); list {
				return nil
			}
			return &configError{key: key, value: "", source: o.source, problem: "has no value: give one, or leave the key out for its default (" + formatValue(values[key]) + ")"}
		}
		v, problem := convert(values[key], raw)
		if problem != "" {
			return &configError{key: key, value: o.raw, source: o.source, problem: problem}
		}
		values[key], origins[key] = v, o
		return nil
	}

	path, _ := fs.GetString("config")
	if path == "" {
		path = lookupEnv(environ, "BATON_CONFIG")
	}
	if path != "" {
		fk := koanf.New(".")
		if err := fk.Load(file.Provider(path), yaml.Parser()); err != nil {
			return serveConfig{}, fmt.Errorf("config: %s: %w", path, err)
		}
		if n := yamlDocuments(path); n > 1 {
			// The parser reads the first document alone: the settings
			// after a "---" were dropped without a word.
			return serveConfig{}, fmt.Errorf("config: %s: holds %d YAML documents (separated by ---); baton reads one: merge them", path, n)
		}
		raw := fk.Raw()
		keys := make([]string, 0, len(raw))
		for k := range raw {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !known(k) {
				return serveConfig{}, fmt.Errorf("config: %s: unknown setting %q", path, k)
			}
			if err := set(k, raw[k], origin{source: "file " + path, raw: formatValue(raw[k])}); err != nil {
				return serveConfig{}, err
			}
		}
	}
	var env []string
	for _, kv := range environ {
		if strings.HasPrefix(kv, "BATON_") {
			env = append(env, kv)
		}
	}
	sort.Strings(env)
	for _, kv := range env {
		name, v, _ := strings.Cut(kv, "=")
		if clientEnv[name] {
			continue
		}
		k := strings.ToLower(strings.TrimPrefix(name, "BATON_"))
		if !known(k) {
			return serveConfig{}, fmt.Errorf("environment variable %s names no setting (settings: baton serve --help; client variables: %s, %s)", name, api.EnvAddr, api.EnvAuthToken)
		}
		if err := set(k, v, origin{source: "environment variable " + name, raw: v}); err != nil {
			return serveConfig{}, err
		}
	}
	var ferr error
	fs.Visit(func(f *pflag.Flag) {
		sf, ok := f.Value.(*settingFlag)
		if !ok || ferr != nil {
			return
		}
		ferr = set(sf.key, sf.text, origin{source: "flag --" + f.Name, raw: sf.text})
	})
	if ferr != nil {
		return serveConfig{}, ferr
	}

	ko := koanf.New(".")
	_ = ko.Load(confmap.Provider(values, "."), nil)
	var c serveConfig
	if err := ko.UnmarshalWithConf("", &c, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	if err := c.validate(); err != nil {
		return c, withOrigin(err, origins)
	}
	return c, nil
}

// withOrigin adds to a validation error that starts with a key ("lease_max:
// ...") the value and the source of that key, or that it was not set.
func withOrigin(err error, origins map[string]origin) error {
	key, _, ok := strings.Cut(err.Error(), ":")
	o, found := origins[key]
	if !ok || !found {
		return err
	}
	if o.raw == "" && o.source == "the default" {
		// Left out: its empty default says nothing; its help says what
		// it becomes ("advertise not set: derived from listen").
		for _, s := range settings {
			if _, d, ok := strings.Cut(s.help, "(default: "); ok && s.key == key {
				return fmt.Errorf("%w (%s not set: %s", err, key, d)
			}
		}
		return fmt.Errorf("%w (%s not set)", err, key)
	}
	return fmt.Errorf("%w (%s = %q from %s)", err, key, o.raw, o.source)
}

// yamlDocuments counts the non-empty documents of the YAML file at path
// (one that cannot be read or parsed counts as the one the parser
// reported on).
func yamlDocuments(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 1
	}
	dec := yamlv3.NewDecoder(bytes.NewReader(b))
	n := 0
	for {
		var doc any
		if err := dec.Decode(&doc); err != nil {
			return max(n, 1)
		}
		if doc != nil { // an empty document ("---" at the end) sets nothing
			n++
		}
	}
}

// settingFlag is the flag of one setting. It keeps the text as given, so
// that the flag goes through the same conversion as the file and the
// environment; Set refuses what that conversion refuses.
type settingFlag struct {
	key  string
	def  any
	text string
}

func (f *settingFlag) String() string { return f.text }

func (f *settingFlag) Set(s string) error {
	if _, problem := convert(f.def, s); problem != "" {
		return errors.New(problem)
	}
	f.text = s
	return nil
}

func (f *settingFlag) Type() string {
	switch f.def.(type) {
	case time.Duration:
		return "duration"
	case int, int64:
		return "int"
	case bool:
		return "bool"
	case []string:
		return "list"
	}
	return "string"
}

// formatValue prints a setting's value as a user would write it.
func formatValue(v any) string {
	switch v := v.(type) {
	case []string:
		return strings.Join(v, ",")
	case []any: // a YAML list, written back as one
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = formatValue(x)
			if s, ok := x.(string); ok && (s == "" || s != strings.TrimSpace(s) || strings.ContainsAny(s, `,[]{}:"`)) {
				// Quoted as YAML would need it: [""] read "[]", an
				// empty list, which is not what was given.
				parts[i] = strconv.Quote(s)
			}
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any: // a YAML mapping, written back as one
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ": " + formatValue(v[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case time.Duration:
		return formatDuration(v)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// formatDuration writes d as a user would: "0", "30s", "1h", "1m30s".
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// useDuration ends every problem convert finds with a duration setting.
const useDuration = "; use a duration such as 15s"

// convert turns raw (a string from a flag or the environment, or a YAML
// value) into the type of def, the setting's default. problem is "" on
// success, else what is wrong with raw. A bare number is no duration (a
// YAML "15" would be 15 ns): only 0 is taken without a unit.
func convert(def any, raw any) (v any, problem string) {
	switch def.(type) {
	case time.Duration:
		if p := notOne(raw, "a duration"); p != "" {
			return nil, p + useDuration
		}
		switch r := raw.(type) {
		case string:
			if f, err := strconv.ParseFloat(strings.TrimSpace(r), 64); err == nil {
				if f == 0 {
					return time.Duration(0), ""
				}
				return nil, "a bare number is not a duration" + useDuration
			}
			d, err := time.ParseDuration(strings.TrimSpace(r))
			if err != nil {
				return nil, "not a duration" + useDuration
			}
			return d, ""
		case int, int64, uint64, float64:
			if formatValue(r) == "0" {
				return time.Duration(0), ""
			}
			return nil, "a bare number is not a duration" + useDuration
		}
		return nil, "not a duration" + useDuration
	case int, int64:
		if p := notOne(raw, "an integer"); p != "" {
			return nil, p
		}
		var n int64
		switch r := raw.(type) {
		case string:
			var err error
			if n, err = strconv.ParseInt(strings.TrimSpace(r), 10, 64); err != nil {
				return nil, "not an integer"
			}
		case int:
			n = int64(r)
		case int64:
			n = r
		case uint64:
			if r > 1<<62 {
				return nil, "out of range"
			}
			n = int64(r)
		case float64:
			// YAML reads 1e6 as a float: taken when it is a whole
			// number (it was refused as "1000000" ... "not an integer").
			if r != math.Trunc(r) {
				return nil, "not an integer"
			}
			if math.Abs(r) > 1<<62 {
				return nil, "out of range"
			}
			n = int64(r)
		default:
			return nil, "not an integer"
		}
		if _, ok := def.(int); ok {
			if n != int64(int(n)) {
				return nil, "out of range"
			}
			return int(n), ""
		}
		return n, ""
	case bool:
		if p := notOne(raw, "true or false"); p != "" {
			return nil, p
		}
		switch r := raw.(type) {
		case bool:
			return r, ""
		case string:
			b, err := strconv.ParseBool(strings.TrimSpace(r))
			if err != nil {
				return nil, "not true or false"
			}
			return b, ""
		}
		return nil, "not true or false"
	case []string:
		switch r := raw.(type) {
		case string:
			out := splitList(r)
			if len(out) == 0 && r != "" {
				// "," or " ": meant as a list, yet it holds nothing; taken
				// as empty, it turned auth_tokens (admin_tokens) off.
				return nil, "holds only commas and blanks, no entry (give an empty value for none)"
			}
			return out, ""
		case []any:
			out := make([]string, 0, len(r))
			for i, x := range r {
				if _, ok := x.([]any); ok {
					return nil, "not a list of strings"
				}
				if _, ok := x.(map[string]any); ok {
					return nil, "not a list of strings"
				}
				if x == nil || strings.TrimSpace(fmt.Sprint(x)) == "" {
					// A "- " line: YAML's null, which fmt.Sprint wrote
					// "<nil>", an auth or admin token anyone could send.
					return nil, fmt.Sprintf("entry %d is empty (remove it)", i+1)
				}
				out = append(out, strings.TrimSpace(fmt.Sprint(x)))
			}
			return out, ""
		}
		return nil, "not a list (comma-separated, or a YAML list)"
	case string:
		if p := notOne(raw, "a single value"); p != "" {
			return nil, p
		}
		switch r := raw.(type) {
		case nil:
			return "", ""
		default:
			return fmt.Sprint(r), ""
		}
	}
	return nil, "unsupported setting type"
}

// notOne is convert's problem with a YAML list or mapping given where one
// value (want: "a duration", "an integer"...) is expected; "" for any
// other raw. Without it, lease_default: [1s] was "1s" ... not a duration.
func notOne(raw any, want string) string {
	switch raw.(type) {
	case []any:
		return "a list where " + want + " is expected"
	case map[string]any:
		return "a mapping where " + want + " is expected"
	}
	return ""
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
	given := c.Advertise != ""
	if !given {
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
	} else if u.Scheme == "http" && c.scheme() == "https" {
		// Its peers would speak plain HTTP to a TLS port and take the
		// node for dead: two actives, and no line in any log said why.
		// (An https advertise without tls_cert may name a TLS proxy.)
		return fmt.Errorf("advertise: %q is http://, but this node serves TLS (tls_cert is set): write https:// here and in peers", c.Advertise)
	}
	c.Advertise = cluster.NodeURL(c.Advertise)
	if err := cluster.CheckNodeURL(c.Advertise); given && err != nil {
		// As every entry of peers (which a cluster's advertise is one
		// of): a single node put a query or a path in every grant's node.
		// (A derived one is listen's host and port, which may be 0 until
		// the listener is bound.)
		return fmt.Errorf("advertise: %q is not a node base URL (http://host:port): %v", c.Advertise, err)
	}
	if c.NativeListen != "" {
		_, nport, err := net.SplitHostPort(c.NativeListen)
		if err != nil {
			return fmt.Errorf("native_listen: %q is not host:port: %v", c.NativeListen, err)
		}
		if _, err := net.LookupPort("tcp", nport); err != nil {
			return fmt.Errorf("native_listen: %q has no valid port (0 to 65535): %v", c.NativeListen, err)
		}
		if c.NativeListen == c.Listen {
			return fmt.Errorf("native_listen: %q is the address of listen too; the native protocol needs a port of its own", c.NativeListen)
		}
	}
	if c.SyncTimeout < cluster.MinSyncTimeout || c.SyncTimeout > cluster.MaxSyncTimeout {
		// Here, unlike in cluster.Config, 0 is no default.
		return fmt.Errorf("sync_timeout: must be %s, got %v", cluster.SyncTimeoutRange, c.SyncTimeout)
	}
	if c.PollTimeout > 0 && c.PollTimeout < minPollTimeout {
		return fmt.Errorf("poll_timeout: must be 0 (never) or at least %v, got %v (each early end costs the client a round trip)", minPollTimeout, c.PollTimeout)
	}
	if c.SyncStandbys < 0 {
		return fmt.Errorf("sync_standbys: must be 0 or more (the standbys that must have a change before it is answered), got %d", c.SyncStandbys)
	}
	if len(c.Peers) == 0 && c.SyncStandbys != 0 {
		return fmt.Errorf("sync_standbys: must be 0 on a single node (no peers), got %d", c.SyncStandbys)
	}
	for i, p := range c.Peers {
		c.Peers[i] = cluster.NodeURL(p)
	}
	if p := c.peerAtListen(); p != "" {
		return fmt.Errorf("peers: %q is the address this node listens on (listen %s), but advertise is %q: a node's advertise is its own entry in peers (a configuration copied from another node?); its peers would take it for that node", p, c.Listen, c.Advertise)
	}
	// A single node checks the timings alone: heartbeat 2s with
	// failover_timeout 1s was accepted there and refused only once peers
	// were added.
	cc := c.clusterConfig()
	check := cc.Validate
	if len(c.Peers) == 0 {
		check = cc.ValidateTimings
	}
	if err := check(); err != nil {
		return err
	}
	if c.DataDir == "" {
		return errors.New("data_dir: must not be empty (the log of changes and the fencing-token high-water mark live there)")
	}
	if _, err := c.walConfig(); err != nil {
		return err
	}
	if c.MaxBody < 64 {
		return fmt.Errorf("max_body: must be at least 64 bytes, got %d", c.MaxBody)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log_level: must be debug, info, warn or error, got %q", c.LogLevel)
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return fmt.Errorf("log_format: must be text or json, got %q", c.LogFormat)
	}
	if err := handlers.ValidateCORSOrigins(c.CORSOrigins); err != nil {
		return fmt.Errorf("cors_origins: %w", err)
	}
	if err := c.engineConfig().Validate(); err != nil {
		return err
	}
	// Last: it creates data_dir, which a setting refused above must not
	// leave behind (an invalid setting changes nothing).
	return checkDataDir(c.DataDir)
}

// minPollTimeout is the shortest poll_timeout accepted: below it the
// clients and the node would spend their time ending and resuming polls.
const minPollTimeout = 100 * time.Millisecond

// checkDataDir makes sure dir (not empty: validate refuses that first)
// exists, creating it, and that a file can be written in it, so that an
// unusable data_dir is refused with the other settings, before anything
// starts.
func checkDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("data_dir: cannot create the directory: %v", err)
	}
	f, err := os.CreateTemp(dir, ".baton-probe-*")
	if err != nil {
		return fmt.Errorf("data_dir: cannot write in %s: %v", filepath.Clean(dir), err)
	}
	name := f.Name()
	_ = f.Close()
	_ = os.Remove(name)
	return nil
}

// maxFsyncInterval is the default and the largest fsync_interval (SPEC
// section 5): the most a power loss can take in interval mode.
const maxFsyncInterval = 100 * time.Millisecond

// walConfig is the configuration of the log in data_dir, or an error that
// names the invalid key (fsync, fsync_interval).
func (c *serveConfig) walConfig() (wal.Config, error) {
	wc := wal.DefaultConfig(c.DataDir)
	mode, err := wal.ParseSyncMode(c.Fsync)
	if err != nil {
		return wc, err
	}
	if c.FsyncInterval <= 0 || c.FsyncInterval > maxFsyncInterval {
		return wc, fmt.Errorf("fsync_interval: must be above 0 and at most %v, got %v", maxFsyncInterval, c.FsyncInterval)
	}
	wc.Sync, wc.SyncInterval = mode, c.FsyncInterval
	wc.SegmentSize = segmentSize
	if mode != wal.SyncAlways {
		// Zeros written ahead make an fsync that does not grow the file:
		// worth it where fsyncs are on the answer's path. Elsewhere they
		// would only let the log write on into them on a full disk while
		// the token high-water mark beside it cannot be written.
		wc.Preallocate = 0
	}
	wc.Repair, wc.RepairHint = c.RepairLog, repairHint
	return wc, wc.Validate()
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

// peerAtListen is the first entry of peers, other than advertise, whose
// host and port are this node's listen address ("" if none): the same IP
// address, or any address of this machine when listen's host is
// unspecified (every interface), with listen's port. Names are not
// resolved (a peer named by a host name is never matched), and an entry
// that is not a node base URL (cluster.CheckNodeURL) is left to the
// cluster's check, which names what is wrong with it.
func (c *serveConfig) peerAtListen() string {
	ip, port := listenIP(c.Listen), ""
	if _, p, err := net.SplitHostPort(c.Listen); err == nil {
		port = p
	}
	if ip == nil {
		if h, _, _ := net.SplitHostPort(c.Listen); h == "" {
			ip = net.IPv4zero
		}
	}
	if ip == nil {
		return ""
	}
	var local []net.IP // this machine's addresses, for an unspecified listen host
	if ip.IsUnspecified() {
		addrs, _ := net.InterfaceAddrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				local = append(local, n.IP)
			}
		}
	}
	for _, p := range c.Peers {
		u, err := url.Parse(p)
		if err != nil || p == c.Advertise || u.Port() != port || cluster.CheckNodeURL(p) != nil {
			// (An entry that is no node URL at all is refused for that,
			// by the cluster's check, with the reason.)
			continue
		}
		pip := net.ParseIP(u.Hostname())
		if pip == nil {
			continue
		}
		if pip.Equal(ip) || ip.IsUnspecified() && (pip.IsLoopback() || slices.ContainsFunc(local, pip.Equal)) {
			return p
		}
	}
	return ""
}

// listenIP is the IP address of listen (host:port), nil when its host
// is a name, empty or not an address.
func listenIP(listen string) net.IP {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return nil
	}
	return net.ParseIP(host)
}

func (c *serveConfig) clusterConfig() cluster.Config {
	return cluster.Config{
		Self:            c.Advertise,
		Peers:           c.Peers,
		SourceIP:        listenIP(c.Listen),
		Heartbeat:       c.Heartbeat,
		FailoverTimeout: c.FailoverTimeout,
		SyncStandbys:    c.SyncStandbys,
		SyncTimeout:     c.SyncTimeout,
		Secret:          c.ClusterSecret,
		Native:          c.nativeAdvertise(""),
		DiskFree:        func() (uint64, bool) { return diskFree(c.DataDir) },
	}
}

// nativeAdvertise is the native address clients reach this node at, as
// peers pass it on in the M answers of standbys: the host of advertise
// with the port of native_listen (bound, when native_listen asks for port
// 0), or "" when the native protocol is off.
func (c *serveConfig) nativeAdvertise(bound string) string {
	if c.NativeListen == "" {
		return ""
	}
	addr := c.NativeListen
	if bound != "" {
		addr = bound
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	u, err := url.Parse(c.Advertise)
	if err != nil {
		return ""
	}
	return net.JoinHostPort(u.Hostname(), port)
}
