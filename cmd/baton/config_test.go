package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Every kind of value a setting takes, from the YAML file: lists as YAML
// lists or comma-separated, booleans, integers, durations, and a key without
// a value (the default stands). The binary's tests cover the refusals.
func TestConfigFileValues(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "baton.yaml")
	yaml := `listen: "127.0.0.1:7070"
data_dir: ` + filepath.Join(dir, "data") + `
lease_default: 15s
lease_max: 2h
wait_max: 0
peers: [http://127.0.0.1:7070, http://127.0.0.1:7071]
advertise: http://127.0.0.1:7070
cors_origins: "http://a.example, http://b.example"
auth_tokens:
pprof: true
max_body: 1024
log_format: json
`
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := loadConfig([]string{"--config", file}, []string{"BATON_MAX_KEYS=10", "BATON_ADDR=http://x:1"})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case c.LeaseDefault != 15*time.Second || c.LeaseMax != 2*time.Hour || c.WaitMax != 0:
		t.Errorf("durations %v %v %v", c.LeaseDefault, c.LeaseMax, c.WaitMax)
	case !slices.Equal(c.Peers, []string{"http://127.0.0.1:7070", "http://127.0.0.1:7071"}):
		t.Errorf("peers %q", c.Peers)
	case !slices.Equal(c.CORSOrigins, []string{"http://a.example", "http://b.example"}):
		t.Errorf("cors_origins %q", c.CORSOrigins)
	case len(c.AuthTokens) != 0 || !c.Pprof || c.MaxBody != 1024 || c.MaxKeys != 10 || c.LogFormat != "json":
		t.Errorf("auth_tokens %q pprof %v max_body %d max_keys %d log_format %q", c.AuthTokens, c.Pprof, c.MaxBody, c.MaxKeys, c.LogFormat)
	}
	// A flag overrides, and a boolean flag needs no value.
	c, err = loadConfig([]string{"--config", file, "--pprof=false", "--lease-default", "1m30s"}, nil)
	if err != nil || c.Pprof || c.LeaseDefault != 90*time.Second {
		t.Fatalf("flags over the file: %v %v %v", err, c.Pprof, c.LeaseDefault)
	}
}

// sync_standbys and sync_timeout: read from flags, defaults 0 and 1s, and
// refused by name when out of range (no state is touched: loadConfig only
// reads).
func TestConfigSyncStandbys(t *testing.T) {
	dir := t.TempDir()
	peers := "http://127.0.0.1:7070,http://127.0.0.1:7071,http://127.0.0.1:7072"
	base := []string{"--data-dir", dir, "--listen", "127.0.0.1:7070", "--advertise", "http://127.0.0.1:7070", "--peers", peers}
	c, err := loadConfig(base, nil)
	if err != nil || c.SyncStandbys != 0 || c.SyncTimeout != time.Second {
		t.Fatalf("defaults: %v, sync_standbys %d sync_timeout %v", err, c.SyncStandbys, c.SyncTimeout)
	}
	c, err = loadConfig(append(base, "--sync-standbys", "2", "--sync-timeout", "250ms"), nil)
	if err != nil || c.SyncStandbys != 2 || c.SyncTimeout != 250*time.Millisecond || c.clusterConfig().SyncStandbys != 2 {
		t.Fatalf("flags: %v, sync_standbys %d sync_timeout %v", err, c.SyncStandbys, c.SyncTimeout)
	}
	for _, tc := range []struct {
		args []string
		key  string
	}{
		{append(slices.Clone(base), "--sync-standbys", "3"), "sync_standbys"},
		{append(slices.Clone(base), "--sync-standbys", "-1"), "sync_standbys"},
		{append(slices.Clone(base), "--sync-timeout", "0s"), "sync_timeout"},
		{append(slices.Clone(base), "--sync-timeout", "2m"), "sync_timeout"},
		{[]string{"--data-dir", dir, "--sync-standbys", "1"}, "sync_standbys"},
	} {
		if _, err := loadConfig(tc.args, nil); err == nil || !strings.HasPrefix(err.Error(), tc.key+":") {
			t.Errorf("%v: %v, want an error naming %s", tc.args, err, tc.key)
		}
	}
	// sync_timeout's range is one message, below and above it: 0 is no
	// default here (a breaker's report: 0 was "must be positive", 2m
	// "must be between 1ms and 1m (0: the default, 1s)").
	for _, v := range []string{"0s", "500us", "2m", "-1s"} {
		_, err := loadConfig(append(slices.Clone(base), "--sync-timeout", v), nil)
		if err == nil || !strings.HasPrefix(err.Error(), "sync_timeout: must be between 1ms and 1m, got ") || strings.Contains(err.Error(), "default") {
			t.Errorf("--sync-timeout %s: %v, want sync_timeout: must be between 1ms and 1m, got ...", v, err)
		}
	}
	// A negative count is refused as negative, with or without peers: on
	// a single node it was "must be 0 on a single node", which reads as
	// if -1 were fine with peers.
	if _, err := loadConfig([]string{"--data-dir", dir, "--sync-standbys", "-1"}, nil); err == nil || !strings.Contains(err.Error(), "0 or more") {
		t.Errorf("--sync-standbys -1 on a single node: %v, want sync_standbys: must be 0 or more", err)
	}
}

