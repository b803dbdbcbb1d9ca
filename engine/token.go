package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-io/baton/internal/durable"
)

// tokenFile is the name of the high-water mark file in Config.DataDir.
const tokenFile = "token-hwm"

// tokens issues fencing tokens (SPEC section 1):
//
//	next = max(last+1, wall-clock microseconds, persisted+1)
//
// rounded up into the node's class (Engine.SetTokenClass: in a cluster,
// each node issues only tokens equal to its priority modulo
// cluster.MaxPeers, so that two actives never issue the same one).
//
// Wall-clock microseconds keep tokens above anything an earlier holder of
// the role could have issued (when clocks agree); the persisted high-water
// mark keeps them above everything this node issued before a restart, even if
// the clock went back. No token above the persisted ceiling is handed out
// before the ceiling is on disk; the ceiling runs up to margin ahead of the
// last token and is pushed forward in the background, so the grant path
// rarely waits for the disk.
type tokens struct {
	last    atomic.Uint64
	ceiling atomic.Uint64 // persisted: no token above it has been issued
	margin  uint64        // microseconds the ceiling runs ahead

	path string // "" = not persisted (tests, or no data dir)

	mu   sync.Mutex    // serializes writes of the file
	kick chan struct{} // asks the background writer to extend the ceiling

	failing  atomic.Bool     // the last write of the file failed
	onHealth func(err error) // Config.OnTokenMark: failing's changes

	// changes holds failing's changes not yet given to onHealth, in
	// order; told wakes reportRun. persist queues them (under mu, perhaps
	// under a shard's lock): onHealth, which logs, runs in reportRun with
	// no lock held.
	hmu     sync.Mutex
	changes []error
	told    chan struct{}

	// stride and offset: with stride above 1, every token issued is
	// offset modulo stride (see Engine.SetTokenClass).
	stride, offset atomic.Uint64
	// floor is the highest token this node did not issue itself: its
	// promotion's reservation, or one a peer showed (Engine.ObserveToken).
	// An active paces its acquires against it (Engine.paceTokens).
	floor atomic.Uint64
}

