package cluster

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/internal/testproc"
	"github.com/baton-io/baton/wal"
)

// TestStandbyLogsARefusedAcknowledgementConnection: a standby whose active
// refuses its acknowledgement connection (here 426, as a node of another
// baton version answers) says so in its log, once per refusal however
// often it tries again, since the active's sync_standbys then never count
// it.
func TestStandbyLogsARefusedAcknowledgementConnection(t *testing.T) {
	var tries atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tries.Add(1)
		w.Header().Set("Upgrade", "baton-acks/99")
		http.Error(w, `Upgrade: "baton-acks/2", want "baton-acks/99": run the same baton version on every node`, http.StatusUpgradeRequired)
	}))
	defer srv.Close()
	var buf testproc.Buffer
	l, err := wal.Open(wal.DefaultConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ec := engine.DefaultConfig()
	ec.Standby, ec.Log, ec.DataDir = true, l, t.TempDir()
	eng, err := engine.New(ec)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	n, err := New(Config{
		Self: "http://127.0.0.9:1", Peers: []string{srv.URL, "http://127.0.0.9:1"},
		Heartbeat: 10 * time.Millisecond, FailoverTimeout: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&buf, nil)), Log: l,
	}, eng)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.acker(ctx, srv.URL, &ackConn{count: new(atomic.Uint64)}, new(atomic.Uint64))
	}()
	for tries.Load() < 5 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	out := buf.String()
	if got := strings.Count(out, "refused the acknowledgement connection"); got != 1 {
		t.Fatalf("%d log lines about the refusal after %d tries, want 1:\n%s", got, tries.Load(), out)
	}
	if !strings.Contains(out, "426") || !strings.Contains(out, "run the same baton version") {
		t.Errorf("the log line does not give the active's answer:\n%s", out)
	}
}
