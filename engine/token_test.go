package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Fencing tokens (SPEC section 1): strictly rising across keys and restarts,
// below 2^53, the high-water mark persisted in the data directory.

func readHWM(t testing.TB, dir string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, tokenFile))
	if err != nil {
		t.Fatalf("reading the high-water mark: %v", err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("high-water mark %q: %v", b, err)
	}
	return v
}

func writeHWM(t testing.TB, dir, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, tokenFile), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestTokensRiseAcrossKeysAndRestarts(t *testing.T) {
	dir := t.TempDir()
	var last uint64
	check := func(what string, tok uint64) {
		t.Helper()
		if tok <= last {
			t.Fatalf("%s: token %d not above the previous %d", what, tok, last)
		}
		if tok >= 1<<53 {
			t.Fatalf("%s: token %d not below 2^53", what, tok)
		}
		last = tok
	}
	clocks := []func() time.Time{
		nil, // the real clock
		func() time.Time { return time.Now().Add(-time.Hour) },     // went back an hour
		func() time.Time { return time.Unix(1, 0) },                // stuck near the epoch
		func() time.Time { return time.Now().Add(24 * time.Hour) }, // jumped forward
		nil,
	}
	for round, now := range clocks {
		var clock Clock
		if now != nil {
			clock = newStepClock(now)
		}
		e := newEngine(t, Config{DataDir: dir, Clock: clock})
		if e.LastToken() < last {
			t.Fatalf("round %d: LastToken %d after restart; below %d", round, e.LastToken(), last)
		}
		for i := range 40 {
			k := fmt.Sprintf("r%d/k%d", round, i)
			g, err := e.Acquire(context.Background(), AcquireRequest{Key: k, Lease: time.Minute})
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			check(fmt.Sprintf("round %d grant %d", round, i), g.Token)
			if i%3 == 0 {
				continue // some stay held across the restart
			}
			if err := e.Release(k, g.Token); err != nil {
				t.Fatal(err)
			}
		}
		if e.LastToken() != last {
			t.Fatalf("round %d: LastToken = %d; want %d", round, e.LastToken(), last)
		}
		if err := e.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		if hwm := readHWM(t, dir); hwm < last {
			t.Fatalf("round %d: high-water mark %d below the last token %d", round, hwm, last)
		}
	}
}

// TestTokenCeilingOnDisk: no token is handed out before a mark at least as
// high is on disk, so that a crash (no Close) never lets a restart repeat it.
func TestTokenCeilingOnDisk(t *testing.T) {
	dir := t.TempDir()
	e := newEngine(t, Config{DataDir: dir, TokenMargin: 50 * time.Microsecond})
	defer e.Close()
	for i := range 300 {
		k := fmt.Sprint("k", i%5)
		g := mustAcquire(t, e, AcquireRequest{Key: k})
		if hwm := readHWM(t, dir); hwm < g.Token {
			t.Fatalf("grant %d: token %d issued while the mark on disk is %d", i, g.Token, hwm)
		}
		if err := e.Release(k, g.Token); err != nil {
			t.Fatal(err)
		}
	}
	// A crash now: a new engine on the same directory (the mark as it is on
	// disk, without Close's flush) continues above every issued token.
	crash := t.TempDir()
	b, err := os.ReadFile(filepath.Join(dir, tokenFile))
	if err != nil {
		t.Fatal(err)
	}
	writeHWM(t, crash, string(b))
	e2 := newEngine(t, Config{DataDir: crash, Clock: newStepClock(func() time.Time { return time.Unix(1, 0) })})
	defer e2.Close()
	if g := mustAcquire(t, e2, AcquireRequest{Key: "k"}); g.Token <= e.LastToken() {
		t.Fatalf("after a crash: token %d, not above %d", g.Token, e.LastToken())
	}
}