// raise raises a to v; it never lowers it.
func raise(a *atomic.Uint64, v uint64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// classed returns the smallest token at or above n in this node's class
// (n itself without a class).
func (t *tokens) classed(n uint64) uint64 {
	s := t.stride.Load()
	if s <= 1 {
		return n
	}
	o := t.offset.Load()
	return n + (o+s-n%s)%s
}

// TokenMarkError is New's error for a token high-water mark file that
// does not hold a token below MaxToken (empty, cut short, garbage). The
// file is only ever replaced whole (write's temporary file, fsynced, then
// renamed), so no crash leaves it so: something else changed it, and the
// engine does not start on it unless Config.RepairTokenMark is set.
type TokenMarkError struct {
	File    string // the file's path
	Content []byte // what it holds
}

// Error names the file, quotes what it holds and says the engine refuses
// to start.
func (e *TokenMarkError) Error() string {
	return fmt.Sprintf("data_dir: %s is corrupt (%q); refusing to start, since a restart must never repeat a token", e.File, e.Content)
}

// HasTokenMark reports whether dataDir holds a token high-water mark file
// (token-hwm, whatever it holds): an engine that issued or reserved
// tokens there wrote it. A file it cannot tell about (a permission
// error) counts as there: New reports that error.
func HasTokenMark(dataDir string) bool {
	_, err := os.Stat(filepath.Join(dataDir, tokenFile))
	return !errors.Is(err, fs.ErrNotExist)
}

// openTokens reads the high-water mark in dataDir and writes it anew
// (the same value); a corrupt one is a *TokenMarkError, or with repair
// dropped (written anew as 0: see Config.RepairTokenMark); one the
// process may not read or replace is an error wrapping fs.ErrPermission.
func openTokens(dataDir string, margin time.Duration, repair bool) (*tokens, error) {
	t := &tokens{margin: uint64(margin.Microseconds()), kick: make(chan struct{}, 1), told: make(chan struct{}, 1)}
	if t.margin == 0 {
		t.margin = 1
	}
	if dataDir == "" {
		t.ceiling.Store(MaxToken - 1)
		return t, nil
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	t.path = filepath.Join(dataDir, tokenFile)
	b, err := os.ReadFile(t.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("data_dir: reading the token high-water mark: %w", err)
	default:
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || v >= MaxToken {
			if !repair {
				return nil, &TokenMarkError{File: t.path, Content: b}
			}
			if err := t.write(0); err != nil {
				return nil, fmt.Errorf("data_dir: %w", err)
			}
			break
		}
		// Written anew, the same mark, so that a file the node's user
		// may read but not replace (another user's, in a directory with
		// the sticky bit; an immutable one) stops the start here, as one
		// it may not read does, instead of failing every grant once it
		// serves. Any other failure (a full disk) is left to the first
		// grant's write, as before: it must not keep a node from starting.
		if err := t.write(v); errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("data_dir: %w", err)
		}
		t.last.Store(v)
		t.ceiling.Store(v)
	}
	return t, nil
}

// MaxToken is the exclusive upper bound of fencing tokens: 2^53.
const MaxToken = uint64(1) << 53

// next issues the next token for a grant at now. It fails only with
// ErrTokenSpace or when the high-water mark cannot be written.
func (t *tokens) next(now int64) (uint64, error) {
	wall := uint64(now / 1e3)
	for {
		last := t.last.Load()
		n := t.classed(max(last+1, wall))
		if n >= MaxToken {
			return 0, ErrTokenSpace
		}
		c := t.ceiling.Load()
		if n > c {
			if err := t.persist(n + t.margin); err != nil {
				// A disk that cannot take the mark is the log's failure
				// too: nothing changed, retry later (503, not 500).
				return 0, fmt.Errorf("%w: %w", ErrTokenMarkUnwritable, err)
			}
			continue
		}
		if t.last.CompareAndSwap(last, n) {
			if c-n < t.margin/2 {
				select {
				case t.kick <- struct{}{}:
				default:
				}
			}
			return n, nil
		}
	}
}

// observe raises the last token to v (a token issued elsewhere: replicated
// from another node). It never lowers it.
func (t *tokens) observe(v uint64) { raise(&t.last, v) }

// persist writes ceiling c to disk (atomically: temp file, fsync, rename)
// unless a higher one is there already.
func (t *tokens) persist(c uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c <= t.ceiling.Load() {
		return nil
	}
	if c >= MaxToken {
		c = MaxToken - 1
	}
	if err := t.write(c); err != nil {
		if !t.failing.Swap(true) {
			t.report(err)
		}
		return err
	}
	if t.failing.Swap(false) {
		t.report(nil)
	}
	t.ceiling.Store(c)
	return nil
}

func (t *tokens) write(v uint64) error {
	if t.path == "" {
		return nil
	}
	// The rename is durable only once the directory is: a failure there
	// is a failed write too (the ceiling is not raised, the write is tried
	// again), or a power loss could bring back the older mark and a
	// restart repeat tokens above it.
	if err := writeFile(t.path, []byte(strconv.FormatUint(v, 10)+"\n")); err != nil {
		return fmt.Errorf("writing the token high-water mark: %w", err)
	}
	return nil
}

// writeFile is durable.WriteFile, a variable for tests.
var writeFile = durable.WriteFile

// tokenMarkRetry is how often run writes the high-water mark again while
// its last write failed.
const tokenMarkRetry = time.Second

// run extends the ceiling in the background whenever next asks, and
// while the last write failed tries it again every tokenMarkRetry, until
// stop is closed. It is owned by Engine. The retry is what clears failing
// on a node that grants nothing (a standby, or an active without
// acquires): only a write ends it, and only a grant asked for one, so a
// node that was active when its disk filled kept reporting the mark
// unwritable (baton_log_healthy 0) as a standby after the disk had room.
func (t *tokens) run(stop <-chan struct{}, nowMicros func() uint64) {
	retry := time.NewTicker(tokenMarkRetry)
	defer retry.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.kick:
			_ = t.persist(max(t.last.Load(), nowMicros()) + t.margin)
		case <-retry.C:
			if t.failing.Load() {
				// Above the ceiling in any case, so that it is written.
				_ = t.persist(max(t.last.Load(), nowMicros(), t.ceiling.Load()) + t.margin)
			}
		}
	}
}

// report queues a change of failing (err, nil when writing works again)
// for onHealth, which reportRun calls. It never blocks.
func (t *tokens) report(err error) {
	if t.onHealth == nil {
		return
	}
	t.hmu.Lock()
	t.changes = append(t.changes, err)
	t.hmu.Unlock()
	select {
	case t.told <- struct{}{}:
	default:
	}
}

// reportRun gives the changes report queued to onHealth, in order, with
// no lock held, until stop is closed. It is owned by Engine.
func (t *tokens) reportRun(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-t.told:
		}
		t.hmu.Lock()
		changes := t.changes
		t.changes = nil
		t.hmu.Unlock()
		for _, err := range changes {
			t.onHealth(err)
		}
	}
}

// flush writes the exact last token as the high-water mark, so that a
// graceful restart continues right above it.
func (t *tokens) flush() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	last := t.last.Load()
	if err := t.write(last); err != nil {
		return err
	}
	t.ceiling.Store(last)
	return nil
}
