package cluster

import (
	"strings"
	"testing"
	"time"
)

// TestValidateRefusesPeerURLsNoNodeCanServe: a peer URL whose port is out
// of range, whose host is empty, or that carries a query, a fragment or a
// user is refused at start naming peers, as listen's bad port is; they were
// taken, and the node then polled an address nothing could serve.
func TestValidateRefusesPeerURLsNoNodeCanServe(t *testing.T) {
	const self = "http://127.0.0.1:7070"
	for _, tc := range []struct {
		peer string
		ok   bool
	}{
		{"http://127.0.0.2:7070", true},
		{"https://lock.example.com", true},
		{"http://[::1]:7071", true},
		{"http://127.0.0.2:7070/", true},
		{"http://x:99999", false},
		{"http://x:0", false},
		{"http://x:", false},
		{"http://:7071", false},
		{"http://127.0.0.2:7071?x=1", false},
		{"http://127.0.0.2:7071?", false},
		{"http://127.0.0.2:7071#f", false},
		{"http://u:p@127.0.0.2:7071", false},
		{"http://127.0.0.2:7071/path", false},
		{"ftp://127.0.0.2:7071", false},
	} {
		c := Config{Self: self, Peers: []string{self, tc.peer}, Heartbeat: DefaultHeartbeat, FailoverTimeout: DefaultFailoverTimeout, SyncTimeout: time.Second}
		err := c.Validate()
		if tc.ok && err != nil {
			t.Errorf("%s: refused: %v", tc.peer, err)
		}
		if !tc.ok && (err == nil || !strings.HasPrefix(err.Error(), "peers: ") || !strings.Contains(err.Error(), tc.peer)) {
			t.Errorf("%s: got %v, want an error naming peers and the URL", tc.peer, err)
		}
	}
}

// sync_timeout is 0 (the default) or between 1ms and 1m; anything else is
// refused naming it.
func TestValidateTimingsSyncTimeoutBounds(t *testing.T) {
	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{
		{0, true}, {time.Millisecond, true}, {time.Minute, true},
		{-time.Second, false}, {-1, false}, {500 * time.Microsecond, false}, {time.Minute + 1, false},
	} {
		c := Config{Heartbeat: DefaultHeartbeat, FailoverTimeout: DefaultFailoverTimeout, SyncTimeout: tc.d}
		err := c.ValidateTimings()
		if tc.ok && err != nil {
			t.Errorf("sync_timeout %v: refused: %v", tc.d, err)
		}
		if !tc.ok && (err == nil || !strings.HasPrefix(err.Error(), "sync_timeout: ")) {
			t.Errorf("sync_timeout %v: got %v, want an error naming sync_timeout", tc.d, err)
		}
	}
}

// TestNodeURLIsOneNameForOneNode: the forms of a node's URL that name the
// same node (RFC 3986: scheme and host are case-insensitive; a trailing
// "/" and blanks around it are no part of it) become one string, which
// nodes compare; a breaker's "HTTP://h:p" in peers with "http://h:p" in
// advertise was refused as "not in peers". What is not a node URL stays
// one that CheckNodeURL refuses.
func TestNodeURLIsOneNameForOneNode(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:7070":         "http://127.0.0.1:7070",
		" HTTP://127.0.0.1:7070/ ":      "http://127.0.0.1:7070",
		"Https://Lock.Example.COM":      "https://lock.example.com",
		"http://[FE80::1]:7070":         "http://[fe80::1]:7070",
		"http://[fe80::1%25Eth0]:7070/": "http://[fe80::1%25Eth0]:7070",
		"HTTP://127.0.0.1:7070/Path":    "http://127.0.0.1:7070/Path",
		"http://127.0.0.1:7070?x=1":     "http://127.0.0.1:7070?x=1",
		"not a url at all":              "not a url at all",
	} {
		if got := NodeURL(in); got != want {
			t.Errorf("NodeURL(%q) = %q, want %q", in, got, want)
		}
	}
	for _, bad := range []string{"HTTP://127.0.0.1:7070/Path", "http://127.0.0.1:7070?x=1", "FTP://h:1"} {
		if CheckNodeURL(NodeURL(bad)) == nil {
			t.Errorf("CheckNodeURL(NodeURL(%q)) = nil, want it refused", bad)
		}
	}
}

// The node that began a log's epoch is read from the log, in the spelling
// its advertise had then (before NodeURL, "HTTP://Node-A:7070/" worked
// when every node wrote it so): replacedBy compares it with the node's own
// URL in NodeURL's form, so that a node whose log ends in its own epoch
// still knows it after its spelling became the canonical one.
func TestReplacedByComparesTheEpochsNodeAsAURL(t *testing.T) {
	s := Status{URL: "http://node-a:7070", LogEpoch: 1, LogEpochBy: "HTTP://Node-A:7070/"}
	if !replacedBy(s, Status{LogEpoch: 2}) {
		t.Error("the log's epoch begun by this node under another spelling: not replaced by a later term")
	}
	s.LogEpochBy = "http://node-b:7070"
	if replacedBy(s, Status{LogEpoch: 2}) {
		t.Error("another node's epoch counted as this node's")
	}
}