func TestTokenFileCorrupt(t *testing.T) {
	for name, content := range map[string]string{
		"garbage":  "garbage\n",
		"empty":    "",
		"negative": "-5\n",
		"trailing": "12abc\n",
		"2^53":     "9007199254740992\n",
		"too big":  "99999999999999999999999\n",
		"float":    "1.5e15\n",
	} {
		dir := t.TempDir()
		writeHWM(t, dir, content)
		e, err := New(Config{DataDir: dir})
		if err == nil {
			e.Close()
			t.Errorf("%s (%q): New succeeded; want an error", name, content)
			continue
		}
		if !strings.Contains(err.Error(), "data_dir") {
			t.Errorf("%s: error %q does not name data_dir", name, err)
		}
		var te *TokenMarkError
		if !errors.As(err, &te) || te.File != filepath.Join(dir, tokenFile) || string(te.Content) != content {
			t.Errorf("%s: error %#v, want a *TokenMarkError naming the file and its content", name, err)
		}
		// The file is left as it was, for a person to look at.
		if b, _ := os.ReadFile(filepath.Join(dir, tokenFile)); string(b) != content {
			t.Errorf("%s: file rewritten to %q", name, b)
		}
		// RepairTokenMark starts anyway: the mark written anew (0), and
		// the tokens above what the log replays (here a grant observed
		// as replicated) even with a clock stuck near the epoch.
		e, err = New(Config{DataDir: dir, RepairTokenMark: true, Clock: newStepClock(func() time.Time { return time.Unix(1, 0) })})
		if err != nil {
			t.Errorf("%s: New with RepairTokenMark: %v", name, err)
			continue
		}
		if got := readHWM(t, dir); got != 0 {
			t.Errorf("%s: repaired mark %d, want 0", name, got)
		}
		const logged = 1 << 40
		e.ObserveToken(logged)
		if g := mustAcquire(t, e, AcquireRequest{Key: "k"}); g.Token <= logged || readHWM(t, dir) < g.Token {
			t.Errorf("%s: after the repair: token %d (mark %d), want above %d and at most the mark", name, g.Token, readHWM(t, dir), uint64(logged))
		}
		e.Close()
	}
	// A mark that cannot be read at all.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, tokenFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if e, err := New(Config{DataDir: dir}); err == nil {
		e.Close()
		t.Error("New with an unreadable mark succeeded")
	}
	// A data_dir that cannot be created.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if e, err := New(Config{DataDir: filepath.Join(file, "sub")}); err == nil {
		e.Close()
		t.Error("New with a data_dir under a file succeeded")
	}
}

func TestTokenFutureCeilingRespected(t *testing.T) {
	dir := t.TempDir()
	future := uint64(time.Now().Add(10 * 365 * 24 * time.Hour).UnixMicro())
	writeHWM(t, dir, strconv.FormatUint(future, 10)+"\n")
	e := newEngine(t, Config{DataDir: dir})
	g := mustAcquire(t, e, AcquireRequest{Key: "k"})
	if g.Token <= future {
		t.Fatalf("token %d; want above the persisted %d", g.Token, future)
	}
	g2 := mustAcquire(t, e, AcquireRequest{Key: "k2"})
	if g2.Token <= g.Token {
		t.Fatalf("token %d after %d", g2.Token, g.Token)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if hwm := readHWM(t, dir); hwm < g2.Token {
		t.Fatalf("mark %d after Close; below %d", hwm, g2.Token)
	}
}

func TestTokenSpaceExhausted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		writeHWM(t, dir, strconv.FormatUint(MaxToken-2, 10))
		e := newEngine(t, Config{DataDir: dir})
		defer e.Close()
		g := mustAcquire(t, e, AcquireRequest{Key: "k"})
		if g.Token != MaxToken-1 {
			t.Fatalf("token %d; want 2^53-1", g.Token)
		}
		_, err := e.Acquire(context.Background(), AcquireRequest{Key: "other", ID: "x"})
		wantErr(t, "Acquire past 2^53", err, ErrTokenSpace)
		wantCounts(t, e, 1, 0)
		w := goAcquire(e, context.Background(), AcquireRequest{Key: "k", ID: "w"})
		synctest.Wait()
		if err := e.Release("k", g.Token); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		wantErr(t, "waiter past 2^53", answered(t, "w", w).err, ErrTokenSpace)
		wantHolder(t, e, "k", 0, 0)
		wantCounts(t, e, 0, 0)
		if e.LastToken() != MaxToken-1 {
			t.Fatalf("LastToken %d", e.LastToken())
		}
	})
}