// YAML reads 1e6 (and 1000.0) as a float: an integer setting takes it when
// it is a whole number. It was refused with `max_keys: "1000000" from file
// ...: not an integer`, naming as not an integer a value that is one; 1.5
// is still refused.
func TestConfigFileWholeFloatIsAnInteger(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "baton.yaml")
	for _, c := range []struct {
		yaml string
		keys int
		bad  bool
	}{
		{"max_keys: 1e6\n", 1000000, false},
		{"max_keys: 2000.0\n", 2000, false},
		{"max_keys: 1.5\n", 0, true},
		{"max_keys: 1e300\n", 0, true},
	} {
		if err := os.WriteFile(file, []byte(c.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadConfig([]string{"--config", file, "--data-dir", filepath.Join(dir, "data")}, nil)
		if c.bad {
			if err == nil || !strings.Contains(err.Error(), "max_keys") {
				t.Errorf("%q: %v, want an error naming max_keys", c.yaml, err)
			}
			continue
		}
		if err != nil || cfg.MaxKeys != c.keys {
			t.Errorf("%q: %v, max_keys %d; want %d", c.yaml, err, cfg.MaxKeys, c.keys)
		}
	}
}

// A YAML list (or mapping) where one value is expected is named as such,
// with the key, and shown as written: lease_default: [1s] was refused as
// `lease_default: "1s" ... not a duration`, a message that calls 1s no
// duration and hides the brackets that are the mistake.
func TestConfigFileListWhereOneValue(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "baton.yaml")
	for _, c := range []struct{ yaml, want string }{
		{"lease_default: [1s]\n", `lease_default: "[1s]" from file ` + file + `: a list where a duration is expected`},
		{"lease_default: {a: 1s}\n", `lease_default: "{a: 1s}" from file ` + file + `: a mapping where a duration is expected`},
		{"max_keys: [5]\n", `max_keys: "[5]" from file ` + file + `: a list where an integer is expected`},
		{"repair_log: [true]\n", `repair_log: "[true]" from file ` + file + `: a list where true or false is expected`},
		{"log_format: [json]\n", `log_format: "[json]" from file ` + file + `: a list where a single value is expected`},
	} {
		if err := os.WriteFile(file, []byte(c.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := loadConfig([]string{"--config", file, "--data-dir", filepath.Join(dir, "data")}, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.yaml, err, c.want)
		}
	}
	// A list where a list is expected is still taken.
	if err := os.WriteFile(file, []byte("auth_tokens: [a, b]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, err := loadConfig([]string{"--config", file, "--data-dir", filepath.Join(dir, "data")}, nil); err != nil || len(cfg.AuthTokens) != 2 {
		t.Errorf("auth_tokens: [a, b]: %v, %q", err, cfg.AuthTokens)
	}
}

// The peer timings are refused on a single node as they are in a cluster:
// heartbeat 2s with failover_timeout 1s, a heartbeat under 10ms, or a
// sync_timeout over 1m started a node without peers and were refused only
// once peers were added (SPEC section 5: an invalid setting is refused at
// start with a message that names it).
func TestConfigTimingsRefusedWithoutPeers(t *testing.T) {
	dir := t.TempDir()
	base := []string{"--data-dir", dir, "--listen", "127.0.0.1:7070"}
	if _, err := loadConfig(base, nil); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		args []string
		key  string
	}{
		{[]string{"--heartbeat", "2s", "--failover-timeout", "1s"}, "failover_timeout"},
		{[]string{"--heartbeat", "1ns"}, "heartbeat"},
		{[]string{"--heartbeat", "-1s"}, "heartbeat"},
		{[]string{"--sync-timeout", "2m"}, "sync_timeout"},
	} {
		if _, err := loadConfig(append(slices.Clone(base), tc.args...), nil); err == nil || !strings.HasPrefix(err.Error(), tc.key+":") {
			t.Errorf("%v: %v, want an error naming %s", tc.args, err, tc.key)
		}
	}
}

// An error about a setting left unset says it was not set, not that it
// was "" (advertise's default is derived from listen: the error quoted
// the derived URL and then `advertise = "" from the default`).
func TestConfigErrorOfAnUnsetSetting(t *testing.T) {
	dir := t.TempDir()
	_, err := loadConfig([]string{"--data-dir", dir, "--listen", "127.0.0.1:7070", "--peers", "http://127.0.0.1:7071,http://127.0.0.1:7072"}, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "advertise:") {
		t.Fatalf("advertise not in peers: %v, want an error naming advertise", err)
	}
	if msg := err.Error(); strings.Contains(msg, `advertise = ""`) || !strings.Contains(msg, "advertise not set") {
		t.Fatalf("error %q, want it to say advertise was not set", msg)
	}
}

// TestSecurityWarningAuthWithoutClusterSecret: a cluster whose lock API has
// auth_tokens but whose peer endpoints have no cluster_secret is warned
// about at start (those endpoints answer anyone); with the secret, or
// without peers, or without auth_tokens (nothing is guarded), no warning.
func TestSecurityWarningAuthWithoutClusterSecret(t *testing.T) {
	peers := "http://127.0.0.1:7070,http://127.0.0.1:7071"
	for _, tc := range []struct {
		name string
		args []string
		want bool
	}{
		{"peers, auth_tokens, no cluster_secret", []string{"--peers", peers, "--auth-tokens", "t1"}, true},
		{"peers, auth_tokens, cluster_secret", []string{"--peers", peers, "--auth-tokens", "t1", "--cluster-secret", "s"}, false},
		{"no peers, auth_tokens", []string{"--auth-tokens", "t1"}, false},
		{"peers, no auth_tokens", []string{"--peers", peers}, false},
	} {
		args := append([]string{"--data-dir", t.TempDir(), "--listen", "127.0.0.1:7070"}, tc.args...)
		c, err := loadConfig(args, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		w := c.securityWarnings()
		if got := len(w) > 0; got != tc.want {
			t.Errorf("%s: warnings %q, want a warning: %v", tc.name, w, tc.want)
		}
		if tc.want && !strings.Contains(w[0], "cluster_secret") {
			t.Errorf("%s: warning %q does not name cluster_secret", tc.name, w[0])
		}
	}
}

// A config file of two YAML documents (two files concatenated, a
// Kubernetes habit) started with the first alone: the settings after the
// "---" were dropped without a word. It is refused, naming the file; a
// single document, even opened or closed by a marker, is read.
func TestConfigOfSeveralYAMLDocumentsRefused(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		text string
		ok   bool
	}{
		{"lease_default: 15s\n---\nlease_default: 20s\n", false},
		{"lease_default: 15s\n---\nlisten: 127.0.0.1:7070\n", false},
		{"---\nlease_default: 15s\n", true},
		{"lease_default: 15s\n...\n", true},
		{"lease_default: 15s\n---\n", true},
	} {
		path := filepath.Join(dir, "baton.yaml")
		if err := os.WriteFile(path, []byte(c.text), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadConfig([]string{"--data-dir", dir, "--config", path}, nil)
		if c.ok {
			if err != nil || cfg.LeaseDefault != 15*time.Second {
				t.Errorf("%q: %v, lease_default %v", c.text, err, cfg.LeaseDefault)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "2 YAML documents") {
			t.Errorf("%q: error %v, want one naming the file and its 2 YAML documents", c.text, err)
		}
	}
}

// advertise is a node base URL on a single node too, as every entry of
// peers is in a cluster: before, --advertise http://h:7070?x=1 (or with a
// path, a fragment or a user) started a single node that put it in the
// node field of every grant.
func TestConfigAdvertiseIsABaseURLOnASingleNode(t *testing.T) {
	dir := t.TempDir()
	for _, adv := range []string{"http://127.0.0.1:7070?x=1", "http://127.0.0.1:7070#f", "http://127.0.0.1:7070/path", "http://u:p@127.0.0.1:7070", "http://127.0.0.1:99999"} {
		_, err := loadConfig([]string{"--data-dir", dir, "--listen", "127.0.0.1:7070", "--advertise", adv}, nil)
		if err == nil || !strings.HasPrefix(err.Error(), "advertise:") {
			t.Errorf("--advertise %q on a single node: %v; want an error naming advertise", adv, err)
		}
	}
	for _, adv := range []string{"http://127.0.0.1:7070", "http://127.0.0.1:7070/", "https://lock.example.com"} {
		if _, err := loadConfig([]string{"--data-dir", dir, "--listen", "127.0.0.1:7070", "--advertise", adv}, nil); err != nil {
			t.Errorf("--advertise %q: %v", adv, err)
		}
	}
}

// TestSecurityWarningNoAuthBeyondLoopback: a node without auth_tokens that
// listens (HTTP or native) beyond the loopback interface lets anyone who
// reaches it take, release and force-release every lock, and says so at
// start, naming auth_tokens and the address; on loopback only, or with
// auth_tokens, it does not.
func TestSecurityWarningNoAuthBeyondLoopback(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // the address the warning names; "" for no warning
	}{
		{"default listen", []string{"--listen", ":7070"}, ":7070"},
		{"every IPv4 interface", []string{"--listen", "0.0.0.0:7070"}, "0.0.0.0:7070"},
		{"a routable address", []string{"--listen", "10.1.2.3:7070"}, "10.1.2.3:7070"},
		{"IPv6 any", []string{"--listen", "[::]:7070"}, "[::]:7070"},
		{"loopback", []string{"--listen", "127.0.0.1:7070"}, ""},
		{"loopback by name", []string{"--listen", "localhost:7070"}, ""},
		{"IPv6 loopback", []string{"--listen", "[::1]:7070"}, ""},
		{"with auth_tokens", []string{"--listen", ":7070", "--auth-tokens", "t1"}, ""},
		{"native beyond loopback", []string{"--listen", "127.0.0.1:7070", "--native-listen", ":7071"}, ":7071"},
	} {
		args := append([]string{"--data-dir", t.TempDir()}, tc.args...)
		c, err := loadConfig(args, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var found string
		for _, w := range c.securityWarnings() {
			if strings.Contains(w, "auth_tokens is empty") {
				found = w
			}
		}
		switch {
		case tc.want == "" && found != "":
			t.Errorf("%s: warned %q, want no auth warning", tc.name, found)
		case tc.want != "" && !strings.Contains(found, fmt.Sprintf("%q", tc.want)):
			t.Errorf("%s: warnings %q, want one saying auth_tokens is empty and naming %q", tc.name, c.securityWarnings(), tc.want)
		}
	}
}

// peers and advertise name a node by one URL whatever the case of its
// scheme and host (cluster.NodeURL): "HTTP://" in peers with "http://" in
// advertise was refused as "not in peers" (a breaker), while a trailing
// "/" was already dropped.
func TestConfigPeersAndAdvertiseCompareAsURLs(t *testing.T) {
	dir := t.TempDir()
	c, err := loadConfig([]string{"--data-dir", dir, "--listen", "127.0.0.1:7070",
		"--advertise", "http://Node-A.example:7070",
		"--peers", "HTTP://node-a.example:7070/,http://NODE-B.example:7070"}, nil)
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	if c.Advertise != "http://node-a.example:7070" || strings.Join(c.Peers, ",") != "http://node-a.example:7070,http://node-b.example:7070" {
		t.Errorf("advertise %q, peers %q: want both in lower case, no trailing /", c.Advertise, c.Peers)
	}
	_, err = loadConfig([]string{"--data-dir", dir, "--listen", "127.0.0.1:7070",
		"--advertise", "http://node-a.example:7070",
		"--peers", "http://node-a.example:7070,HTTP://Node-A.example:7070/"}, nil)
	if err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Errorf("one node listed twice in two spellings: %v, want peers' listed twice", err)
	}
}

// A node whose listen address is another peer's entry in peers, while its
// advertise names a third (a configuration copied from another node, its
// listen changed and advertise not) is refused at start, naming peers: it
// answered its peers' polls of that entry with another node's URL, and
// after the active died both nodes that claimed that URL promoted (two
// actives, no partition; breaker U, 2026-12-06). Nodes on one machine
// with ports of their own, and a node behind a proxy, are accepted.
func TestConfigListenIsAnotherPeersAddress(t *testing.T) {
	dir := t.TempDir()
	peers := "http://127.0.0.211:7501,http://127.0.0.212:7502,http://127.0.0.213:7503"
	for _, tc := range []struct {
		listen, advertise string
		bad               bool
	}{
		{"127.0.0.213:7503", "http://127.0.0.212:7502", true},
		{"0.0.0.0:7503", "http://127.0.0.212:7502", true}, // every interface, 127.0.0.213 among them
		{"127.0.0.213:7503", "http://127.0.0.213:7503", false},
		{"127.0.0.212:7502", "http://127.0.0.212:7502", false},
		{"127.0.0.213:9999", "http://127.0.0.212:7502", false}, // behind a proxy at 127.0.0.212:7502
	} {
		_, err := loadConfig([]string{"--data-dir", dir, "--listen", tc.listen, "--advertise", tc.advertise, "--peers", peers}, nil)
		if tc.bad && (err == nil || !strings.HasPrefix(err.Error(), "peers:") || !strings.Contains(err.Error(), "http://127.0.0.213:7503")) {
			t.Errorf("listen %s, advertise %s: %v, want an error naming peers and http://127.0.0.213:7503", tc.listen, tc.advertise, err)
		}
		if !tc.bad && err != nil {
			t.Errorf("listen %s, advertise %s: %v, want it accepted", tc.listen, tc.advertise, err)
		}
	}
}

// A path in the peers entry at this node's listen address is refused for
// the path, as in any other entry, not taken for a configuration copied
// from another node (a tester's report: the message sent the operator
// looking at advertise).
func TestConfigPeerEntryWithAPathAtListenNamesThePath(t *testing.T) {
	dir := t.TempDir()
	for _, peers := range []string{
		"http://127.0.0.214:7070/path,http://127.0.0.215:7070",
		"http://127.0.0.214:7070,http://127.0.0.215:7070/path",
	} {
		_, err := loadConfig([]string{"--data-dir", dir, "--listen", "127.0.0.214:7070", "--peers", peers}, nil)
		if err == nil || !strings.HasPrefix(err.Error(), "peers:") || !strings.Contains(err.Error(), "must hold no path") {
			t.Errorf("peers %s: %v, want peers' \"must hold no path\"", peers, err)
		}
	}
}

// A setting left empty in the file ("sync_standbys:", "~", "null") is
// refused naming it: it was taken for the default, so that an empty
// sync_standbys ran with asynchronous replication and no word said (a
// tester's F4). A list left empty is an empty list (TestConfigFileValues'
// auth_tokens).
func TestConfigFileEmptyValueRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "baton.yaml")
	for _, text := range []string{"sync_standbys:\n", "sync_standbys: ~\n", "lease_default: null\n", "pprof:\n"} {
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		key, _, _ := strings.Cut(text, ":")
		_, err := loadConfig([]string{"--config", file, "--data-dir", filepath.Join(dir, "data")}, nil)
		if err == nil || !strings.HasPrefix(err.Error(), key+": ") || !strings.Contains(err.Error(), "has no value") {
			t.Errorf("%q: %v, want an error naming %s as having no value", text, err, key)
		}
	}
}
