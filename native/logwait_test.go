package native_test

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/native"
)

// failLog is an engine.Log whose writes can be made to fail.
type failLog struct {
	mu   sync.Mutex
	n    uint64
	fail bool
}

func (l *failLog) Append([]byte) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	return l.n, nil
}

func (l *failLog) Wait(uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail {
		return errors.New("input/output error")
	}
	return nil
}

func (l *failLog) setFail(v bool) {
	l.mu.Lock()
	l.fail = v
	l.mu.Unlock()
}

// metricsRec records the answers' (op, outcome).
type metricsRec struct {
	mu  sync.Mutex
	got []string
}

func (m *metricsRec) ObserveNative(op, outcome string, _ time.Duration) {
	m.mu.Lock()
	m.got = append(m.got, op+" "+outcome)
	m.mu.Unlock()
}

func (m *metricsRec) Delivered(string, uint64) {}

func (m *metricsRec) take() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	got := m.got
	m.got = nil
	return got
}

// TestAnswersWaitForTheLog: the writer answers a release, a renewal and a
// grant (at once or handed on) only once the log has written them; when it
// cannot, each is answered E unavailable (a grant nobody heard of is
// released), and the metrics count that outcome, not OK.
func TestAnswersWaitForTheLog(t *testing.T) {
	log := &failLog{}
	m := &metricsRec{}
	e := newEnv(t, engine.Config{Log: log}, native.Config{Metrics: m})
	h := e.dial()
	h.send("A k 60 -")
	tok := grant(t, h.read(), "k")
	w := e.dial()
	w.send("A k 60 -")
	waitFor(t, func() bool { li, _ := e.eng.Status("k"); return li.Waiters == 1 })
	m.take()

	log.setFail(true)
	h.send("N k "+strconv.FormatUint(tok, 10)+" 30", "R k "+strconv.FormatUint(tok, 10))
	for _, want := range []string{"N k E unavailable ", "R k E unavailable "} {
		if line := h.read(); !strings.HasPrefix(line, want) {
			t.Fatalf("got %q, want %q…", line, want)
		}
	}
	// The release was made (the engine hands on before the log writes);
	// the grant to the waiter could not be written: it is answered E and
	// released, nobody holding it.
	if line := w.read(); !strings.HasPrefix(line, "A k E unavailable ") {
		t.Fatalf("waiter: got %q, want E unavailable", line)
	}
	waitFor(t, func() bool { li, _ := e.eng.Status("k"); return li.Holder == nil && li.Waiters == 0 })
	got := strings.Join(m.take(), ",")
	for _, want := range []string{"N unavailable", "R unavailable", "A unavailable"} {
		if !strings.Contains(got, want) {
			t.Errorf("metrics %q lack %q", got, want)
		}
	}
	if strings.Contains(got, "OK") {
		t.Errorf("metrics %q count an OK the log did not write", got)
	}

	log.setFail(false)
	h.send("A k 60 -")
	tok = grant(t, h.read(), "k")
	h.send("R k " + strconv.FormatUint(tok, 10))
	if line := h.read(); line != "R k OK" {
		t.Fatal(line)
	}
}

// TestARefusalWaitsForTheStateItRestsOn: a repeated release (or a
// renewal) of a token whose release the log could not write found nobody
// holding the lock and answered "E not_held" at once, though that rested
// on the unwritten release, which a stop or a handoff loses. It is E
// unavailable while the log fails, its metric too, and E not_held once
// the log writes; refusals on a written state keep their order among
// the connection's other answers.
func TestARefusalWaitsForTheStateItRestsOn(t *testing.T) {
	log := &failLog{}
	m := &metricsRec{}
	e := newEnv(t, engine.Config{Log: log}, native.Config{Metrics: m})
	h := e.dial()
	h.send("A k 60 -")
	tok := strconv.FormatUint(grant(t, h.read(), "k"), 10)
	m.take()

	log.setFail(true)
	h.send("R k "+tok, "R k "+tok, "N k "+tok+" 30", "R k force")
	for _, want := range []string{"R k E unavailable the node made the change", "R k E unavailable nobody", "N k E unavailable nobody", "R k E unavailable nobody"} {
		if line := h.read(); !strings.HasPrefix(line, want) {
			t.Fatalf("the log failing: got %q, want %q…", line, want)
		}
	}
	if got := strings.Join(m.take(), ","); got != "R unavailable,R unavailable,N unavailable,R unavailable" {
		t.Errorf("metrics %q; want every answer counted unavailable", got)
	}

	log.setFail(false)
	h.send("R k "+tok, "A j 60 -", "N k "+tok+" 30")
	if line := h.read(); !strings.HasPrefix(line, "R k E not_held ") {
		t.Fatalf("the log writing: got %q, want E not_held", line)
	}
	grant(t, h.read(), "j")
	if line := h.read(); !strings.HasPrefix(line, "N k E not_held ") {
		t.Fatalf("the log writing: got %q, want E not_held", line)
	}
}

// holdLog is an engine.Log whose Wait can be held: while held, each Wait
// signals entered and blocks until go on is closed, then succeeds (as
// cluster.SyncLog does for a wait that began after a step-down).
type holdLog struct {
	mu      sync.Mutex
	n       uint64
	hold    bool
	entered chan struct{}
	goOn    chan struct{}
}

func (l *holdLog) Append([]byte) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	return l.n, nil
}

func (l *holdLog) Wait(uint64) error {
	l.mu.Lock()
	hold := l.hold
	l.mu.Unlock()
	if hold {
		l.entered <- struct{}{}
		<-l.goOn
	}
	return nil
}

// TestAReleaseOrRenewalMadeBeforeAStepDownIsNotAnsweredOK: a release or
// renewal whose answer waits (in the connection's queue, then for the
// log) while the node steps down (Demote, Diverged) is answered E
// unavailable, not OK: the active the node now follows may never have had
// it (engine.ErrReplaced). The renewal had this rule; the release was
// answered "R OK" (it carried no generation), a forced one too.
func TestAReleaseOrRenewalMadeBeforeAStepDownIsNotAnsweredOK(t *testing.T) {
	for _, line := range []string{"R k %s", "R k force", "N k %s 30"} {
		op := line[:1]
		t.Run(line, func(t *testing.T) {
			log := &holdLog{entered: make(chan struct{}, 1), goOn: make(chan struct{})}
			e := newEnv(t, engine.Config{Log: log}, native.Config{})
			h := e.dial()
			h.send("A k 60 -")
			tok := strconv.FormatUint(grant(t, h.read(), "k"), 10)

			log.mu.Lock()
			log.hold = true
			log.mu.Unlock()
			h.send(strings.Replace(line, "%s", tok, 1))
			<-log.entered // made, its answer waits for the log
			e.eng.Demote()
			e.eng.Diverged()
			close(log.goOn)
			want := op + " k E unavailable "
			if line := h.read(); !strings.HasPrefix(line, want) {
				t.Fatalf("made before a step-down, answered after it: got %q, want %q…", line, want)
			}
		})
	}
}