// TestTokensRiseUnderConcurrency: tokens are unique and each key's tokens
// rise, with many goroutines on many shards.
func TestTokensRiseUnderConcurrency(t *testing.T) {
	e := newEngine(t, Config{DataDir: t.TempDir(), TokenMargin: time.Millisecond})
	defer e.Close()
	const workers, per = 8, 300
	out := make(chan []uint64, workers)
	for w := range workers {
		go func() {
			var toks []uint64
			for i := range per {
				k := fmt.Sprintf("w%d/%d", w, i%3)
				g, err := e.Acquire(context.Background(), AcquireRequest{Key: k})
				if err != nil {
					t.Error(err)
					break
				}
				toks = append(toks, g.Token)
				if err := e.Release(k, g.Token); err != nil {
					t.Error(err)
					break
				}
			}
			out <- toks
		}()
	}
	seen := map[uint64]bool{}
	for range workers {
		toks := <-out
		for i, tok := range toks {
			if seen[tok] {
				t.Fatalf("token %d issued twice", tok)
			}
			seen[tok] = true
			if i > 0 && tok <= toks[i-1] {
				t.Fatalf("token %d after %d in one goroutine", tok, toks[i-1])
			}
			if tok > e.LastToken() {
				t.Fatalf("token %d above LastToken %d", tok, e.LastToken())
			}
		}
	}
}

// TestTokenMarkUnwritableIsUnavailable: when the high-water mark cannot be
// written (a full or failing disk), a grant that needs a higher mark is
// refused as ErrUnavailable (HTTP 503, retry), a queued waiter keeps its
// place, and grants resume by themselves once the mark can be written.
func TestTokenMarkUnwritableIsUnavailable(t *testing.T) {
	dir := t.TempDir()
	e := newEngine(t, Config{DataDir: dir, TokenMargin: 50 * time.Microsecond})
	defer e.Close()
	g := mustAcquire(t, e, AcquireRequest{Key: "held"})
	// The mark is written to a temporary file first: a directory in its
	// place makes every write fail, even for root.
	block := filepath.Join(dir, tokenFile+".tmp")
	if err := os.Mkdir(block, 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond) // past the ceiling: the next grant needs a new mark
	_, err := e.Acquire(context.Background(), AcquireRequest{Key: "free"})
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrTokenMarkUnwritable) {
		t.Fatalf("acquire with the mark unwritable: %v, want ErrTokenMarkUnwritable (an ErrUnavailable)", err)
	}
	if e.TokenMarkWritable() {
		t.Fatal("TokenMarkWritable while every change is refused: baton_log_healthy would stay 1")
	}
	got := make(chan error, 1)
	go func() {
		_, err := e.Acquire(context.Background(), AcquireRequest{Key: "held", ID: "w1", Wait: time.Minute})
		got <- err
	}()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, w := e.Counts(); w == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the acquire never queued")
		}
	}
	if err := e.Release("held", g.Token); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the queued waiter, once the mark can be written: %v", err)
	}
	if _, err := e.Acquire(context.Background(), AcquireRequest{Key: "free"}); err != nil {
		t.Fatalf("acquire once the mark can be written: %v", err)
	}
	if !e.TokenMarkWritable() {
		t.Fatal("TokenMarkWritable false once the mark was written again")
	}
}

// TestTokenMarkFailureIsReported: a token high-water mark that cannot be
// written refused every grant (503) while nothing said why: the log
// wrote on, so no log line, no baton_log_failures_total. Config.OnTokenMark
// now hears of the failure once, with its error, and of the recovery once
// (from the engine's own goroutine: tokenMarkCalls waits for it).
func TestTokenMarkFailureIsReported(t *testing.T) {
	dir := t.TempDir()
	calls := make(chan error, 16)
	e := newEngine(t, Config{DataDir: dir, TokenMargin: 50 * time.Microsecond, OnTokenMark: func(err error) { calls <- err }})
	defer e.Close()
	mustAcquire(t, e, AcquireRequest{Key: "a"})
	block := filepath.Join(dir, tokenFile+".tmp")
	if err := os.Mkdir(block, 0o755); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		time.Sleep(time.Millisecond)
		if _, err := e.Acquire(context.Background(), AcquireRequest{Key: "free"}); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("acquire with the mark unwritable: %v, want ErrUnavailable", err)
		}
	}
	if err := tokenMarkCall(t, calls); err == nil || !strings.Contains(err.Error(), "token high-water mark") {
		t.Fatalf("OnTokenMark while failing: %v; want the write's error", err)
	}
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, e, AcquireRequest{Key: "free"})
	mustAcquire(t, e, AcquireRequest{Key: "free2"})
	if err := tokenMarkCall(t, calls); err != nil {
		t.Fatalf("OnTokenMark after the recovery: %v; want nil", err)
	}
	e.Close() // waits for the engine's goroutines: every call was made
	if len(calls) != 0 {
		t.Fatalf("%d more OnTokenMark calls; want the failure and the recovery only, once each", len(calls))
	}
}

