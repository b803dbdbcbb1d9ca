package main

// Tests of the Node and of the log in data_dir under a real `baton serve`.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/wal"
)

// A path that net/http cannot parse (a % without two hex digits, a
// control character) is answered 400 with baton's error body naming the
// key, not Go's plain-text 400; also when it follows a good request on a
// kept-alive connection; and it changes nothing.
func TestBadPathNamesKey(t *testing.T) {
	leakCheck(t)
	n := openNode(t, t.TempDir())
	addr := strings.TrimPrefix(n.URL(), "http://")
	ask := func(req string) string {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct{ req, field, msg string }{
		{"POST /locks/%zz HTTP/1.1\r\nHost: x\r\n\r\n", "key", `key: has a bad percent-encoding ("%zz"`},
		{"POST /locks/100% HTTP/1.1\r\nHost: x\r\n\r\n", "key", `key: has a bad percent-encoding ("%"`},
		{"DELETE /locks/a/%2?token=5 HTTP/1.1\r\nHost: x\r\n\r\n", "key", `key: has a bad percent-encoding ("%2"`},
		{"GET /locks/a\x01 HTTP/1.1\r\nHost: x\r\n\r\n", "key", "key: contains the control character U+0001"},
		{"GET /x%zz HTTP/1.1\r\nHost: x\r\n\r\n", "path", `path: has a bad percent-encoding ("%zz"`},
		// A space in the key (not percent-encoded) was "too long to name
		// its fault".
		{"POST /locks/a b HTTP/1.1\r\nHost: x\r\n\r\n", "key", "key: contains a space; write it as %20"},
		{"POST /locks/my key?lease=5 HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n", "key", "key: contains a space"},
		{"POST /locks/k?owner=a b HTTP/1.1\r\nHost: x\r\n\r\n", "query", "query: contains a space; write it as %20"},
		{"POST /locks/good HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\nPOST /locks/good%zz HTTP/1.1\r\nHost: x\r\n\r\n", "key", `key: has a bad percent-encoding ("%zz"`},
		// A header net/http refuses is named too.
		{"POST /locks/k HTTP/1.1\r\nHost: x\r\nIdempotency-Key: a\x1fb\r\n\r\n", "Idempotency-Key", "Idempotency-Key: contains the control character U+001F"},
		{"POST /locks/k HTTP/1.1\r\nHost: x\r\nIdempotency Key: a\r\n\r\n", "header", `header: the line "Idempotency Key: a" is not a header field`},
		{"POST /locks/k HTTP/1.1\r\n\r\n", "Host", "Host: missing required Host header"},
		{"POST /locks/%zz" + strings.Repeat("a", 6000) + " HTTP/1.1\r\nHost: x\r\n\r\n", "request", "request: the request line is not valid and too long"},
		{"POST /locks/k HTTP/1.1\r\nHost: x\r\nhost: y\r\n\r\n", "Host", "Host: is given more than once"},
		{"POST /locks/k HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "Content-Length", "Content-Length: is given more than once"},
		// The body of a request before it is no part of the failed one,
		// even when it reads like a request line or a header.
		{"GET /locks/good HTTP/1.1\r\nHost: x\r\nContent-Length: 25\r\n\r\nGET /locks/%zz HTTP/1.1\r\n" +
			"GET /locks/good HTTP/1.1\r\nHost: x\r\nX-A: b\x01c\r\n\r\n", "X-A", "X-A: contains the control character U+0001"},
		{"GET /locks/good HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n19;x=y\r\nGET /locks/%zz HTTP/1.1\r\n\r\n0\r\nX-T: 1\r\n\r\n" +
			"GET /locks/good HTTP/1.1\r\nHost: x\r\nX-A: b\x01c\r\n\r\n", "X-A", "X-A: contains the control character U+0001"},
		{"GET /locks/good HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nX-B: a\x02b\r\n" +
			"GET /locks/good%zz HTTP/1.1\r\nHost: x\r\n\r\n", "key", `key: has a bad percent-encoding ("%zz"`},
	} {
		out := ask(tc.req)
		i := strings.LastIndex(out, "HTTP/1.1 400 ")
		if i < 0 {
			t.Fatalf("%q: answer %q, want a 400", tc.req, out)
		}
		head, body, _ := strings.Cut(out[i:], "\r\n\r\n")
		var e api.Error
		if !strings.Contains(head, "Content-Type: application/json") || json.Unmarshal([]byte(body), &e) != nil ||
			e.Code != api.CodeInvalidArgument || e.Field != tc.field || !strings.HasPrefix(e.Message, tc.msg) {
			t.Fatalf("%q: answer %q, want invalid_argument naming %s: %s…", tc.req, out[i:], tc.field, tc.msg)
		}
	}
	// With Accept: text/plain (a shell script's), the error is a line.
	out := ask("DELETE /locks/100% HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\nLock-Token: 5\r\n\r\n")
	if want := "\r\n\r\ninvalid_argument: key: has a bad percent-encoding"; !strings.HasPrefix(out, "HTTP/1.1 400 ") ||
		!strings.Contains(out, "Content-Type: text/plain") || !strings.Contains(out, want) {
		t.Fatalf("with Accept: text/plain: %q, want a 400 in text with %q", out, want)
	}
	// So is an error in a header, or a missing Host.
	for _, req := range []string{
		"GET /locks/k HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\nX-A: b\x01c\r\n\r\n",
		"GET /locks/k HTTP/1.1\r\nAccept: text/plain\r\n\r\n",
	} {
		if out := ask(req); !strings.HasPrefix(out, "HTTP/1.1 400 ") || !strings.Contains(out, "Content-Type: text/plain") ||
			!strings.Contains(out, "\r\n\r\ninvalid_argument: ") {
			t.Fatalf("%q: %q, want a 400 in text", req, out)
		}
	}
	res, err := http.Get(n.URL() + "/locks")
	if err != nil {
		t.Fatal(err)
	}
	var l api.LockList
	err = json.NewDecoder(res.Body).Decode(&l)
	res.Body.Close()
	if err != nil || l.Total != 1 || l.Locks[0].Key != "good" {
		t.Fatalf("locks after the bad requests: %+v %v, want only good", l, err)
	}
	http.DefaultClient.CloseIdleConnections()
}

// A single node's GET /cluster gives its log's last index, as a cluster
// node's does (it said 0 whatever its log held), for itself and in its
// one peer, and the same again after a restart on the same data_dir.
func TestSingleNodeClusterLastIndex(t *testing.T) {
	leakCheck(t)
	dir := t.TempDir()
	view := func(url string) api.ClusterView {
		t.Helper()
		res, err := http.Get(url + "/cluster")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var v api.ClusterView
		if err := json.NewDecoder(res.Body).Decode(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	n := openNode(t, dir)
	for range 2 {
		res, err := http.Post(n.URL()+"/locks/li", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		res, err = http.Post(n.URL()+"/locks/li2", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	want := n.wal.LastIndex()
	v := view(n.URL())
	if want == 0 || v.LastIndex != want || len(v.Peers) != 1 || v.Peers[0].LastIndex != want {
		t.Fatalf("GET /cluster last_index %d, peers %+v; the log's last index is %d", v.LastIndex, v.Peers, want)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	http.DefaultClient.CloseIdleConnections()
	n = openNode(t, dir)
	if v := view(n.URL()); v.LastIndex < want || v.LastIndex != n.wal.LastIndex() {
		t.Fatalf("after a restart GET /cluster last_index %d, want the log's %d (at least %d)", v.LastIndex, n.wal.LastIndex(), want)
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestNodeOpenClose: a Node opened on 127.0.0.1:0 serves locks and its
// log metrics, holds data_dir while open (a second Node on it is refused
// naming data_dir) and releases it on Close.
func TestNodeOpenClose(t *testing.T) {
	leakCheck(t)
	dir := t.TempDir()
	cfg, err := loadConfig([]string{"--listen", "127.0.0.1:0", "--data-dir", dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := OpenNode(cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	c := apiClient(t, n.URL())
	g, err := c.Acquire(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Release(t.Context(), "k", g.Token); err != nil {
		t.Fatal(err)
	}
	metrics := scrape(t, n.URL())
	if v, ok := metrics["baton_log_healthy"]; !ok || v != 1 {
		t.Fatalf("baton_log_healthy = %v (present %v), want 1", v, ok)
	}
	for _, m := range []string{"baton_log_records_total", "baton_log_writes_total", "baton_log_fsyncs_total", "baton_log_records_synced_total",
		"baton_log_fsync_seconds_total", "baton_log_gather_seconds_total",
		"baton_log_gather_timeouts_total"} {
		if _, ok := metrics[m]; !ok {
			t.Errorf("%s missing from /metrics", m)
		}
	}

	_, err = OpenNode(cfg, quietLog())
	if !errors.Is(err, wal.ErrLocked) || exitCode(err) != exitUsage || !strings.Contains(err.Error(), "data_dir "+dir) {
		t.Fatalf("a second Node on %s: %v (exit %d); want wal.ErrLocked naming data_dir, exit 2", dir, err, exitCode(err))
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	n2, err := OpenNode(cfg, quietLog())
	if err != nil {
		t.Fatalf("a Node on %s after Close: %v", dir, err)
	}
	if err := n2.Close(); err != nil {
		t.Fatal(err)
	}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// scrape reads url's /metrics: the value of each series without labels.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	res, body := get(t, http.MethodGet, url+"/metrics")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", res.StatusCode, body)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") || strings.Contains(name, "{") {
			continue
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			out[name] = f
		}
	}
	return out
}

// TestDataDirInUseRefused: a second `baton serve` on the data_dir of a
// running one exits 2 naming data_dir and the holder; the first serves on.
func TestDataDirInUseRefused(t *testing.T) {
	needBinary(t)
	dir := t.TempDir()
	first := startServe(t, dir, nil)
	code, stderr := runServe(t, nil, "--data-dir", dir)
	if code != exitUsage || !strings.Contains(stderr, "data_dir "+dir) || !strings.Contains(stderr, "another process") {
		t.Fatalf("second process on %s: exit %d, want 2 naming data_dir and the other process:\n%s", dir, code, stderr)
	}
	if st := first.status("k"); st.Holder != nil {
		t.Fatalf("the first process: %+v", st)
	}
	if code := first.stop(); code != 0 {
		t.Fatalf("the first process exited %d", code)
	}
}

// TestReadOnlyDataDirRefused: a data_dir on a read-only file system (a
// tmpfs mounted read-only by the test; root, as in CI) is refused at
// start, exit 2, naming data_dir.
func TestReadOnlyDataDirRefused(t *testing.T) {
	needBinary(t)
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	mount(t, dir, syscall.MS_RDONLY, "size=64k")
	code, stderr := runServe(t, nil, "--data-dir", dir)
	if code != exitUsage || !strings.Contains(stderr, "data_dir") || !strings.Contains(stderr, dir) || !strings.Contains(stderr, "read-only") {
		t.Fatalf("read-only data_dir: exit %d, want 2 naming data_dir %s:\n%s", code, dir, stderr)
	}
}

// mount mounts a tmpfs on dir for the test; it fails (never skips) when it
// cannot: CI runs as root.
func mount(t *testing.T, dir string, flags uintptr, opts string) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", flags, opts); err != nil {
		t.Fatalf("mount a tmpfs (%s) on %s (run as root, as CI does): %v", opts, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

// segmentFrames returns the offsets at which the frames of a segment file
// begin, and its size (frames: a 3-byte little-endian payload length, 5
// bytes of checks, the payload; after a 32-byte header; wal/doc.go).
func segmentFrames(t *testing.T, path string) (starts []int64, size int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(32)
	for off+8 <= int64(len(b)) {
		n := int64(b[off]) | int64(b[off+1])<<8 | int64(b[off+2])<<16
		if n == 0 || off+8+n > int64(len(b)) {
			break
		}
		starts = append(starts, off)
		off += 8 + n
	}
	return starts, int64(len(b))
}

// onlyReserves reports whether every frame of the segment at path that
// starts at one of starts holds a RecReserve record: what a start appends
// (its token reservation) after the records it replayed.
func onlyReserves(t *testing.T, path string, starts []int64) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range starts {
		if off+10 > int64(len(b)) || engine.RecordKind(b[off+9]) != engine.RecReserve {
			return false
		}
	}
	return true
}

// newestSegment is the path of the last segment in dir.
func newestSegment(t *testing.T, dir string) string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segment in %s (%v)", dir, err)
	}
	return segs[len(segs)-1]
}

var offsetRE = regexp.MustCompile(`offset[= ](\d+)`)

// TestTornTailStarts: a segment cut at a random byte inside its last
// records (what a crash in the middle of a write leaves) starts, with a
// warning that names the file and the offset of the torn record.
func TestTornTailStarts(t *testing.T) {
	needBinary(t)
	dir := t.TempDir()
	writeLog(t, dir, 200)
	seg := newestSegment(t, dir)
	starts, size := segmentFrames(t, seg)
	if len(starts) < 10 {
		t.Fatalf("%s holds %d frames", seg, len(starts))
	}
	// A byte strictly inside one of the last 10 frames: a torn record.
	i := len(starts) - 1 - rand.IntN(10)
	end := size
	if i+1 < len(starts) {
		end = starts[i+1]
	}
	cut := starts[i] + 1 + rand.Int64N(end-starts[i]-1)
	if err := os.Truncate(seg, cut); err != nil {
		t.Fatal(err)
	}
	n := startServe(t, dir, nil)
	stderr := n.stderr.String()
	m := offsetRE.FindStringSubmatch(stderr)
	if !strings.Contains(stderr, "torn") || !strings.Contains(stderr, seg) || m == nil || m[1] != strconv.FormatInt(starts[i], 10) {
		t.Fatalf("cut %s at %d (inside the frame at %d): want a warning naming the file and offset %d:\n%s", seg, cut, starts[i], starts[i], stderr)
	}
	if code := n.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	// The start appends its token reservation after the repaired tail.
	if got, _ := segmentFrames(t, seg); len(got) <= i || got[i] != starts[i] || !onlyReserves(t, seg, got[i:]) {
		t.Fatalf("%s after the repair of its tail: frames at %v, want the %d before the torn one, then the start's reservation", seg, got, i)
	}
}

// TestDamagedLastRecordRefused: a byte flipped in the last record of the
// log, written whole (a node killed after its last answer), stops the start
// as damage before the tail does (exit 2, the file, the offset and the
// flag). Before, it was cut off as a torn write and the node started
// without it: the change it had answered (here a grant) silently gone.
func TestDamagedLastRecordRefused(t *testing.T) {
	needBinary(t)
	dir := t.TempDir()
	writeLog(t, dir, 20)
	seg := newestSegment(t, dir)
	starts, _ := segmentFrames(t, seg)
	last := starts[len(starts)-1]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	end := last + 8 + (int64(b[last]) | int64(b[last+1])<<8 | int64(b[last+2])<<16)
	if b[end-1] == 0 {
		t.Fatalf("the last frame of %s ends in a zero byte; the test needs one written to its end", seg)
	}
	b[last+8] ^= 0x20 // in the payload
	if err := os.WriteFile(seg, b, 0o640); err != nil {
		t.Fatal(err)
	}
	code, stderr := runServe(t, nil, "--data-dir", dir)
	for _, w := range []string{"data_dir " + dir, seg, "offset " + strconv.FormatInt(last, 10), "--repair-log"} {
		if code != exitUsage || !strings.Contains(stderr, w) {
			t.Fatalf("flipped a byte of the last frame, at %d of %s: exit %d, want 2 and a message with %q:\n%s", last, seg, code, w, stderr)
		}
	}
}

// TestDamagedLogRefused: a byte flipped in a record before the tail stops
// the start (exit 2) with a message naming the file, the offset and the
// flag that starts anyway; with that flag the node starts, keeps the
// records before the damage and says what it dropped.
func TestDamagedLogRefused(t *testing.T) {
	needBinary(t)
	dir := t.TempDir()
	writeLog(t, dir, 200)
	seg := newestSegment(t, dir)
	starts, _ := segmentFrames(t, seg)
	i := len(starts)/4 + rand.IntN(len(starts)/2) // well before the tail
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[starts[i]+8] ^= 0x20 // in the payload
	if err := os.WriteFile(seg, b, 0o640); err != nil {
		t.Fatal(err)
	}
	code, stderr := runServe(t, nil, "--data-dir", dir)
	want := []string{"data_dir " + dir, seg, "offset " + strconv.FormatInt(starts[i], 10), "--repair-log"}
	for _, w := range want {
		if code != exitUsage || !strings.Contains(stderr, w) {
			t.Fatalf("flipped a byte of the frame at %d of %s: exit %d, want 2 and a message with %q:\n%s", starts[i], seg, code, w, stderr)
		}
	}
	n := startServe(t, dir, nil, "--repair-log")
	if s := n.stderr.String(); !strings.Contains(s, "repair") || !strings.Contains(s, seg) {
		t.Fatalf("--repair-log: no warning naming %s and what was dropped:\n%s", seg, s)
	}
	if code := n.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if got, _ := segmentFrames(t, seg); len(got) <= i || !onlyReserves(t, seg, got[i:]) {
		t.Fatalf("after --repair-log %s holds %d records, want the %d before the damage and the start's reservation", seg, len(got), i)
	}
	// Repaired: it starts without the flag now.
	n = startServe(t, dir, nil)
	if code := n.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestCorruptTokenMarkRefused: an empty (or blank) token-hwm is not a
// crash's leftover (the file is only ever replaced whole), so the start
// is refused, exit 2, naming the file and the flag that starts anyway (it
// was exit 1 with no hint); with --repair-log the node warns, naming the
// file, writes it anew and grants tokens above every token in the log.
func TestCorruptTokenMarkRefused(t *testing.T) {
	needBinary(t)
	for _, content := range []string{"", "\n"} {
		dir := t.TempDir()
		writeLog(t, dir, 20)
		file := filepath.Join(dir, "token-hwm")
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		code, stderr := runServe(t, nil, "--data-dir", dir)
		for _, w := range []string{file, "--repair-log"} {
			if code != exitUsage || !strings.Contains(stderr, w) {
				t.Fatalf("token-hwm %q: exit %d, want 2 and a message with %q:\n%s", content, code, w, stderr)
			}
		}
		n := startServe(t, dir, nil, "--repair-log")
		if s := n.stderr.String(); !strings.Contains(s, "repair") || !strings.Contains(s, file) {
			t.Fatalf("--repair-log: no warning naming %s:\n%s", file, s)
		}
		var logged uint64
		for i := range 20 {
			if h := n.status(fmt.Sprintf("log%d", i)).Holder; h != nil {
				logged = max(logged, h.Token)
			}
		}
		lc := newLockCaller(n.url)
		code, g, err := lc.call(http.MethodPost, "/locks/after?wait=0.001")
		lc.close()
		if err != nil || code != http.StatusOK || logged == 0 || g.Token <= logged {
			t.Fatalf("after the repair: %d %v, token %d; want above the log's %d", code, err, g.Token, logged)
		}
		if code := n.stop(); code != 0 {
			t.Fatalf("exit %d", code)
		}
		// Repaired: it starts without the flag now.
		n = startServe(t, dir, nil)
		if code := n.stop(); code != 0 {
			t.Fatalf("exit %d", code)
		}
	}
}

// TestRemovedLogRefused: a data_dir whose log files were all removed
// (every *.wal, no snapshot) but whose token-hwm is there, which a node
// writes only once its log exists, stops the start (exit 2, naming
// data_dir and the flag), as damage does: it started with no lock and no
// word, although it had answered 20 grants (README: "baton never starts
// silently with less than it had"); so does the file naming the newest
// segment, with the token-hwm removed too. With --repair-log it starts with an
// empty log, warns, and grants tokens above every one it issued.
func TestRemovedLogRefused(t *testing.T) {
	needBinary(t)
	dir := t.TempDir()
	writeLog(t, dir, 20)
	mark, err := os.ReadFile(filepath.Join(dir, "token-hwm"))
	if err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	for _, s := range segs {
		if err := os.Remove(s); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // refused again: the refusal leaves no new log behind
		code, stderr := runServe(t, nil, "--data-dir", dir)
		for _, w := range []string{"data_dir " + dir, "token-hwm", "--repair-log"} {
			if code != exitUsage || !strings.Contains(stderr, w) {
				t.Fatalf("every segment removed: exit %d, want 2 and a message with %q:\n%s", code, w, stderr)
			}
		}
	}
	// The token-hwm removed too: the file naming the newest segment is
	// the evidence (breaker report of 2026-12-05: it started empty, 50
	// answered grants gone, without a word).
	hwm := filepath.Join(dir, "token-hwm")
	if err := os.Rename(hwm, hwm+".away"); err != nil {
		t.Fatal(err)
	}
	code, stderr := runServe(t, nil, "--data-dir", dir)
	for _, w := range []string{"data_dir " + dir, "newest-segment", "--repair-log"} {
		if code != exitUsage || !strings.Contains(stderr, w) {
			t.Fatalf("every segment and the token-hwm removed: exit %d, want 2 and a message with %q:\n%s", code, w, stderr)
		}
	}
	if err := os.Rename(hwm+".away", hwm); err != nil {
		t.Fatal(err)
	}
	n := startServe(t, dir, nil, "--repair-log")
	if s := n.stderr.String(); !strings.Contains(s, "repair") || !strings.Contains(s, dir) {
		t.Fatalf("--repair-log: no warning naming %s:\n%s", dir, s)
	}
	issued, err := strconv.ParseUint(strings.TrimSpace(string(mark)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	lc := newLockCaller(n.url)
	code, g, err := lc.call(http.MethodPost, "/locks/after?wait=0.001")
	lc.close()
	if err != nil || code != http.StatusOK || g.Token <= issued {
		t.Fatalf("after the repair: %d %v, token %d; want above the mark %d", code, err, g.Token, issued)
	}
	if code := n.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	n = startServe(t, dir, nil) // a log again: it starts without the flag
	if code := n.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// writeLog has a `baton serve` on dir write records changes (grants of
// keys held for 10 minutes), then kills it (kill -9), so that the log
// holds them all and no snapshot.
func writeLog(t *testing.T, dir string, records int) {
	t.Helper()
	n := startServe(t, dir, nil)
	lc := newLockCaller(n.url)
	defer lc.close()
	for i := range records {
		if code, _, err := lc.call(http.MethodPost, fmt.Sprintf("/locks/log%d?lease=600&wait=0.001", i)); err != nil || code != http.StatusOK {
			t.Fatalf("acquire log%d: %d %v", i, code, err)
		}
	}
	if err := n.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-n.exited
}

// TestUnreadableLogIsAUsageError: a segment of data_dir that the node's
// user may not read (another user's file, mode 0640) stops the start with
// exit 2, as a data_dir it cannot write does (README: "A data_dir that
// cannot be created or written (permissions, ...) is refused at start,
// exit 2"); it was exit 1, an error of the running node. The error is the
// one wal.Open returns for it (found as user nobody on a root-owned log).
func TestUnreadableLogIsAUsageError(t *testing.T) {
	seg := "/var/lib/baton/00000000000000000001.wal"
	err := walStartError("/var/lib/baton", fmt.Errorf("wal: read %s: %w", seg, &fs.PathError{Op: "open", Path: seg, Err: syscall.EACCES}))
	if code := exitCode(err); code != exitUsage || !strings.Contains(err.Error(), "data_dir /var/lib/baton") || !strings.Contains(err.Error(), seg) {
		t.Fatalf("an unreadable segment: exit %d, %q; want 2 and a message naming data_dir and the file", code, err)
	}
}

// TestDataDirOfAnotherUserIsAUsageError: run as user nobody on a data_dir
// it may write but whose files are root's, the node stops with exit 2 and
// says that its user must read and write every file, for a segment it may
// not read, for a token-hwm it may not read, and for a token-hwm it may
// read and write but not replace (root's, in a data_dir with the sticky
// bit: the rename of token-hwm.tmp over it is refused). The first two were
// exit 1 (an error of the running node) while a segment it could read but
// not write was exit 2; the third started and served, and then answered
// every grant 503 (the mark could not be written), where the README says a
// file the node's user may not replace is refused at start. Needs root (to
// be root's files and to start a node as nobody).
func TestDataDirOfAnotherUserIsAUsageError(t *testing.T) {
	needBinary(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: starts a node as user nobody")
	}
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(base, "baton")
	b, err := os.ReadFile(batonBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "data")
	writeLog(t, dir, 3)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	seg := newestSegment(t, dir)
	hwm := filepath.Join(dir, "token-hwm")
	for _, c := range []struct {
		name          string
		segMode, hwmM os.FileMode
		dirMode       os.FileMode
		names         string
	}{
		{"a segment it may not read", 0o640, 0o666, 0o777, seg},
		{"a token-hwm it may not read", 0o666, 0o600, 0o777, hwm},
		{"a token-hwm it may not replace", 0o666, 0o666, 0o777 | os.ModeSticky, hwm},
	} {
		if err := os.Chmod(seg, c.segMode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(hwm, c.hwmM); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, c.dirMode); err != nil {
			t.Fatal(err)
		}
		_ = os.Remove(filepath.Join(dir, "LOCK"))
		addr := freeAddr(t)
		cmd := exec.Command(bin, "serve", "--listen", addr, "--data-dir", dir)
		cmd.Env = cleanEnv()
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := runUntilServing(t, cmd, addr) // it stops at once: it never serves
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitUsage || !strings.Contains(stderr.String(), c.names) ||
			!strings.Contains(stderr.String(), "must be able to read and write every file") {
			t.Errorf("%s: %v, want exit 2 and a message naming %s and what the user needs:\n%s", c.name, err, c.names, stderr.String())
		}
	}
}

// runUntilServing runs cmd, a node that should refuse to start, to its
// end; a node that serves instead (its /readyz answers) is killed, and
// the error says so.
func runUntilServing(t *testing.T, cmd *exec.Cmd, addr string) error {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case err := <-done:
			return err
		default:
		}
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			resp.Body.Close()
			_ = cmd.Process.Kill()
			<-done
			return errors.New("the node started and served")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDirectoryInPlaceOfADataFileRefused: a directory where token-hwm, a
// segment or a snapshot belongs stops the start with exit 2, naming it
// (breaker H: it was exit 1, the segment's path said twice), as a file
// the node may not read does.
func TestDirectoryInPlaceOfADataFileRefused(t *testing.T) {
	needBinary(t)
	for _, name := range []string{"token-hwm", "00000000000000000001.wal", "00000000000000000005.snap"} {
		dir := t.TempDir()
		writeLog(t, dir, 3)
		file := filepath.Join(dir, name)
		if err := os.RemoveAll(file); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(file, 0o755); err != nil {
			t.Fatal(err)
		}
		code, stderr := runServe(t, nil, "--data-dir", dir)
		if code != exitUsage || !strings.Contains(stderr, file) || !strings.Contains(stderr, "a directory stands where") || strings.Count(stderr, file) != 1 {
			t.Fatalf("%s a directory: exit %d, want 2 and a message naming it once:\n%s", name, code, stderr)
		}
	}
}
