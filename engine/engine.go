// Package engine is baton's lock state machine: per-key FIFO queues,
// holders with fencing tokens and leases, waiters with wait deadlines, and
// waiter identity. It knows nothing of HTTP or of the cluster: callers hand
// it keys, durations and contexts; it hands back grants and the errors in
// errors.go.
//
// Concurrency: keys are spread over shards, each with its own mutex, its own
// map of locks, its own timer heap and one runtime timer. Nothing runs per
// key or per waiter: a parked acquire is a queue entry, a heap entry and
// either the caller's own goroutine, blocked on a one-slot channel
// (Acquire), or nothing but the caller's callback (AcquireFunc).
//
// Holders: a key with a limit above 1 (the first acquire of a free key
// sets it) is a counting semaphore, up to limit holders at once; with the
// default limit of 1 an exclusive holder holds alone and any number of
// shared holders hold together (a read/write lock). Each holder has its
// own slot with its own grant, token, lease and owner. Shared and
// exclusive holders never hold together, and the queue is one FIFO across modes:
// a freed slot goes to the first waiter when its mode fits, so a queued
// exclusive waiter holds back every shared waiter behind it. A plain
// lock's first slot is inline; what more a key needs is allocated only
// for it.
//
// State changes: every change is a Record (record.go, the log's format),
// made through one apply path (apply.go) whether the active decided it, a
// standby replicates it or a restart replays it. With a Log (log.go) the
// record is appended under the shard lock before the change is made, and
// the change is answered only once the record is written. Deadlines run on
// the monotonic clock; times that leave the process are on the wall clock
// (clock.go).
package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/baton-io/baton/internal/keyrule"
)

// Config sets up an Engine. The zero value of a field means its default,
// as DefaultConfig gives it.
type Config struct {
	// DataDir holds the fencing-token high-water mark. "" keeps no state
	// on disk (tests only: a restart could then repeat tokens if the clock
	// went back).
	DataDir string
	// LeaseDefault is the lease of an acquire that names none.
	LeaseDefault time.Duration
	// LeaseMax is the largest lease accepted.
	LeaseMax time.Duration
	// WaitMax is the largest wait accepted; 0 = no cap. With a cap, an
	// acquire that names no wait (or 0) waits WaitMax.
	WaitMax time.Duration
	// PollTimeout ends a long poll early with ErrPollTimeout (0 = never);
	// the waiter keeps its place for PollGrace.
	PollTimeout time.Duration
	// PollGrace is how long a waiter keeps its place after ErrPollTimeout,
	// and how long a grant made meanwhile waits to be claimed by the repeat
	// before it is released.
	PollGrace time.Duration
	// Retention is how long a waiter ID's final outcome (timeout, ended
	// grant) is remembered for repeats. At least a minute (SPEC section 2).
	Retention time.Duration
	// MaxKeys caps the keys that exist at once (held or with waiters).
	MaxKeys int
	// MaxWaitersPerKey caps one key's queue.
	MaxWaitersPerKey int
	// MaxWaiters caps the waiters of all keys together.
	MaxWaiters int
	// TokenMargin is how far (as time) the persisted token ceiling runs
	// ahead of the last token; after a crash, tokens resume up to this far
	// ahead of the wall clock. Keep it below the cluster's failover timeout.
	TokenMargin time.Duration
	// Shards is the number of independently locked key partitions, rounded
	// up to a power of two.
	Shards int
	// Clock is the source of time; nil means the system clock. Leases and
	// waits run on its monotonic reading, see Clock.
	Clock Clock
	// Standby starts the engine as a standby: it refuses calls with
	// ErrNotActive and takes state only through Apply until Promote.
	Standby bool
	// Log, if set, gets every state change as a Record, under the key's
	// shard lock, before the change is made; a change is answered only
	// once its record is written (Log.Wait). nil keeps no log: the state
	// lives in memory only.
	Log Log
	// OnEvent, if set, is called for every state change, in order per key,
	// while the key's shard is locked: it must not block or call back into
	// the Engine.
	OnEvent func(Event)
	// OnTokenMark, if set, is called when writing the token high-water
	// mark (a file in DataDir) starts failing, with the error, and when it
	// succeeds again, with nil: once per change, not per write. While it
	// fails, grants that need the mark raised are refused (ErrUnavailable)
	// though the log may still write, so this is the one place that can
	// say why. It is called from a goroutine of the Engine's own, in order,
	// with no lock of the Engine held (the failure is seen under a key's
	// shard lock, by a grant): it may block (a log handler writing to a
	// slow disk) and holds up only its later calls; Close waits for a
	// call in progress.
	OnTokenMark func(err error)
	// RepairTokenMark starts the engine even when the token high-water
	// mark in DataDir is corrupt (New fails with a *TokenMarkError
	// otherwise): its content is dropped and the file written anew with
	// 0, as if it had been missing, so that tokens continue above every
	// token the log replays and above the clock's microseconds, but not
	// above tokens of this node that neither holds.
	RepairTokenMark bool
}

// maxConfigDuration bounds the configured durations (100 years), so that
// a deadline computed from one always fits in int64 nanoseconds.
const maxConfigDuration = 100 * 365 * 24 * time.Hour

// DefaultConfig returns the defaults of SPEC section 5, sized for one node.
func DefaultConfig() Config {
	return Config{
		DataDir:          "./baton-data",
		LeaseDefault:     30 * time.Second,
		LeaseMax:         time.Hour,
		PollGrace:        5 * time.Second,
		Retention:        2 * time.Minute,
		MaxKeys:          4_000_000,
		MaxWaitersPerKey: 200_000,
		MaxWaiters:       200_000,
		TokenMargin:      time.Second,
		Shards:           256,
	}
}

// Validate reports the first invalid field, by its config key: an error
// "<key>: must be ..., got <value>"; nil when every field is valid.
func (c Config) Validate() error {
	switch {
	case c.LeaseDefault <= 0:
		return fmt.Errorf("lease_default: must be > 0, got %v", c.LeaseDefault)
	case c.LeaseMax <= 0:
		// Before the comparison with lease_default: the setting at fault
		// is lease_max, whatever lease_default is.
		return fmt.Errorf("lease_max: must be > 0, got %v", c.LeaseMax)
	case c.LeaseMax < c.LeaseDefault:
		return fmt.Errorf("lease_default: must be at most lease_max (%v), got %v (raise lease_max or lower lease_default)", c.LeaseMax, c.LeaseDefault)
	case c.LeaseMax > maxConfigDuration:
		return fmt.Errorf("lease_max: must be at most %v, got %v", maxConfigDuration, c.LeaseMax)
	case c.PollTimeout > maxConfigDuration || c.PollGrace > maxConfigDuration:
		return fmt.Errorf("poll_timeout: must be at most %v, got %v", maxConfigDuration, c.PollTimeout)
	case c.WaitMax < 0:
		return fmt.Errorf("wait_max: must be >= 0, got %v", c.WaitMax)
	case c.PollTimeout < 0:
		return fmt.Errorf("poll_timeout: must be >= 0, got %v", c.PollTimeout)
	case c.MaxKeys <= 0:
		return fmt.Errorf("max_keys: must be > 0, got %d", c.MaxKeys)
	case c.MaxWaitersPerKey <= 0:
		return fmt.Errorf("max_waiters_per_key: must be > 0, got %d", c.MaxWaitersPerKey)
	case c.MaxWaiters <= 0:
		return fmt.Errorf("max_waiters: must be > 0, got %d", c.MaxWaiters)
	case c.PollGrace < 0:
		return fmt.Errorf("poll grace: must be >= 0, got %v", c.PollGrace)
	case c.Retention != 0 && c.Retention < time.Minute:
		return fmt.Errorf("retention: must be at least a minute (SPEC section 2), got %v", c.Retention)
	}
	return nil
}

// Grant describes a lock held by a caller. GrantedAt and ExpiresAt are on
// the wall clock as it read when the Grant was made (the lease itself runs
// on the monotonic clock: see Clock).
type Grant struct {
	// Key is the lock's key.
	Key string
	// Token is the fencing token: above every token issued before it (in
	// the cluster, across restarts), below MaxToken.
	Token uint64
	// Lease is the lease granted (the request's, or LeaseDefault).
	Lease time.Duration
	// GrantedAt is when the lock was granted; ExpiresAt when the lease
	// runs out unless renewed.
	GrantedAt time.Time
	ExpiresAt time.Time
	// Owner is the label the acquire carried ("" = none).
	Owner string
	// Mode is how the grant holds the key.
	Mode Mode
}

// AcquireRequest asks for a lock.
type AcquireRequest struct {
	// Key names the lock: 1 to MaxKeyBytes bytes of UTF-8 without control
	// characters.
	Key string
	// Lease is how long the grant lasts without renewal; 0 = LeaseDefault.
	Lease time.Duration
	// Wait bounds the time in the queue; 0 = without limit (or WaitMax).
	// A repeat (see ID) that takes over a waiting place waits until the
	// first request's deadline or its own Wait, whichever ends first.
	Wait time.Duration
	// ID is the waiter identity (an Idempotency-Key); "" = anonymous. A
	// repeat with the same Key and ID gets the outcome of the first; a
	// repeat is the same request, but for Wait: another Mode, Limit (one
	// named), Lease (as sent: 0 is not the lease_default some node filled
	// in) or Owner under a known ID is ErrKeyReused, and changes nothing.
	ID string
	// Owner labels the holder for people (CheckOwner); "" = none. It is
	// never an identity check.
	Owner string
	// Mode: Exclusive (the zero value) or Shared. Shared and exclusive
	// holders never hold together; see Limit for how many of one mode do.
	Mode Mode
	// Limit is the number of holders the key admits at once, 1 to
	// MaxLimit; 0 = the key's limit (1 for a free key). Above 1 the key is
	// a counting semaphore (up to Limit holders of one mode at once); at 1
	// it admits one exclusive holder, or any number of shared ones. The
	// first acquire of a free key sets it; naming another one while the
	// key exists is ErrLimitMismatch.
	Limit int
	// NoTicket: a redirect of this caller cannot carry a ticket (the
	// native protocol's M names only the active's address). Queued
	// without an ID, its waiter then gets a ticket that no promotion
	// keeps (IsLocalTicket): the successor of a handoff drops it as any
	// promotion after a failover drops tickets, instead of keeping its
	// place for PollGrace for a repeat that cannot come (granted to
	// nobody, the lock stood idle until the claim ran out). A repeat of
	// the acquire queues anew.
	NoTicket bool
}

// MaxLimit is the largest holder limit of a key.
const MaxLimit = 10_000

// MaxOwnerBytes is the longest owner label, in bytes.
const MaxOwnerBytes = 128