// tokenMarkCall returns the next OnTokenMark call's error from calls, or
// fails t when none comes within a bound meant for a stuck engine only.
func tokenMarkCall(t *testing.T, calls <-chan error) error {
	t.Helper()
	select {
	case err := <-calls:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("no OnTokenMark call")
		return nil
	}
}

// TestTokenMarkReportedOutsideTheShardLock: OnTokenMark was called by the
// grant that saw the mark's write fail, with the key's shard locked and
// the mark's mutex held, so a callback that blocked (baton logs it through
// slog: a handler writing to a stuck disk or pipe) held up that acquire and
// every call on its shard, and every grant needing the mark. It is now
// called from the engine's own goroutine: the acquire is answered (503)
// while the callback still blocks.
func TestTokenMarkReportedOutsideTheShardLock(t *testing.T) {
	dir := t.TempDir()
	entered := make(chan error, 4)
	unblock := make(chan struct{})
	e := newEngine(t, Config{DataDir: dir, TokenMargin: 50 * time.Microsecond, OnTokenMark: func(err error) {
		entered <- err
		<-unblock
	}})
	defer e.Close()
	defer close(unblock) // before Close, which waits for the callback
	mustAcquire(t, e, AcquireRequest{Key: "a"})
	if err := os.Mkdir(filepath.Join(dir, tokenFile+".tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond) // the wall clock passes the ceiling: the grant must write the mark
	res := make(chan error, 1)
	go func() {
		_, err := e.Acquire(context.Background(), AcquireRequest{Key: "free"})
		res <- err
	}()
	if err := tokenMarkCall(t, entered); err == nil {
		t.Fatal("OnTokenMark called with nil; want the write's error")
	}
	select {
	case err := <-res:
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("acquire with the mark unwritable: %v, want ErrUnavailable", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the acquire is held up by a blocked OnTokenMark: it was called under the shard's lock")
	}
	if _, err := e.Status("free"); err != nil {
		t.Fatalf("status of a key while OnTokenMark blocks: %v", err)
	}
}

// TestTokenMarkWritableAgainAsStandby: a node whose mark write failed
// while it was active, and that then became a standby, reported the mark
// unwritable (baton_log_healthy 0) after the disk had room again: only a
// grant that raised the mark cleared it, and a standby grants nothing.
// The engine now writes the mark again while it fails, whatever its role.
func TestTokenMarkWritableAgainAsStandby(t *testing.T) {
	dir := t.TempDir()
	e := newEngine(t, Config{DataDir: dir, TokenMargin: 50 * time.Microsecond})
	defer e.Close()
	mustAcquire(t, e, AcquireRequest{Key: "a"})
	block := filepath.Join(dir, tokenFile+".tmp")
	if err := os.Mkdir(block, 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond) // past the ceiling: the next grant needs a new mark
	if _, err := e.Acquire(context.Background(), AcquireRequest{Key: "free"}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("acquire with the mark unwritable: %v, want ErrUnavailable", err)
	}
	e.Demote()
	if e.TokenMarkWritable() {
		t.Fatal("TokenMarkWritable with the mark unwritable")
	}
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	// A bound for a stuck engine only; the retry comes every second.
	for deadline := time.Now().Add(20 * time.Second); !e.TokenMarkWritable(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a standby still reports the token mark unwritable after the disk took writes again")
		}
	}
}

// A high-water mark whose rename could not be made durable (the fsync of
// its directory failed) is a failed write: the ceiling is not raised (the
// write is tried again, and the engine reports the mark unwritable). The
// failure was ignored, so tokens were issued up to a ceiling that a
// power loss could take back with the rename.
func TestTokenMarkDirectorySyncFailureIsAFailedWrite(t *testing.T) {
	tk, err := openTokens(t.TempDir(), time.Millisecond, false)
	if err != nil {
		t.Fatal(err)
	}
	// durable.WriteFile reports its directory's fsync failing (its own
	// test shows it); here the write fails as it then does.
	old := writeFile
	defer func() { writeFile = old }()
	writeFile = func(string, []byte) error { return errors.New("fsync of the directory: input/output error") }
	if err := tk.persist(1000); err == nil {
		t.Errorf("persist with the directory's fsync failing: nil error, want the failure")
	}
	if c := tk.ceiling.Load(); c >= 1000 {
		t.Errorf("ceiling %d after a failed directory fsync, want below 1000", c)
	}
	writeFile = old
	if err := tk.persist(1000); err != nil || tk.ceiling.Load() != 1000 {
		t.Errorf("persist once the directory syncs: %v, ceiling %d; want nil, 1000", err, tk.ceiling.Load())
	}
}

// A promotion continues TokenMargin above every token seen, not only above
// the clock: tokens run ahead of the clock's microseconds while grants come
// faster than one a microsecond per class (16 units a grant in a cluster),
// and the old active's last grants, unreplicated with sync_standbys 0, hold
// tokens above the last one this node saw. With max(seen, now + margin),
// a node whose replicated tokens were a few seconds ahead of the clock
// went on just above them, below such a grant's token.
func TestPromotionReservesAboveTokensAheadOfTheClock(t *testing.T) {
	e := newEngine(t, Config{Standby: true})
	defer e.Close()
	ahead := uint64(time.Now().Add(10 * time.Second).UnixMicro()) // seen, 10 s ahead
	e.ObserveToken(ahead)
	first := e.Promote(Failover)
	if want := ahead + uint64(time.Second.Microseconds()); first <= want-1 {
		t.Fatalf("first token after the promotion %d, want above %d (the token seen plus TokenMargin, 1 s)", first, want-1)
	}
	g := mustAcquire(t, e, AcquireRequest{Key: "k"})
	if g.Token < first {
		t.Fatalf("grant %d below the promotion's first token %d", g.Token, first)
	}
}

// TestPromotionNearTheEndOfTheTokenSpace: a promotion's reservation
// (TokenMargin above the last token) never takes the last token to 2^53
// or past it (found by a tester: a token-hwm at 2^53-1 was reported as a
// last token of 2^53+999999, and written at shutdown as a mark the next
// start refused as corrupt). The node is out of tokens then, as it would
// be at 2^53-1, and says so; its mark stays one it starts on.
func TestPromotionNearTheEndOfTheTokenSpace(t *testing.T) {
	for _, hwm := range []uint64{MaxToken - 1, MaxToken - 500_000} {
		t.Run(strconv.FormatUint(MaxToken-hwm, 10)+" below 2^53", func(t *testing.T) {
			dir := t.TempDir()
			writeHWM(t, dir, strconv.FormatUint(hwm, 10))
			e := newEngine(t, Config{DataDir: dir, Standby: true})
			first := e.Promote(Failover)
			if last := e.LastToken(); last >= MaxToken {
				t.Fatalf("LastToken after the promotion %d, at or above 2^53", last)
			}
			if first <= hwm {
				t.Fatalf("first token after the promotion %d, not above the mark %d", first, hwm)
			}
			_, err := e.Acquire(context.Background(), AcquireRequest{Key: "k", ID: "x"})
			wantErr(t, "Acquire once the reservation reached 2^53-1", err, ErrTokenSpace)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			if got := readHWM(t, dir); got >= MaxToken {
				t.Fatalf("mark written at close %d, at or above 2^53", got)
			}
			again, err := New(Config{DataDir: dir})
			if err != nil {
				t.Fatalf("the next start refused the mark the node wrote: %v", err)
			}
			again.Close()
		})
	}
}

// TestRestartContinuesTokensAtTheMark: a single node's start (Restart)
// continues its tokens just above its token high-water mark, which bounds
// every token it issued, without the second a failover adds: restart
// after restart, tokens stay consecutive instead of running one more
// second ahead of the wall clock at each start (a tester's report: nine
// restarts in 3 s, tokens 9.7 s ahead of the clock; and a mark 20
// tokens below 2^53 left none). A failover still adds the second (the
// old active may have issued tokens this node never saw).
func TestRestartContinuesTokensAtTheMark(t *testing.T) {
	dir := t.TempDir()
	ahead := uint64(time.Now().Add(10 * time.Second).UnixMicro()) // a mark 10 s ahead of the clock
	writeHWM(t, dir, strconv.FormatUint(ahead, 10))
	want := ahead + 1
	for round := range 3 {
		e := newEngine(t, Config{DataDir: dir, Standby: true})
		if first := e.Promote(Restart); first != want {
			t.Fatalf("round %d: first token after the restart %d, want %d (the mark + 1)", round, first, want)
		}
		r, err := e.Acquire(context.Background(), AcquireRequest{Key: "k" + strconv.Itoa(round), Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if r.Token != want {
			t.Fatalf("round %d: token %d, want %d", round, r.Token, want)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		want++
	}
	e := newEngine(t, Config{DataDir: dir, Standby: true})
	if first := e.Promote(Failover); first < want+uint64(time.Second.Microseconds()) {
		t.Fatalf("first token after a failover %d, not a second above the last token %d", first, want-1)
	}
	e.Close()
}

// TestRestartNearTheEndOfTheTokenSpace: a mark 20 below 2^53 leaves a
// restarted single node its 20 tokens.
func TestRestartNearTheEndOfTheTokenSpace(t *testing.T) {
	dir := t.TempDir()
	writeHWM(t, dir, strconv.FormatUint(MaxToken-21, 10))
	e := newEngine(t, Config{DataDir: dir, Standby: true})
	e.Promote(Restart)
	var last uint64
	for i := range 20 {
		r, err := e.Acquire(context.Background(), AcquireRequest{Key: "k" + strconv.Itoa(i), Lease: time.Minute})
		if err != nil {
			t.Fatalf("acquire %d of the 20 tokens left: %v", i+1, err)
		}
		last = r.Token
	}
	if last != MaxToken-1 {
		t.Fatalf("the 20th token %d, want 2^53-1", last)
	}
	_, err := e.Acquire(context.Background(), AcquireRequest{Key: "one-more"})
	wantErr(t, "Acquire past 2^53-1", err, ErrTokenSpace)
	e.Close()
}

// TestClusterTokensStayWithinHalfAMarginOfTheClock: an active that issues
// tokens in a class (a cluster: 16 microseconds per token) and grants
// faster than one token a microsecond holds its new acquires back while
// its tokens run more than TokenMargin/2 ahead of the wall clock, so that
// a standby promoted after it dies, which continues TokenMargin above
// max(every token it saw, its clock), issues above every token it issued,
// however far its replication lagged (a verifier's report: a pipelined
// native client's 200,000 grants a second ran the tokens 3-5 s ahead of
// the clock, and after a failover with a standby that lagged 0.8 s the
// new active issued tokens 2.57 s below ones the dead active had
// answered).
func TestClusterTokensStayWithinHalfAMarginOfTheClock(t *testing.T) {
	const margin = 20 * time.Millisecond
	e := newEngine(t, Config{DataDir: t.TempDir(), Standby: true, TokenMargin: margin})
	defer e.Close()
	e.SetTokenClass(16, 3)
	e.Promote(Failover)
	// The promotion's reservation is a margin ahead: the first grants
	// start there, and the burst must not go past it by more than half a
	// margin beyond the clock.
	var worst time.Duration
	for i := range 20_000 {
		r, err := e.Acquire(context.Background(), AcquireRequest{Key: "burst-" + strconv.Itoa(i), Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		reserve := time.Now().Add(margin) // the promotion's floor, at the latest
		if lead := time.Duration(int64(r.Token)-reserve.UnixMicro()) * time.Microsecond; lead > worst {
			worst = lead
		}
	}
	// One grant's step of slack above half a margin: a token is rounded
	// up into the class after the check.
	if worst > margin/2+16*time.Microsecond {
		t.Fatalf("tokens ran %v ahead of max(clock, the promotion's reservation), more than half the margin (%v)", worst, margin/2)
	}
}