// Waiter describes one queued acquire, for status views.
type Waiter struct {
	ID      string        // the waiter's own ID (an Idempotency-Key); "" = none or a server ticket
	Since   time.Time     // when it joined the queue (wall clock)
	Lease   time.Duration // the lease it asked for (LeaseDefault filled in)
	WaitEnd time.Time     // when its wait runs out; zero = no limit
	Owner   string        // its label; "" = none
	Mode    Mode          // the mode it asks for
}

// LockInfo is a snapshot of one key.
type LockInfo struct {
	Key string // the key described
	// Holder is nil while nobody holds the lock; otherwise the oldest
	// grant, Holders[0].
	Holder *Grant
	// Holders are every holder, oldest grant (lowest token) first. The
	// ExpiresAt of a grant made while its waiter's request was away, which
	// awaits the repeat's claim, is its claim deadline when that comes
	// first: the lock is taken back then unless the repeat claims it.
	Holders []Grant
	// Limit is the number of holders the key admits at once.
	Limit int
	// Waiters counts the queue.
	Waiters int
	// OldestSince is when the first waiter arrived; zero without waiters.
	OldestSince time.Time
	// OldestOwner and OldestMode are the first waiter's owner and mode.
	OldestOwner string
	OldestMode  Mode
}

// MaxKeyBytes is the longest key, in bytes (keyrule's).
const MaxKeyBytes = keyrule.MaxBytes

// MaxIDBytes is the longest waiter ID (AcquireRequest.ID: an
// Idempotency-Key over HTTP, id= over the native protocol), in bytes.
const MaxIDBytes = 256

// TrimID is a waiter ID as it names a waiter: without the blanks (spaces
// and tabs) around it, which are not part of a field value (RFC 9110
// section 5.5), so that one key names one request over every protocol
// (an Idempotency-Key header, a native id=). Check the result with
// ValidID: a key of blanks only is empty.
func TrimID(id string) string { return strings.Trim(id, " \t") }

// ValidID reports whether id can name a waiter: 1 to MaxIDBytes printable
// ASCII characters (0x20-0x7e). Each protocol words the refusal with its
// own name of the field.
func ValidID(id string) bool {
	if id == "" || len(id) > MaxIDBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x20 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// Engine is the lock state machine. Its methods are safe for concurrent use.
type Engine struct {
	cfg    Config
	clock  Clock        // nil: the system clock
	base   time.Time    // the system clock's monotonic origin
	offset atomic.Int64 // wall - mono, to within offsetSlack (see now)
	mask   uint64
	shards []shard
	tokens *tokens
	log    Log // nil: no log

	keys    atomic.Int64
	waiters atomic.Int64
	held    atomic.Int64
	closed  atomic.Bool
	active  atomic.Bool               // serves calls; lease and wait deadlines armed
	epoch   atomic.Pointer[EpochMark] // of the last RecEpoch applied (see Epoch)
	resets  atomic.Uint64             // Resets so far (see Generation)

	stop     chan struct{}
	bg       sync.WaitGroup
	closeErr error
	once     sync.Once
}

type shard struct {
	mu      sync.Mutex
	locks   map[string]*lock
	tickets map[ticketKey]*ticket
	heap    deadlines
	// retained holds the tickets kept for the retention period, in the
	// order of their ends (retained.go); heap the other deadlines.
	retained retainedQueue
	timer    *time.Timer
	armed    int64 // when the timer fires (monotonic ns, Clock); 0 = not armed
	e        *Engine
	buf      []byte // the record being appended to the log
	// newest is the highest token of a grant applied to the shard's keys
	// since the last Reset (see NewestGrant).
	newest uint64
	// last is the log index of the shard's latest record (append): after
	// a step, the highest index of the records the step appended; 0 after
	// a Reset (the state then is the installed one, already in the log).
	last uint64
	// admitted is set by an acquire that counted the waiter it is about
	// to queue in Engine.waiters (admit); the enqueue's apply then does
	// not count it again, and clears it.
	admitted bool
}

// lock is one key with holders, waiters, or both. Its first holder slot
// is inline (a plain lock allocates nothing more); the key's limit, mode,
// owners and further slots live in x, allocated only for a key with an
// owner, a shared holder or a limit above 1.
type lock struct {
	key  string
	hold // the first slot

	// head is the first waiter; head.prev is the last (the queue is a
	// list whose first element points back at its tail, which saves the
	// tail pointer x takes the place of).
	head *waiter
	x    *extra
	n    int
}

// hold is one holder slot of a lock.
type hold struct {
	token   uint64 // holder's token; 0 = free
	lease   time.Duration
	granted int64 // monotonic ns (Clock), like every instant below
	expires int64
	holder  *ticket
	// dl is the lease expiry (or the holder's claimBy, whichever is
	// first); on a free slot, the retry of a grant the log refused.
	dl deadline
}

// extra is what a lock beyond a plain exclusive one needs.
type extra struct {
	limit int    // holders at once, >= 1
	mode  Mode   // the holders' mode, while there are holders
	owner string // the first slot's owner
	held  int    // holders in more
	more  []*slot
	// free holds further slots that were freed (token 0), for freeSlot:
	// a slot taken again without it (a retake's retry) stays listed
	// until freeSlot skips it. byToken indexes the held further slots by
	// token once more holds indexFrom of them. Without them a grant, a
	// renewal and a release each scanned more: a key with 64,000
	// shared holders took 0.9 ms per operation under its shard's mutex
	// (TestManySharedHoldersCostNoMorePerGrant).
	free    []*slot
	byToken map[uint64]*slot
}

// indexFrom is the number of further slots from which a lock indexes
// them by token (extra.byToken): below it a scan is as fast, and a small
// semaphore pays no map.
const indexFrom = 32

// slot is a holder slot beyond the first; a free one (token 0) is kept
// for the next grant.
type slot struct {
	hold
	lk    *lock
	owner string
}

// clearClaim ends the wait for a detached waiter's repeat, if the holder
// is one: the lease alone decides again when the slot is taken back.
func (h *hold) clearClaim() {
	if h.holder != nil {
		h.holder.claimBy = 0
	}
}

// holders returns how many slots of lk are held.
func (lk *lock) holders() int {
	n := 0
	if lk.token != 0 {
		n = 1
	}
	if lk.x != nil {
		n += lk.x.held
	}
	return n
}

// limit returns lk's holder limit.
func (lk *lock) limit() int {
	if lk.x == nil {
		return 1
	}
	return lk.x.limit
}

// mode returns the mode lk's holders hold in.
func (lk *lock) mode() Mode {
	if lk.x == nil {
		return Exclusive
	}
	return lk.x.mode
}

// canGrant reports whether a grant in mode m fits lk's holders now: the
// one admission rule of shared modes (SPEC section 1). Shared and
// exclusive holders never hold together. With a limit above 1 the key is
// a counting semaphore: up to limit holders at once, in either mode. With
// the default limit of 1 it is a mutex for exclusive holders and a
// read/write lock with shared ones: any number of shared holders hold
// together (a read/write lock needs no limit for its readers).
func (lk *lock) canGrant(m Mode) bool {
	n := lk.holders()
	switch {
	case n == 0:
		return true
	case m != lk.mode():
		return false
	case lk.limit() == 1:
		return m == Shared
	}
	return n < lk.limit()
}

// find returns the slot held under token, or nil.
func (lk *lock) find(token uint64) *hold {
	if token == 0 {
		return nil
	}
	if lk.token == token {
		return &lk.hold
	}
	if lk.x != nil {
		if lk.x.byToken != nil {
			if sl := lk.x.byToken[token]; sl != nil {
				return &sl.hold
			}
			return nil
		}
		for _, sl := range lk.x.more {
			if sl.token == token {
				return &sl.hold
			}
		}
	}
	return nil
}

// further returns the further slot whose hold is h, nil for lk's first.
func (lk *lock) further(h *hold) *slot {
	if h == &lk.hold {
		return nil
	}
	sl, _ := h.dl.owner.(*slot) // freeSlot makes every further slot its deadline's owner
	return sl
}

// each calls fn for every held slot, in no particular order.
func (lk *lock) each(fn func(h *hold)) {
	if lk.token != 0 {
		fn(&lk.hold)
	}
	if lk.x != nil && lk.x.held > 0 {
		for _, sl := range lk.x.more {
			if sl.token != 0 {
				fn(&sl.hold)
			}
		}
	}
}

// owner returns the owner of lk's slot h.
func (lk *lock) owner(h *hold) string {
	if lk.x == nil {
		return ""
	}
	if h == &lk.hold {
		return lk.x.owner
	}
	if sl := lk.further(h); sl != nil && sl.lk == lk {
		return sl.owner
	}
	return ""
}

// setOwner sets the owner of lk's slot h.
func (lk *lock) setOwner(h *hold, owner string) {
	if lk.x == nil && owner == "" {
		return
	}
	if h == &lk.hold {
		lk.ext().owner = owner
		return
	}
	if sl := lk.further(h); sl != nil && sl.lk == lk {
		sl.owner = owner
	}
}

// ext returns lk's extra, allocating it.
func (lk *lock) ext() *extra {
	if lk.x == nil {
		lk.x = &extra{limit: 1}
	}
	return lk.x
}

// freeSlot returns a free slot of lk for a grant, lk's first if free,
// else a free further slot (the last one freed), else a new one; s.mu is
// held.
func (lk *lock) freeSlot() *hold {
	if lk.token == 0 {
		return &lk.hold
	}
	x := lk.ext()
	for len(x.free) > 0 {
		sl := x.free[len(x.free)-1]
		x.free = x.free[:len(x.free)-1]
		if sl.token == 0 {
			x.free = append(x.free, sl) // still free until setToken takes it
			return &sl.hold
		}
	}
	if x.held < len(x.more) {
		// A free slot that x.free does not list (taken and freed
		// again by a retake's retry): rare.
		for _, sl := range x.more {
			if sl.token == 0 {
				return &sl.hold
			}
		}
	}
	sl := &slot{lk: lk, hold: hold{dl: deadline{idx: -1}}}
	sl.dl.owner = sl
	x.more = append(x.more, sl)
	if x.byToken == nil && len(x.more) >= indexFrom {
		x.byToken = make(map[uint64]*slot, len(x.more))
		for _, o := range x.more {
			if o.token != 0 {
				x.byToken[o.token] = o
			}
		}
	}
	return &sl.hold
}

type waiterState uint8

const (
	queued   waiterState = iota
	detached             // poll ended early; place kept until grace
)

// waiter is one queued acquire.
type waiter struct {
	lk         *lock
	prev, next *waiter
	t          *ticket  // nil for anonymous waiters
	req        *Waiting // the request parked on it; nil once answered, or none
	state      waiterState
	mode       Mode
	defaulted  bool // the acquire named no lease: lease is a lease_default (Record.LeaseDefaulted)
	owner      string
	lease      time.Duration
	arrived    int64 // monotonic ns (Clock), like every instant below
	waitUntil  int64 // 0 = no limit
	pollUntil  int64 // 0 = none
	graceUntil int64 // set while detached
	dl         deadline
}

type ticketState uint8

const (
	tWaiting ticketState = iota
	tGranted
	tTimedOut
	tEnded
	// tForced: the ID of a forced release (ForceReleaseID), remembered
	// for Retention so that a repeat changes nothing.
	tForced
	// tForceNotHeld: the ID of a forced release that found nobody
	// holding its key (ErrNotHeld), remembered as tForced is.
	tForceNotHeld
	tForget ticketState = 255 // retire: forget the ticket at once
)

// ticketKey is what a shard finds a ticket by: its key and its waiter ID
// (a struct, so that no string is built to look one up).
type ticketKey struct{ key, id string }

// ticket is what a waiter ID is remembered by.
type ticket struct {
	id    string // client's waiter ID, or AnonPrefix + a server ticket
	key   string
	state ticketState
	// What the acquire asked for, to tell a repeat from another request
	// under the same ID (asked): its mode, the key's limit it queued or
	// was granted under (0 = not known: nothing is compared), and
	// fingerprints of its lease and owner (leaseSum, ownerSum). They sit
	// in what was padding: a ticket stays 112 bytes.
	mode  Mode
	limit uint16
	// answers counts the answers carrying this grant that may have reached
	// the client: the first, plus one per repeat. An undeliverable answer
	// releases the grant only when it was the last one.
	answers  int32
	leaseSum uint32
	ownerSum uint32
	w        *waiter // while waiting
	token    uint64  // while granted
	// claimBy (monotonic ns) is nonzero while the grant to this ticket's
	// detached waiter awaits its repeat: the lock is released then.
	claimBy int64
	// idx is the log index of the grant to this ticket (0 = no log): a
	// repeat answered with the grant waits until it is written.
	idx uint64
	dl  deadline
}

// New returns an Engine with its timers and background writer running;
// Close stops them. It fails when the config is invalid or the token
// high-water mark in DataDir cannot be read.
func New(cfg Config) (*Engine, error) {
	def := DefaultConfig()
	if cfg.LeaseDefault == 0 {
		cfg.LeaseDefault = def.LeaseDefault
	}
	if cfg.LeaseMax == 0 {
		cfg.LeaseMax = max(def.LeaseMax, cfg.LeaseDefault)
	}
	if cfg.PollGrace == 0 {
		cfg.PollGrace = def.PollGrace
	}
	if cfg.Retention == 0 {
		cfg.Retention = def.Retention
	}
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = def.MaxKeys
	}
	if cfg.MaxWaitersPerKey == 0 {
		cfg.MaxWaitersPerKey = def.MaxWaitersPerKey
	}
	if cfg.MaxWaiters == 0 {
		cfg.MaxWaiters = def.MaxWaiters
	}
	if cfg.TokenMargin == 0 {
		cfg.TokenMargin = def.TokenMargin
	}
	if cfg.Shards <= 0 {
		cfg.Shards = def.Shards
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := 1
	for n < cfg.Shards {
		n <<= 1
	}
	tok, err := openTokens(cfg.DataDir, cfg.TokenMargin, cfg.RepairTokenMark)
	if err != nil {
		return nil, err
	}
	tok.onHealth = cfg.OnTokenMark
	e := &Engine{
		cfg:    cfg,
		clock:  cfg.Clock,
		log:    cfg.Log,
		base:   time.Now(),
		mask:   uint64(n - 1),
		shards: make([]shard, n),
		tokens: tok,
		stop:   make(chan struct{}),
	}
	e.active.Store(!cfg.Standby)
	for i := range e.shards {
		s := &e.shards[i]
		s.e = e
		s.locks = make(map[string]*lock)
		s.tickets = make(map[ticketKey]*ticket)
		s.timer = time.AfterFunc(time.Hour, s.fire)
		s.timer.Stop()
	}
	e.bg.Add(2)
	go func() {
		defer e.bg.Done()
		tok.run(e.stop, func() uint64 { return uint64(e.now().wall / 1e3) })
	}()
	go func() {
		defer e.bg.Done()
		tok.reportRun(e.stop)
	}()
	return e, nil
}

// Config returns the effective configuration (defaults filled in).
func (e *Engine) Config() Config { return e.cfg }

// Close ends the engine: every parked acquire returns ErrClosed, later calls
// return ErrClosed, timers stop, and the exact token high-water mark is
// written. It is idempotent and returns the error of writing the mark.
func (e *Engine) Close() error {
	e.once.Do(func() {
		e.closed.Store(true)
		for i := range e.shards {
			s := &e.shards[i]
			s.mu.Lock()
			s.timer.Stop()
			s.armed = 0
			for _, lk := range s.locks {
				for w := lk.head; w != nil; w = w.next {
					if w.state == queued {
						w.deliver(AcquireResult{err: ErrClosed})
					}
				}
			}
			s.mu.Unlock()
		}
		close(e.stop)
		e.bg.Wait()
		e.closeErr = e.tokens.flush()
	})
	return e.closeErr
}

// LastToken returns the highest fencing token issued or observed.
func (e *Engine) LastToken() uint64 { return e.tokens.last.Load() }

// TokenMarkWritable reports whether the last write of the token
// high-water mark (a file in Config.DataDir) succeeded. While it fails
// (disk full, a write error), a grant that needs the mark raised is
// refused with ErrUnavailable, though the log itself may still write.
// While it fails the engine writes the mark again every second, whatever
// its role, so it turns true once the disk takes it again.
func (e *Engine) TokenMarkWritable() bool { return !e.tokens.failing.Load() }

// Counts returns the keys that exist (held or with waiters) and the waiters
// queued over all keys.
func (e *Engine) Counts() (keys, waiters int) {
	return int(e.keys.Load()), int(e.waiters.Load())
}

// shard returns key's shard. The hash is fixed (keyHash, no seed), so that
// every process with the same Shards puts a key in the same shard: a
// snapshot taken shard by shard, each at its own log index, and a replay of
// the log afterwards agree on which records a shard's dump already holds.
func (e *Engine) shard(key string) *shard {
	return &e.shards[keyHash(key)&e.mask]
}

// keyHash is FNV-1a (64 bit) of key, finished with MurmurHash3's fmix64 so
// that its low bits, which pick the shard, depend on every byte. It is
// part of what a snapshot means: never change it. (Inline, it costs a few
// nanoseconds for a short key, less than xxhash's call; a seeded maphash
// would differ from process to process.)
func keyHash(key string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// CheckKey reports whether key is a valid lock name: 1 to MaxKeyBytes bytes
// of UTF-8 with no control characters. The error is an *ArgError for "key".
func CheckKey(key string) error {
	if key == "" {
		return argErr("key", "%s", keyrule.Empty)
	}
	return CheckKeyText("key", key)
}

// CheckKeyText checks s, a key or a part of one (a listing's prefix, the
// key a page starts after), against the rules of CheckKey but the first:
// s may be empty. A string that breaks them is one no key has or starts
// with. The error is an *ArgError naming field.
func CheckKeyText(field, s string) error {
	if p := keyrule.Problem(s); p != "" {
		return argErr(field, "%s", p)
	}
	return nil
}

func (e *Engine) checkLease(lease time.Duration) (time.Duration, error) {
	switch {
	case lease == 0:
		return e.cfg.LeaseDefault, nil
	case lease < 0:
		return 0, argErr("lease", "must be greater than 0 seconds")
	case lease > e.cfg.LeaseMax:
		return 0, argErr("lease", "must be at most %v seconds (lease_max)", e.cfg.LeaseMax.Seconds())
	}
	return lease, nil
}

// Acquire takes the lock req.Key, blocking in the key's FIFO queue until it
// is granted, the wait runs out, or ctx ends. It returns the Grant, or:
// ErrTimeout (req.Wait ran out: not granted), ErrPollTimeout (the poll ended
// early, place kept), ErrGrantEnded or ErrSuperseded (waiter ID repeats),
// ErrKeyReused (a known waiter ID with other parameters: nothing changed),
// ErrTooManyKeys, ErrTooManyWaiters, ErrClosed, an *ArgError, or ctx.Err().
// When ctx ends, the waiter leaves the queue at once; a grant made at the same
// moment is released to the next waiter, never lost. It is AcquireFunc
// with the caller's goroutine parked on a one-slot channel.
func (e *Engine) Acquire(ctx context.Context, req AcquireRequest) (Grant, error) {
	return e.AcquirePlaced(ctx, req, nil)
}

// AcquirePlaced is Acquire that calls placed, when not nil, once the
// acquire has its outcome or its place in the key's queue, before it
// waits: a caller that holds others back until then (the calls that
// waited for a failover, in their order of arrival) lets them go there.
// Its results are Acquire's.
func (e *Engine) AcquirePlaced(ctx context.Context, req AcquireRequest, placed func()) (Grant, error) {
	// Small frames, results by pointer: a parked HTTP handler's goroutine
	// keeps the stack its deepest call grew.
	var o AcquireResult
	p := e.acquire(&req, nil, &o)
	if placed != nil {
		placed()
	}
	if p != nil && !p.wait(ctx, &o) {
		return Grant{}, ctx.Err()
	}
	return o.settle()
}

// wait parks the caller on p's channel until the result is in o (true),
// or until ctx ends (false): the acquire is withdrawn then, and a grant
// that raced the cancellation is released.
func (p *Waiting) wait(ctx context.Context, o *AcquireResult) bool {
	select {
	case *o = <-p.ch:
		return true
	case <-ctx.Done():
	}
	if p.Cancel() {
		return false
	}
	// The outcome raced with the cancellation and cannot be delivered.
	*o = <-p.ch
	o.abandon()
	return false
}

// AcquireFunc starts the acquire req without blocking, for a caller that
// parks nothing of its own while the acquire waits (the native protocol
// server). When the acquire ends at once (a grant, an error, a waiter ID's
// known outcome) it returns that AcquireResult and a nil *Waiting, and done is
// never called. Otherwise the acquire is queued: AcquireFunc returns the
// *Waiting, and done is called exactly once with the AcquireResult (a grant,
// ErrTimeout, ErrPollTimeout, ErrSuperseded, ErrClosed, a *MovedError, or
// a log error), unless Waiting.Cancel withdraws the acquire first.
//
// done runs with the key's shard locked, on whichever goroutine made the
// change (a release, the engine's timer, a handoff): it must not block or
// call into the Engine. It returns whether it took the outcome; a grant it
// does not take (its client is gone) is released at once to the next
// waiter, as Abandon would. The AcquireResult of a grant is answered only after
// AcquireResult.Settle, outside done. The errors and rules are Acquire's.
func (e *Engine) AcquireFunc(req AcquireRequest, done func(AcquireResult) bool) (AcquireResult, *Waiting) {
	if done == nil {
		return AcquireResult{err: argErr("done", "must not be nil")}, nil
	}
	return e.AcquireTo(req, doneFunc(done))
}

// Receiver takes the outcome of an acquire that AcquireTo parked.
type Receiver interface {
	// Done is AcquireFunc's done: the same calls, the same rules.
	Done(AcquireResult) bool
}

// AcquireTo is AcquireFunc with a Receiver for done: a caller that keeps
// a value per acquire anyway (a pointer) passes it as it is, where
// AcquireFunc's done would be a closure of its own to allocate. The
// engine keeps to only when the acquire parks (a *Waiting is returned):
// after an acquire that ended at once it holds no reference to it.
func (e *Engine) AcquireTo(req AcquireRequest, to Receiver) (AcquireResult, *Waiting) {
	if to == nil {
		return AcquireResult{err: argErr("done", "must not be nil")}, nil
	}
	var o AcquireResult
	p := e.acquire(&req, to, &o)
	return o, p
}

// doneFunc is AcquireFunc's done as a Receiver.
type doneFunc func(AcquireResult) bool

func (f doneFunc) Done(o AcquireResult) bool { return f(o) }

// Waiting is an acquire queued by AcquireFunc (or Acquire), until its
// outcome is delivered or Cancel withdraws it.
type Waiting struct {
	s  *shard
	w  *waiter
	to Receiver // AcquireTo's (AcquireFunc's done); nil: ch (Acquire)
	ch chan AcquireResult
}

// Cancel withdraws the acquire, as a client that goes away: its waiter
// leaves the queue (its waiter ID is forgotten) and done is never called;
// Cancel reports true. It reports false when done has been called
// already: the outcome is the caller's then (a grant it cannot deliver
// goes to Abandon). Call it at most once; it must not be called from done.
func (p *Waiting) Cancel() bool {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	w := p.w
	if w.req != p {
		return false // answered, or superseded by a repeat (answered too)
	}
	w.req = nil
	if w.lk != nil {
		s.leaveAndHandOn(w, s.e.now())
	}
	return true
}

// AcquireResult is how an acquire ended: a grant not yet answered (see Settle)
// or an error.
type AcquireResult struct {
	g   Grant
	idx uint64 // the grant's log index: answered once it is written
	gen uint64 // Engine.Generation when the grant (or timeout) was made
	err error
	s   *shard  // with a grant or a timeout: its key's shard
	t   *ticket // with a grant: its ticket, if any; with a timeout: its ticket
}

// LogIndex is the log index of the result's grant (or of its timeout,
// a change too), which Settle waits for (0: none, or no log). A caller settling many results may wait for
// the highest first (Engine.WaitLogged): one log write for them all.
func (o AcquireResult) LogIndex() LogIndex { return LogIndex(o.idx) }

// Err is the acquire's error, nil for a grant (which Settle may still
// refuse with ErrUnavailable; a timeout whose record the log cannot
// write, Settle answers ErrNotWritten).
func (o AcquireResult) Err() error { return o.err }

// Settle waits until the outcome's grant is written to the log (and
// synced, as the log's fsync mode says), and returns it; only then may
// the grant be answered. It returns the acquire's error instead (a
// timeout, ErrTimeout, once its record is written too: an error wrapping
// ErrNotWritten when it could not be), or an error wrapping
// ErrUnavailable when the log could not write the grant: the grant is
// then released, nobody having heard of it; or ErrReplaced when the
// engine's state was replaced meanwhile (a step-down or Reset: see
// Generation) and this engine is not the active or its state does not
// hold the grant (or the timeout). Call it once, without holding
// anything done takes.
func (o AcquireResult) Settle() (Grant, error) { return o.settle() }

func (o *AcquireResult) settle() (Grant, error) {
	if o.err != nil {
		if o.idx != 0 {
			// An outcome that is a change of its own (a timeout):
			// answered once its record is written, and, as a grant,
			// only in the state it was made in or in one that holds it
			// too: a node that stepped down since may now follow an
			// active that never had it, where the waiter may still be
			// queued, and a 408 would tell the client nothing is
			// pending.
			err := o.s.e.waitLogged(o.idx)
			if err != nil && !errors.Is(err, ErrReplaced) {
				return Grant{}, err
			}
			if (err != nil || o.s.e.Replaced(o.gen)) && !o.s.holdsTimeout(o.t) {
				return Grant{}, ErrReplaced
			}
		}
		return Grant{}, o.err
	}
	if o.idx == 0 {
		return o.g, nil
	}
	return o.s.settle(o.g, o.idx, o.t, o.gen)
}

// holdsTimeout reports whether this engine is the active and its state
// holds the timeout of t's waiter (t: the ticket of a timeout made in an
// earlier generation; nil: no). s.mu is not held.
func (s *shard) holdsTimeout(t *ticket) bool {
	if t == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.tickets[ticketKey{t.key, t.id}]
	return s.e.serving() == nil && now != nil && now.state == tTimedOut
}

// Abandon releases the result's grant, which its caller could not answer
// (its client is gone), as Engine.Abandon does: the lock passes to the
// next waiter, the waiter ID is forgotten. An error result is left alone.
// Call it instead of Settle, not after it.
func (o AcquireResult) Abandon() { o.abandon() }

func (o *AcquireResult) abandon() {
	if o.err != nil || o.s == nil {
		return
	}
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if lk := s.locks[o.g.Key]; lk != nil {
		s.undeliverable(lk, o.g.Token, o.t)
	}
}

// acquire is the one acquire path of Acquire and AcquireFunc: it grants
// at once, answers a known waiter ID, or queues the request with done
// (nil: a channel, for Acquire) and returns its *Waiting. A result known
// at once is put in o (nil *Waiting).
func (e *Engine) acquire(req *AcquireRequest, done Receiver, o *AcquireResult) *Waiting {
	fail := func(err error) *Waiting { o.err = err; return nil }
	if err := CheckKey(req.Key); err != nil {
		return fail(err)
	}
	e.paceTokens()
	// This node's bounds (lease_max, wait_max) refuse a new acquire that
	// asks for more (overBound), but not a repeat under a known waiter ID:
	// that is the first request's, accepted under the bounds of the node
	// that took it (this one before a restart that lowered them, or the
	// active before a failover), and its grant or place stands, so the
	// repeat is answered with it (README, "Waiter identity"). A repeat's
	// wait is cut to wait_max here.
	lease, overBound := e.checkLease(req.Lease)
	if overBound != nil && req.Lease < 0 {
		return fail(overBound) // malformed, not over a bound
	}
	wait := req.Wait
	switch {
	case wait < 0:
		return fail(argErr("wait", "must be 0 (no limit) or more seconds"))
	case e.cfg.WaitMax > 0 && wait > e.cfg.WaitMax:
		if overBound == nil {
			overBound = argErr("wait", "must be at most %v seconds (wait_max)", e.cfg.WaitMax.Seconds())
		}
		wait = e.cfg.WaitMax
	case e.cfg.WaitMax > 0 && wait == 0:
		wait = e.cfg.WaitMax
	}
	if overBound != nil && req.ID == "" {
		return fail(overBound)
	}
	if err := CheckOwner(req.Owner); err != nil {
		return fail(err)
	}
	if req.Owner != "" {
		// Kept with the holder or waiter: not a slice of the request.
		req.Owner = strings.Clone(req.Owner)
	}
	switch {
	case req.Mode != Exclusive && req.Mode != Shared:
		return fail(argErr("mode", "must be shared or exclusive"))
	case req.Limit < 0 || req.Limit > MaxLimit:
		return fail(argErr("limit", "must be an integer from 1 to %d", MaxLimit))
	}
	s := e.shard(req.Key)
	s.mu.Lock()
	if err := e.serving(); err != nil {
		s.mu.Unlock()
		return fail(err)
	}
	now := e.now()
	s.overdue(now) // a lease that ran out is over, before its timer fires too
	if req.ID != "" {
		if t := s.tickets[ticketKey{req.Key, req.ID}]; t != nil {
			if err := t.differs(req, e.cfg.LeaseDefault); err != nil {
				// Another request under a known ID: refused (naming the
				// bound it breaks, if it does), and the first one's
				// waiter or grant stays as it is.
				s.mu.Unlock()
				if overBound != nil {
					err = overBound
				}
				return fail(err)
			}
			return s.repeat(t, now, done, o, wait)
		}
		if overBound != nil {
			s.mu.Unlock()
			return fail(overBound)
		}
		// Kept with its ticket, for the retention period past the grant:
		// not a slice of the request (a native request line, say).
		req.ID = strings.Clone(req.ID)
	}
	lk := s.locks[req.Key]
	limit := req.Limit
	if lk == nil {
		if !admit(&e.keys, e.cfg.MaxKeys) {
			s.mu.Unlock()
			return fail(ErrTooManyKeys)
		}
		lk = s.newLock(req.Key)
		if limit == 0 {
			limit = 1
		}
	} else {
		if limit != 0 && limit != lk.limit() {
			s.mu.Unlock()
			return fail(&LimitMismatchError{Limit: lk.limit()})
		}
		limit = lk.limit()
	}
	if lk.head == nil && lk.canGrant(req.Mode) {
		s.grantNow(lk, req, lease, limit, now, o)
		return nil
	}
	if lk.n >= e.cfg.MaxWaitersPerKey || !admit(&e.waiters, e.cfg.MaxWaiters) {
		s.mu.Unlock()
		return fail(ErrTooManyWaiters)
	}
	// The waiter is counted: its enqueue's apply does not count it again.
	s.admitted = true
	return s.enqueue(lk, req, lease, wait, limit, now, done, o)
}

// unadmit takes back the count of a waiter admitted (s.admitted) but not
// queued. s.mu is held.
func (s *shard) unadmit() {
	if s.admitted {
		s.admitted = false
		s.e.waiters.Add(-1)
	}
}

// admit counts one more key or waiter in n when it stays within max, and
// reports whether it did. The check and the count are one step: checked
// under a shard's lock and counted later, acquires on keys of two shards
// both passed the check for the last place, and MaxKeys or MaxWaiters was
// exceeded (dflockd's audit, bug 8: "check-then-increment is not atomic").
func admit(n *atomic.Int64, max int) bool {
	for {
		v := n.Load()
		if v >= int64(max) {
			return false
		}
		if n.CompareAndSwap(v, v+1) {
			return true
		}
	}
}

// grantNow grants req a free lk at once and puts the result in o. s.mu is
// held and is released here. (acquire's two ends are functions of their
// own: each frame holds one Record, and a goroutine parked in Acquire
// keeps the stack its deepest call grew.)
//
//go:noinline
func (s *shard) grantNow(lk *lock, req *AcquireRequest, lease time.Duration, limit int, now stamp, o *AcquireResult) {
	r := Record{Kind: RecGrant, Key: lk.key, Lease: lease, At: now.wall, Expires: now.wallAt(after(now.mono, lease)), WaiterID: req.ID, Owner: req.Owner, Mode: req.Mode, Limit: recLimit(limit), LeaseDefaulted: req.Lease == 0}
	idx, err := s.logGrant(&r, now)
	if err != nil {
		s.dropIfIdle(lk)
		s.mu.Unlock()
		o.err = err
		return
	}
	s.apply(lk, &r, now)
	var t *ticket
	if req.ID != "" {
		t = s.tickets[ticketKey{lk.key, req.ID}]
		t.answers, t.idx = 1, idx
	}
	g := lk.grantInfo(lk.find(r.Token), now)
	// The generation it was made in, read while the shard is locked: a
	// step-down (Demote, then Diverged) that takes the shard after this
	// must find the grant in the generation before its own.
	gen := s.e.resets.Load()
	s.mu.Unlock()
	*o = AcquireResult{g: g, idx: idx, gen: gen, s: s, t: t}
}

// enqueue queues req on lk and parks done (or a channel) on its waiter.
// s.mu is held and is released here; an error goes to o.
//
//go:noinline
func (s *shard) enqueue(lk *lock, req *AcquireRequest, lease, wait time.Duration, limit int, now stamp, done Receiver, o *AcquireResult) *Waiting {
	id := req.ID
	if id == "" {
		// A queued waiter always has an ID, so that it can be resumed on
		// another node after a handoff (the ticket travels in a redirect),
		// or, when no redirect can carry it, left behind (NoTicket).
		id = newTicketID(req.NoTicket)
	}
	r := Record{Kind: RecEnqueue, Key: lk.key, WaiterID: id, Lease: lease, At: now.wall, Owner: req.Owner, Mode: req.Mode, Limit: recLimit(limit), LeaseDefaulted: req.Lease == 0}
	if wait > 0 {
		// A wait too long to have an end (past the year 2262) has none.
		r.WaitUntil = now.wallAt(after(now.mono, wait))
	}
	if _, err := s.record(&r); err != nil {
		s.unadmit()
		s.dropIfIdle(lk)
		s.mu.Unlock()
		o.err = err
		return nil
	}
	w := s.apply(lk, &r, now)
	s.unadmit() // when the apply did not queue it
	// The request parks on w: an active's own part of the change.
	p := s.park(w, now, done, 0)
	s.mu.Unlock()
	return p
}

// park puts a request (done, or a channel for Acquire) on the queued
// waiter w. s.mu is held.
func (s *shard) park(w *waiter, now stamp, done Receiver, waitUntil int64) *Waiting {
	if w.graceUntil != 0 || waitUntil != 0 {
		// A detached waiter resumed: its place no longer runs out, on a
		// standby that promotes either (Promote keeps a logged grace).
		// A wait a repeat ended sooner (waitUntil, repeatWaitUntil) ends
		// so on the standbys too. A log that refuses it leaves that
		// grace and that wait on the standbys.
		r := Record{Kind: RecDetach, Key: w.lk.key, WaiterID: w.t.id, At: now.wall}
		if waitUntil != 0 {
			r.WaitUntil = now.wallAt(waitUntil)
		}
		_, _ = s.record(&r)
		s.apply(w.lk, &r, now) // sets w.waitUntil back from r.WaitUntil, exactly (one stamp)
	}
	p := &Waiting{s: s, w: w, to: done}
	if done == nil {
		p.ch = make(chan AcquireResult, 1)
	}
	w.req = p
	w.state = queued
	w.graceUntil = 0
	if s.e.cfg.PollTimeout > 0 {
		w.pollUntil = after(now.mono, s.e.cfg.PollTimeout)
	}
	s.schedule(w)
	return p
}

// repeat answers an acquire whose waiter ID is known; wait is the
// repeat's own (0: no limit). s.mu is held and is released here.
func (s *shard) repeat(t *ticket, now stamp, done Receiver, o *AcquireResult, wait time.Duration) *Waiting {
	switch t.state {
	case tGranted:
		lk := s.locks[t.key]
		var h *hold
		if lk != nil {
			h = lk.find(t.token)
		}
		if h == nil {
			// No slot of the key holds this grant (an invariant broken
			// elsewhere): there is no grant to answer with, only that
			// it ended.
			s.mu.Unlock()
			o.err = ErrGrantEnded
			return nil
		}
		g := lk.grantInfo(h, now)
		idx := t.idx
		if t.claimBy != 0 {
			// The claim deadline ends: the repeat takes the grant.
			r := Record{Kind: RecClaim, Key: lk.key, Token: t.token, WaiterID: t.id, At: now.wall}
			var err error
			if idx, err = s.record(&r); err != nil {
				s.mu.Unlock()
				o.err = err
				return nil
			}
			if idx == 0 {
				idx = t.idx
			}
			s.apply(lk, &r, now)
		}
		t.answers++
		gen := s.e.resets.Load() // under the shard's lock, as in grantNow
		s.mu.Unlock()
		*o = AcquireResult{g: g, idx: idx, gen: gen, s: s, t: t}
		return nil
	case tTimedOut:
		gen := s.e.resets.Load() // under the shard's lock, as in grantNow
		s.mu.Unlock()
		*o = AcquireResult{err: ErrTimeout, idx: t.idx, gen: gen, s: s, t: t}
		return nil
	case tEnded:
		s.mu.Unlock()
		o.err = ErrGrantEnded
		return nil
	}
	// Still waiting: this request takes over the place, until the
	// first request's deadline or its own, whichever ends first
	// (repeatWaitUntil).
	w := t.w
	if w.state == queued {
		w.deliver(AcquireResult{err: ErrSuperseded})
	}
	p := s.park(w, now, done, repeatWaitUntil(w.waitUntil, now.mono, wait))
	s.mu.Unlock()
	return p
}

// repeatWaitUntil is the rule for the wait of a repeat that takes over a
// waiting place (a retry, a resume after poll_timeout, a client's ask
// after it cancelled): the place's wait ends at the first request's
// deadline (until, monotonic ns; 0 = no limit) or at the repeat's own,
// wait after now, whichever comes first. A repeat never lengthens a
// wait; a repeat that asks for less than is left ends it sooner, as its
// client will not wait longer (a cancelled acquire's ask with 1 ms is
// answered 408 then, and the place is gone, instead of holding it until
// the ask gives up). It returns the new deadline, 0 when until stands.
func repeatWaitUntil(until, now int64, wait time.Duration) int64 {
	if wait <= 0 {
		return 0
	}
	if own := after(now, wait); own != 0 && (until == 0 || own < until) {
		return own
	}
	return 0
}

// undeliverable releases a grant whose answer could not be delivered, and
// forgets its waiter ID so that a retry queues afresh.
func (s *shard) undeliverable(lk *lock, token uint64, t *ticket) {
	now := s.e.now()
	if s.takeBack(lk, token, t, now) {
		s.grantNext(lk, now)
		s.dropIfIdle(lk)
	}
}

// takeBack is undeliverable without handing the lock on: it releases
// the grant and forgets its ticket, and reports whether it did either
// (the caller then hands on and drops the idle key). s.mu is held.
func (s *shard) takeBack(lk *lock, token uint64, t *ticket, now stamp) bool {
	if s.e.serving() != nil {
		// Closed, or a standby: the lock is no longer this node's to pass
		// on (the new active runs its lease).
		return false
	}
	if t != nil {
		if t.answers--; t.answers > 0 {
			// A repeat of the request was answered with the same grant:
			// the client may well hold it.
			return false
		}
	}
	return s.retake(lk, token, t, now)
}

// retake is takeBack once the answers are counted: it releases the grant
// (token) and forgets its ticket t, and reports whether it did either.
// The release is appended even while the log fails (recordPending): the
// grant's own record is then pending in it too, and the two are written
// together if the log recovers. When the log refuses it all the same (a
// Log without AppendPending, or closed), the slot's deadline retries it
// every logRetry (expire), for the grant must not outlive the failure:
// nobody was told of it, and its waiter was told that nothing changed.
// s.mu is held.
func (s *shard) retake(lk *lock, token uint64, t *ticket, now stamp) bool {
	if h := lk.find(token); h != nil {
		// The release names the waiter ID, which is forgotten with it.
		r := Record{Kind: RecRelease, Key: lk.key, Token: token, At: now.wall}
		if t != nil && h.holder == t {
			r.WaiterID = t.id
		}
		if _, err := s.recordPending(&r); err != nil {
			h.dl.retake = true
			s.retryLater(&h.dl, now)
			return false
		}
		s.apply(lk, &r, now)
	}
	if t != nil {
		s.retire(t, tForget, now)
	}
	return true
}

// Undelivered returns the grants this engine could not take back although
// nobody was told of them: their record was handed to the log, the log
// failed to write it, and then refused the release too (retake). The log
// writes them if it recovers (and a replication stream then sends them,
// as it sends only what the log wrote): a node that hands its role off with its log failing
// passes them to its successor (Promote), or they would hold their keys
// there until their leases end. It walks every key: call it only then.
func (e *Engine) Undelivered() []Grant {
	var out []Grant
	for i := range e.shards {
		s := &e.shards[i]
		s.mu.Lock()
		for _, lk := range s.locks {
			lk.each(func(h *hold) {
				if h.dl.retake {
					out = append(out, Grant{Key: lk.key, Token: h.token})
				}
			})
		}
		s.mu.Unlock()
	}
	return out
}

// Abandon releases a grant that Acquire returned but that the caller could
// not deliver to its client (the connection was gone). The lock passes to the
// next waiter at once, and the grant's waiter ID (if any) is forgotten so a
// retry queues afresh. A grant that ended meanwhile is left alone.
func (e *Engine) Abandon(g Grant, id string) {
	s := e.shard(g.Key)
	s.mu.Lock()
	defer s.mu.Unlock()
	lk := s.locks[g.Key]
	if lk == nil || lk.find(g.Token) == nil {
		return
	}
	var t *ticket
	if id != "" {
		t = s.tickets[ticketKey{g.Key, id}]
		if t != nil && t.token != g.Token {
			t = nil
		}
	}
	s.undeliverable(lk, g.Token, t)
}

// Release ends the grant with token on key and hands the lock to the first
// waiter with a new token, in the same step. It returns ErrNotHeld when
// nobody holds key, ErrNotHolder when another token does, ErrClosed,
// ErrUnavailable when the log cannot take the change (then nothing
// changed), ErrNotWritten when it took it but could not write it (then
// the outcome is unknown), ErrReplaced when the node stepped down before
// the release could be answered (see Generation), or an *ArgError for a
// bad key. With a Log it returns once the release is written.
func (e *Engine) Release(key string, token uint64) error {
	_, err := e.ReleaseLogged(key, token)
	return err
}

// ReleaseLogged is Release that also returns the highest log index of
// the records its step appended (the release and the grants to the
// waiters it let in), all written when it returns nil (and so every
// change below it: see LogIndex); 0 without a log, or with an error.
// The grants it made need no further wait for the log to be answered
// (AcquireResult.LogIndex at or below it).
func (e *Engine) ReleaseLogged(key string, token uint64) (LogIndex, error) {
	idx, last, gen, err := e.releaseNoWait(key, token)
	if err != nil {
		return 0, e.SettleRefusal(err, idx, gen)
	}
	if last > idx {
		// The waiters it granted were appended with it and their
		// requests woken: the write starts at once, without first letting
		// them run (Wait's yield) only to find it not done and park
		// again, one wake-up more each before their answers.
		err = e.WaitLoggedGathered(last)
	} else {
		err = e.WaitLogged(idx)
	}
	if err != nil {
		return 0, err
	}
	if e.Replaced(gen) {
		return 0, ErrReplaced
	}
	return last, nil
}

// ReleaseNoWait is Release without the wait for the log: the release is
// made (the lock handed on) and appended to the log, and it may be
// answered once WaitLogged(idx) returns nil, unless Replaced(gen) (gen
// is the Generation it was made in, read with its shard locked): it is
// answered ErrReplaced then. Its errors are Release's but ErrNotWritten
// and ErrReplaced, which those two return, and ErrRefusalNotWritten: a
// refusal (ErrNotHeld, ErrNotHolder) comes with the index and generation
// SettleRefusal answers it at.
func (e *Engine) ReleaseNoWait(key string, token uint64) (idx LogIndex, gen uint64, err error) {
	idx, _, gen, err = e.releaseNoWait(key, token)
	return idx, gen, err
}

// releaseNoWait is ReleaseNoWait; last is the highest log index its step
// appended (above idx when it granted a waiter or let one leave).
func (e *Engine) releaseNoWait(key string, token uint64) (idx, last LogIndex, gen uint64, err error) {
	if err := CheckKey(key); err != nil {
		return 0, 0, 0, err
	}
	s := e.shard(key)
	s.mu.Lock()
	if err := e.serving(); err != nil {
		s.mu.Unlock()
		return 0, 0, 0, err
	}
	now := e.now()
	s.overdue(now)
	lk := s.locks[key]
	if err := lk.check(token); err != nil {
		idx, gen := s.judged()
		s.mu.Unlock()
		return idx, idx, gen, err
	}
	return s.release(lk, &Record{Kind: RecRelease, Key: lk.key, Token: token, At: now.wall}, now)
}

// release makes r, a release of lk (RecRelease, RecForce), in the same
// step as the hand-on of the freed slots: it appends r to the log, applies
// it, grants the next waiters and drops the key if idle. s.mu is held and
// is released here. It returns r's log index, the Generation it was made
// in (read with the shard locked: a step-down, which takes every shard,
// comes before or after it whole) and the highest index the step
// appended (the waiters it granted or let leave: last > idx), or the
// log's refusal (then nothing changed).
func (s *shard) release(lk *lock, r *Record, now stamp) (idx, last LogIndex, gen uint64, err error) {
	n, err := s.record(r)
	if err != nil {
		s.mu.Unlock()
		return 0, 0, 0, err
	}
	s.apply(lk, r, now)
	s.grantNext(lk, now)
	if n != 0 {
		last = LogIndex(s.last)
	}
	s.dropIfIdle(lk)
	gen = s.e.resets.Load()
	s.mu.Unlock()
	return LogIndex(n), last, gen, nil
}

// ForceRelease is an operator's release: it ends every grant on key and
// hands the freed slots to the waiters in queue order, in the same step;
// the release events say Forced. It returns ErrNotHeld when nobody holds
// key, or the other errors of Release. With a Log it returns once the
// release is written. It is ForceReleaseID without an ID: a repeat is
// another force.
func (e *Engine) ForceRelease(key string) error { return e.ForceReleaseID(key, "") }

// ForceReleaseID is ForceRelease under id, the force's own ID (an
// Idempotency-Key; "" = none). A forced release is not safe to repeat: a
// repeat releases the holders the first one handed the lock to. Under an
// ID the force is remembered for Config.Retention, replicated and
// snapshotted like a waiter ID's outcome, and a repeat under it is
// answered as the first one was (nil, once the first is written; or
// ErrNotHeld when the first found nobody holding key) and changes
// nothing, even when nobody, or someone else, holds key by then. An ID that
// ValidID refuses is an *ArgError naming Idempotency-Key; an ID an acquire
// of key holds (or held, within Retention), or a force's ID under which
// an acquire comes, is a *KeyReusedError naming Idempotency-Key; nothing
// changes then.
func (e *Engine) ForceReleaseID(key, id string) error {
	idx, gen, err := e.ForceReleaseNoWait(key, id)
	if err != nil {
		return e.SettleRefusal(err, idx, gen)
	}
	if err := e.WaitLogged(idx); err != nil {
		return err
	}
	if e.Replaced(gen) {
		return ErrReplaced
	}
	return nil
}

// errForceIDReused is the KeyReusedError of an ID used by both a forced
// release and an acquire of the same key.
var errForceIDReused = &KeyReusedError{Field: "Idempotency-Key", Reason: "is the ID of another request on this key (an acquire's, or a forced release's): a forced release and an acquire each need an ID of their own"}

// ForceReleaseNoWait is ForceReleaseID without the wait for the log (see
// ReleaseNoWait, with its gen). Its errors are ForceReleaseID's but
// ErrNotWritten and ErrReplaced, which WaitLogged and Replaced(gen) tell,
// and ErrRefusalNotWritten, which SettleRefusal tells of its ErrNotHeld.
// A repeat under a remembered ID returns the shard's last index: the
// first force's record is at or below it.
func (e *Engine) ForceReleaseNoWait(key, id string) (idx LogIndex, gen uint64, err error) {
	if err := CheckKey(key); err != nil {
		return 0, 0, err
	}
	if id != "" && !ValidID(id) {
		return 0, 0, argErr("Idempotency-Key", "must be 1 to %d printable ASCII characters", MaxIDBytes)
	}
	s := e.shard(key)
	s.mu.Lock()
	if err := e.serving(); err != nil {
		s.mu.Unlock()
		return 0, 0, err
	}
	if id != "" {
		if t := s.tickets[ticketKey{key, id}]; t != nil {
			switch t.state {
			case tForced:
				idx, gen = s.judged()
				s.mu.Unlock()
				return idx, gen, nil
			case tForceNotHeld:
				idx, gen = s.judged()
				s.mu.Unlock()
				return idx, gen, ErrNotHeld
			}
			s.mu.Unlock()
			return 0, 0, errForceIDReused
		}
	}
	now := e.now()
	// A lease that ran out is over before its timer fires too (a node
	// resuming from a pause answers the calls in its sockets first), as
	// for a Release: its end is an expiry, the force ends what stands.
	s.overdue(now)
	lk := s.locks[key]
	if lk == nil || lk.holders() == 0 {
		if id != "" {
			// Remembered as a force that released is: a repeat under id
			// (this answer lost, and someone may hold key by then) is
			// answered ErrNotHeld too and releases nobody.
			r := &Record{Kind: RecOutcome, Key: key, WaiterID: strings.Clone(id), Outcome: OutcomeForceNotHeld, At: now.wall, Until: now.wallAt(after(now.mono, e.cfg.Retention))}
			if _, err := s.record(r); err != nil {
				s.mu.Unlock()
				return 0, 0, err
			}
			s.apply(lk, r, now)
		}
		idx, gen = s.judged()
		s.mu.Unlock()
		return idx, gen, ErrNotHeld
	}
	r := &Record{Kind: RecForce, Key: lk.key, At: now.wall}
	if id != "" {
		// Kept with its ticket for Retention: not a slice of the
		// request (a native request line, say).
		r.WaiterID = strings.Clone(id)
	}
	idx, _, gen, err = s.release(lk, r, now)
	return idx, gen, err
}

// CheckOwner reports whether owner is a valid owner label: "" (none), or
// 1 to MaxOwnerBytes bytes of printable UTF-8. The error is an *ArgError
// for "owner".
func CheckOwner(owner string) error {
	switch {
	case owner == "":
		return nil
	case len(owner) > MaxOwnerBytes:
		return argErr("owner", "is %d bytes; at most %d are allowed", len(owner), MaxOwnerBytes)
	case !utf8.ValidString(owner):
		return argErr("owner", "is not valid UTF-8")
	}
	for _, r := range owner {
		if !unicode.IsPrint(r) {
			return argErr("owner", "contains the unprintable character %U", r)
		}
	}
	return nil
}

// ParseOwner reads an owner label given as a parameter (an HTTP query
// or body field, a native owner= option): 1 to MaxOwnerBytes bytes of
// printable UTF-8. An empty value is refused (leaving the parameter out
// means no owner). The error is an *ArgError for "owner".
func ParseOwner(v string) (string, error) {
	if v == "" {
		return "", argErr("owner", "must not be empty (1 to %d bytes of printable UTF-8; leave it out for none)", MaxOwnerBytes)
	}
	if err := CheckOwner(v); err != nil {
		return "", err
	}
	return v, nil
}

// ParseMode reads a mode as the API spells it (Mode.String): "exclusive"
// or "shared". Anything else is an *ArgError for "mode".
func ParseMode(v string) (Mode, error) {
	switch v {
	case "exclusive":
		return Exclusive, nil
	case "shared":
		return Shared, nil
	}
	return Exclusive, argErr("mode", "must be shared or exclusive, got %s", quoteShort(v))
}

// ParseLimit reads a holder limit as the API spells it: an integer from 1
// to MaxLimit in canonical decimal (ASCII digits, no sign, no leading
// zero). Anything else is an *ArgError for "limit".
func ParseLimit(v string) (int, error) {
	canonical := v != "" && v[0] != '0' && strings.Trim(v, "0123456789") == ""
	n, err := strconv.Atoi(v)
	switch {
	case canonical && (err != nil || n > MaxLimit):
		return 0, argErr("limit", "must be at most %d, got %s", MaxLimit, quoteShort(v))
	case !canonical || err != nil:
		return 0, argErr("limit", "must be an integer from 1 to %d, got %s", MaxLimit, quoteShort(v))
	}
	return n, nil
}

// BadToken is the *ArgError for "token" of a value v that is not a
// fencing token as the API writes one (decimal digits without a sign or a
// leading zero, from 1 to MaxToken-1): the one message every protocol
// gives, naming v.
func BadToken(v string) error {
	return argErr("token", "must be a fencing token: an integer from 1 to 2^53-1, got %s", quoteShort(v))
}

// quoteShort quotes v for an error message, cut after 40 bytes.
func quoteShort(v string) string {
	const max = 40
	if len(v) > max {
		return strconv.Quote(v[:max]) + "…"
	}
	return strconv.Quote(v)
}

// recLimit is limit as a record carries it: 0 for the default of 1.
func recLimit(limit int) int {
	if limit == 1 {
		return 0
	}
	return limit
}

// Renew restarts the lease of the grant with token on key from now, with
// lease (0 = the grant's lease, at most Config.LeaseMax). It returns the
// renewed Grant (with a Log, once the renewal is written), or the errors
// of Release, or an *ArgError
// for a bad lease, or ErrReplaced (the state was replaced before the
// renewal could be answered: see Generation).
func (e *Engine) Renew(key string, token uint64, lease time.Duration) (Grant, error) {
	gen := e.Generation()
	g, idx, err := e.RenewNoWait(key, token, lease)
	if err != nil {
		return Grant{}, e.SettleRefusal(err, idx, gen)
	}
	if err := e.WaitLogged(idx); err != nil {
		return Grant{}, err
	}
	if e.Replaced(gen) {
		return Grant{}, ErrReplaced
	}
	if idx != 0 {
		if err := e.RenewalStands(key, token); err != nil {
			return Grant{}, err
		}
	}
	return g, nil
}

// RenewNoWait is Renew without the wait for the log (see ReleaseNoWait):
// the renewed Grant may be answered once WaitLogged(idx) returns nil; a
// refusal (ErrNotHeld, ErrNotHolder) comes with the index SettleRefusal
// answers it at (with the Generation read before the call).
func (e *Engine) RenewNoWait(key string, token uint64, lease time.Duration) (Grant, LogIndex, error) {
	if err := CheckKey(key); err != nil {
		return Grant{}, 0, err
	}
	if lease != 0 {
		var err error
		if lease, err = e.checkLease(lease); err != nil {
			return Grant{}, 0, err
		}
	}
	s := e.shard(key)
	s.mu.Lock()
	if err := e.serving(); err != nil {
		s.mu.Unlock()
		return Grant{}, 0, err
	}
	now := e.now()
	s.overdue(now)
	lk := s.locks[key]
	if err := lk.check(token); err != nil {
		idx, _ := s.judged()
		s.mu.Unlock()
		return Grant{}, idx, err
	}
	h := lk.find(token)
	if lease == 0 {
		// The grant's own lease, within this node's lease_max: a grant
		// made under a longer one (by the active before a failover, or
		// before a restart with a lower lease_max) is renewed for the
		// longest lease this node gives.
		lease = min(h.lease, e.cfg.LeaseMax)
	}
	r := Record{Kind: RecRenew, Key: lk.key, Token: token, Lease: lease, At: now.wall, Expires: now.wallAt(after(now.mono, lease))}
	n, err := s.record(&r)
	if err != nil {
		s.mu.Unlock()
		return Grant{}, 0, err
	}
	s.apply(lk, &r, now)
	g := lk.grantInfo(h, now)
	s.mu.Unlock()
	return g, LogIndex(n), nil
}

// Status returns a snapshot of key; a key nobody holds or waits for has a
// nil Holder and no waiters. On the active it is answered once every
// change of the key's shard it shows stands as an answered change does:
// written to this node's log and, in a cluster with sync_standbys,
// acknowledged by those standbys (or the active degraded): the Log's
// Wait. So it never shows what a crash of the node, or of the active,
// would take back: a grant whose record a failing log has not written
// (which is taken back), nor one a failover would lose; it is answered
// as a grant would be, at once but for a write and its acknowledgements
// under way. A read that waited while the node stepped down is read again
// from the state it serves then. Errors: CheckKey's, and
// ErrReadNotWritten while the log cannot write them (a full disk; after
// the log's FailTimeout).
func (e *Engine) Status(key string) (LockInfo, error) {
	if err := CheckKey(key); err != nil {
		return LockInfo{}, err
	}
	s := e.shard(key)
	for {
		s.mu.Lock()
		now := e.now()
		var idx LogIndex
		if e.serving() == nil {
			s.overdue(now) // no holder shown past its lease after a pause
			// (A standby shows its active's changes, which that log wrote.)
			idx, _ = s.judged()
		}
		li := LockInfo{Key: key}
		if lk := s.locks[key]; lk != nil {
			li = lk.info(now)
		}
		s.mu.Unlock()
		if err := e.waitShown(idx); err != nil {
			if errors.Is(err, ErrReplaced) {
				continue
			}
			return LockInfo{}, err
		}
		return li, nil
	}
}

// Waiters returns the queue of key in order, at most limit entries.
func (e *Engine) Waiters(key string, limit int) []Waiter {
	s := e.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	lk := s.locks[key]
	if lk == nil {
		return nil
	}
	var out []Waiter
	now := e.now()
	for w := lk.head; w != nil && len(out) < limit; w = w.next {
		x := Waiter{Since: now.time(w.arrived), Lease: w.lease, Owner: w.owner, Mode: w.mode}
		if w.t != nil && !IsTicket(w.t.id) {
			x.ID = w.t.id
		}
		if w.waitUntil != 0 {
			x.WaitEnd = now.time(w.waitUntil)
		}
		out = append(out, x)
	}
	return out
}

// Range calls fn for a snapshot of every key with a holder or waiters,
// shard by shard, in no particular order, until fn returns false. fn runs
// with the key's shard locked: it must not call into the Engine.
func (e *Engine) Range(fn func(LockInfo) bool) {
	for i := range e.shards {
		s := &e.shards[i]
		s.mu.Lock()
		now := e.now()
		if e.serving() == nil {
			s.overdue(now) // as Page
		}
		for _, lk := range s.locks {
			if !fn(lk.info(now)) {
				s.mu.Unlock()
				return
			}
		}
		s.mu.Unlock()
	}
}

func (lk *lock) check(token uint64) error {
	switch {
	case lk == nil || lk.holders() == 0:
		return ErrNotHeld
	case lk.find(token) == nil:
		return ErrNotHolder
	}
	return nil
}

// grantInfo describes lk's grant in slot h, its times on the wall clock
// of the reading now.
func (lk *lock) grantInfo(h *hold, now stamp) Grant {
	return Grant{
		Key:       lk.key,
		Token:     h.token,
		Lease:     h.lease,
		GrantedAt: now.time(h.granted),
		ExpiresAt: now.time(h.expires),
		Owner:     lk.owner(h),
		Mode:      lk.mode(),
	}
}

func (lk *lock) info(now stamp) LockInfo {
	li := LockInfo{Key: lk.key, Waiters: lk.n, Limit: lk.limit()}
	if lk.holders() > 0 {
		li.Holders = make([]Grant, 0, lk.holders())
		lk.each(func(h *hold) {
			g := lk.grantInfo(h, now)
			g.ExpiresAt = now.time(h.takenBack()) // a claim deadline, if first
			li.Holders = append(li.Holders, g)
		})
		// Tokens rise with every grant: by token is oldest grant first.
		slices.SortFunc(li.Holders, func(a, b Grant) int { return cmp.Compare(a.Token, b.Token) })
		li.Holder = &li.Holders[0]
	}
	if w := lk.head; w != nil {
		li.OldestSince = now.time(w.arrived)
		li.OldestOwner, li.OldestMode = w.owner, w.mode
	}
	return li
}

// enqueue appends w to lk's queue.
func (lk *lock) enqueue(w *waiter) {
	if lk.head == nil {
		lk.head, w.prev = w, w
	} else {
		tail := lk.head.prev
		tail.next, w.prev = w, tail
		lk.head.prev = w
	}
	lk.n++
}

// unlink takes w out of lk's queue.
func (lk *lock) unlink(w *waiter) {
	switch {
	case w == lk.head:
		lk.head = w.next
		if lk.head != nil {
			lk.head.prev = w.prev // the tail
		}
	case w.next == nil: // the tail
		w.prev.next = nil
		lk.head.prev = w.prev
	default:
		w.prev.next = w.next
		w.next.prev = w.prev
	}
	w.prev, w.next = nil, nil
	lk.n--
}

// deliver hands o to the request parked on w, if one still is (each
// request receives at most one outcome), and reports whether the request
// took it. s.mu is held.
func (w *waiter) deliver(o AcquireResult) bool {
	p := w.req
	if p == nil {
		return false
	}
	w.req = nil
	if o.err == nil {
		o.s, o.t = p.s, w.t
	}
	if p.to == nil {
		p.ch <- o // one slot, one outcome
		return true
	}
	return p.to.Done(o)
}

// logGrant decides the grant r (a RecGrant without its token): it issues
// the token into r.Token and writes r to the log. It returns the record's
// index (0 without a log), or ErrTokenSpace, or an error wrapping
// ErrUnavailable (the log or the token high-water mark); nothing
// has changed then but a token skipped. s.mu is held.
func (s *shard) logGrant(r *Record, now stamp) (uint64, error) {
	tok, err := s.e.tokens.next(now.wall)
	if err != nil {
		return 0, err
	}
	r.Token = tok
	return s.record(r)
}

// endGrant frees lk's slot h; the holder's ticket is retired as ended.
// forced marks the event of an operator's release. s.mu is held.
func (s *shard) endGrant(lk *lock, h *hold, now stamp, kind EventKind, forced bool) {
	if s.e.cfg.OnEvent != nil {
		s.emit(Event{Kind: kind, Key: lk.key, Token: h.token, At: now.wall, Waiters: lk.n, Owner: lk.owner(h), Mode: lk.mode(), Limit: lk.limit(), Forced: forced})
	}
	s.setToken(lk, h, 0)
	s.heap.remove(&h.dl)
	h.dl.retake = false
	if t := h.holder; t != nil {
		t.claimBy, t.token = 0, 0
		h.holder = nil
		if IsTicket(t.id) {
			s.retire(t, tForget, now)
		} else {
			s.retire(t, tEnded, now)
		}
	}
}

// grantNext hands lk's free slots to its waiters in queue order, as long
// as the first waiter's mode fits the holders (a queued exclusive waiter
// holds back every shared one behind it). s.mu is held.
func (s *shard) grantNext(lk *lock, now stamp) {
	for lk.head != nil && lk.canGrant(lk.head.mode) {
		w := lk.head
		if w.waitUntil != 0 && now.mono >= w.waitUntil {
			// Its wait ran out before its deadline was handled (a
			// promotion grants what the replica holds before any timer
			// runs; a paused process handles an earlier lease end
			// first): it times out, never granted (SPEC section 1).
			if !s.timeOut(w, now) {
				return
			}
			continue
		}
		if w.state == detached && w.graceUntil != 0 && now.mono >= w.graceUntil {
			// Its grace ran out before its deadline was handled (a
			// promotion keeps a grace that passed meanwhile, and grants
			// before any timer runs): it leaves, never granted.
			s.leave(w, now)
			continue
		}
		r := Record{Kind: RecGrant, Key: lk.key, Lease: w.lease, At: now.wall, Expires: now.wallAt(after(now.mono, w.lease)), WaiterID: w.t.id, Owner: w.owner, Mode: w.mode, Limit: recLimit(lk.limit()), LeaseDefaulted: w.defaulted}
		if w.state == detached {
			// Its request is gone, its repeat is due within the grace: the
			// grant waits that long to be claimed, then is released.
			r.Until = now.wallAt(w.graceUntil)
		}
		idx, err := s.logGrant(&r, now)
		if errors.Is(err, ErrUnavailable) {
			// The log refused the grant: nothing changed, the first
			// waiter keeps its place, and the grant is tried again (on
			// the free slot's deadline).
			s.retryLater(&lk.freeSlot().dl, now)
			return
		}
		if err != nil {
			// Only 2^53 tokens end here: the waiter is told, the lock
			// stays free.
			s.dequeue(w)
			s.retire(w.t, tForget, now)
			w.deliver(AcquireResult{err: err})
			continue
		}
		s.apply(lk, &r, now)
		if w.state == detached {
			continue
		}
		w.t.answers, w.t.idx = 1, idx
		if !w.deliver(AcquireResult{g: lk.grantInfo(lk.find(r.Token), now), idx: idx, gen: s.e.resets.Load()}) {
			// Nobody takes it (its client is gone): the lock goes on to
			// the next waiter in this loop.
			s.takeBack(lk, r.Token, w.t, now)
		}
	}
}

// retryLater arms d (a lock's or a waiter's deadline) to try a change the
// log refused again after logRetry. s.mu is held.
func (s *shard) retryLater(d *deadline, now stamp) {
	if !s.e.active.Load() {
		return
	}
	s.heap.set(d, after(now.mono, logRetry))
	s.arm()
}

// dequeue takes w out of its queue and the heap. s.mu is held.
func (s *shard) dequeue(w *waiter) {
	w.lk.unlink(w)
	s.heap.remove(&w.dl)
	s.e.waiters.Add(-1)
}

// leave removes a waiter that went away, and forgets its waiter ID. The
// leave is logged if the log takes it; if not, the waiter leaves all the
// same (its request is gone): a replay then finds it queued, and keeps it
// only as a detached waiter keeps its place, for PollGrace. s.mu is held.
func (s *shard) leave(w *waiter, now stamp) {
	r := Record{Kind: RecLeave, Key: w.lk.key, WaiterID: w.t.id, At: now.wall}
	_, _ = s.record(&r)
	s.apply(w.lk, &r, now)
}

// leaveAndHandOn removes a waiter that went away, then grants what its
// leaving frees: shared waiters it held back behind it. s.mu is held.
func (s *shard) leaveAndHandOn(w *waiter, now stamp) {
	lk := w.lk
	s.leave(w, now)
	s.grantNext(lk, now)
	s.dropIfIdle(lk)
}

// retire ends a ticket: with tForget it is forgotten, otherwise it is
// kept in state for the retention period. s.mu is held.
func (s *shard) retire(t *ticket, state ticketState, now stamp) {
	t.w = nil
	if state == tForget {
		delete(s.tickets, ticketKey{t.key, t.id})
		s.heap.remove(&t.dl)
		return
	}
	t.state = state
	s.retain(t, after(now.mono, s.e.cfg.Retention))
}

// setToken sets the token of lk's slot h (0 = free), keeping the count
// of held keys and of lk's further holders. s.mu is held.
func (s *shard) setToken(lk *lock, h *hold, tok uint64) {
	before := lk.holders()
	if sl := lk.further(h); sl != nil {
		x := lk.x
		switch {
		case h.token == 0 && tok != 0:
			x.held++
			if n := len(x.free); n > 0 && x.free[n-1] == sl {
				x.free = x.free[:n-1] // the slot freeSlot returned
			}
		case h.token != 0 && tok == 0:
			x.held--
			x.free = append(x.free, sl)
		}
		if x.byToken != nil {
			if h.token != 0 {
				delete(x.byToken, h.token)
			}
			if tok != 0 {
				x.byToken[tok] = sl
			}
		}
	}
	h.token = tok
	switch after := lk.holders(); {
	case before == 0 && after != 0:
		s.e.held.Add(1)
	case before != 0 && after == 0:
		s.e.held.Add(-1)
	}
}

// dropIfIdle frees the state of a key with no holder and no waiters.
func (s *shard) dropIfIdle(lk *lock) {
	if lk.head == nil && lk.holders() == 0 && s.locks[lk.key] == lk {
		s.heap.remove(&lk.dl) // a grant to retry, if the log refused one
		if lk.x != nil {
			for _, sl := range lk.x.more {
				s.heap.remove(&sl.dl)
			}
		}
		delete(s.locks, lk.key)
		s.e.keys.Add(-1)
	}
}

// armLease arms the lease (or claim) deadline of lk's slot h.
func (s *shard) armLease(h *hold) {
	if !s.e.active.Load() {
		return
	}
	h.dl.retake = false
	s.heap.set(&h.dl, h.takenBack())
	s.arm()
}

// takenBack is when the slot h is taken back unless its holder renews it
// (monotonic ns): its lease's end, or the claim deadline of a grant that
// awaits its waiter's repeat when that comes first.
func (h *hold) takenBack() int64 {
	if t := h.holder; t != nil && t.claimBy != 0 && t.claimBy < h.expires {
		return t.claimBy
	}
	return h.expires
}

// schedule puts w's earliest deadline in the heap. s.mu is held.
func (s *shard) schedule(w *waiter) {
	var when int64
	for _, t := range [...]int64{w.waitUntil, w.pollUntil, w.graceUntil} {
		if t != 0 && (when == 0 || t < when) {
			when = t
		}
	}
	if when == 0 || !s.e.active.Load() {
		s.heap.remove(&w.dl)
		return
	}
	s.heap.set(&w.dl, when)
	s.arm()
}

// after returns the instant d after now (monotonic nanoseconds), or 0
// (never) when that lies beyond what an int64 holds: deadlines never wrap
// around.
func after(now int64, d time.Duration) int64 {
	if d > 0 && now > math.MaxInt64-int64(d) {
		return 0
	}
	return now + int64(d)
}

// arm sets the shard's timer for its earliest deadline (see earliest).
func (s *shard) arm() {
	when, ok := s.earliest()
	if !ok || (s.armed != 0 && s.armed <= when) || s.e.closed.Load() {
		return
	}
	s.armed = when
	s.timer.Reset(time.Duration(max(0, when-s.e.monoNow())))
}

// fire handles every deadline that has passed, then re-arms.
func (s *shard) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.e.closed.Load() {
		return
	}
	s.armed = 0
	s.due(s.e.now())
	s.arm()
}

// overdue handles the deadlines that passed before their timer fired
// (the process was paused, or starved of CPU), as the timer would, before
// a call that must not act on a lease that ran out: a renew must not
// extend it, a release must not answer for it, an acquire must not hand
// it out again nor queue behind it. s.mu is held.
func (s *shard) overdue(now stamp) {
	if when, ok := s.earliest(); ok && when <= now.mono {
		s.due(now)
		s.arm()
	}
}

// due handles every deadline that has passed at now: the timer's work,
// also done by a call that must not act on a deadline the timer has not
// reached yet (it runs late after a pause of the process). s.mu is held.
func (s *shard) due(now stamp) {
	for {
		d := s.heap.min()
		if d == nil || d.when > now.mono {
			break
		}
		s.heap.remove(d)
		switch o := d.owner.(type) {
		case *lock:
			s.expire(o, &o.hold, now)
		case *slot:
			s.expire(o.lk, &o.hold, now)
		case *waiter:
			s.waiterDeadline(o, now)
		case *ticket:
			delete(s.tickets, ticketKey{o.key, o.id})
		}
	}
	s.forgetRetained(now.mono)
}

// expire takes back lk's slot h whose lease ran out (or whose grant to a
// detached waiter was never claimed) and hands it on.
func (s *shard) expire(lk *lock, h *hold, now stamp) {
	if h.dl.retake {
		// The take-back of an undeliverable grant, again (retake); not
		// if a repeat of its waiter ID was answered with it since: that
		// client holds it, until its lease.
		h.dl.retake = false
		if t := h.holder; t != nil && t.answers > 0 {
			s.armLease(h)
			return
		}
		if s.retake(lk, h.token, h.holder, now) {
			s.grantNext(lk, now)
			s.dropIfIdle(lk)
		}
		return
	}
	if h.token == 0 {
		// A grant to the next waiter that the log refused: again.
		s.grantNext(lk, now)
		s.dropIfIdle(lk)
		return
	}
	r := Record{Kind: RecExpire, Key: lk.key, Token: h.token, At: now.wall}
	if _, err := s.record(&r); err != nil {
		s.retryLater(&h.dl, now)
		return
	}
	s.apply(lk, &r, now)
	s.grantNext(lk, now)
	s.dropIfIdle(lk)
}

// waiterDeadline handles w's wait, grace or poll deadline that passed.
func (s *shard) waiterDeadline(w *waiter, now stamp) {
	switch {
	case w.waitUntil != 0 && now.mono >= w.waitUntil:
		lk := w.lk
		if !s.timeOut(w, now) {
			return
		}
		s.grantNext(lk, now) // the waiters it held back
		s.dropIfIdle(lk)
	case w.state == detached && w.graceUntil != 0 && now.mono >= w.graceUntil:
		s.leaveAndHandOn(w, now)
	case w.state == queued && w.pollUntil != 0 && now.mono >= w.pollUntil:
		if IsTicket(w.t.id) {
			// Nobody could resume an anonymous waiter: it leaves now.
			w.deliver(AcquireResult{err: ErrPollTimeout})
			s.leaveAndHandOn(w, now)
			return
		}
		r := Record{Kind: RecDetach, Key: w.lk.key, WaiterID: w.t.id, At: now.wall, Until: now.wallAt(after(now.mono, s.e.cfg.PollGrace))}
		if _, err := s.record(&r); err != nil {
			s.retryLater(&w.dl, now)
			return
		}
		s.apply(w.lk, &r, now)
		w.deliver(AcquireResult{err: ErrPollTimeout})
	default:
		s.schedule(w)
	}
}

// timeOut ends the wait of w, which ran out at or before now: a RecTimeout
// (its outcome kept for Retention, for a repeat of its ID) is written,
// applied and answered to w's parked request, if any. It reports false,
// with nothing changed and the timeout retried on w's deadline, when the
// log refused the record; w's parked request is answered
// ErrTimeoutNotWritten then, at once, not once the log writes again. The
// caller hands lk on. s.mu is held.
func (s *shard) timeOut(w *waiter, now stamp) bool {
	r := Record{Kind: RecTimeout, Key: w.lk.key, WaiterID: w.t.id, At: now.wall, Until: now.wallAt(after(now.mono, s.e.cfg.Retention))}
	idx, err := s.record(&r)
	if err != nil {
		w.deliver(AcquireResult{err: ErrTimeoutNotWritten})
		s.retryLater(&w.dl, now)
		return false
	}
	queuedReq := w.state == queued
	t := w.t
	s.apply(w.lk, &r, now)
	// The timeout is answered, to the waiter and to a repeat of its ID,
	// once its record is written (settle), like every change.
	t.idx = idx
	if queuedReq {
		w.deliver(AcquireResult{err: ErrTimeout, idx: idx, gen: s.e.resets.Load(), s: s, t: t})
	}
	return true
}

func (s *shard) emit(ev Event) {
	if f := s.e.cfg.OnEvent; f != nil {
		f(ev)
	}
}
