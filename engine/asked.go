package engine

import (
	"errors"
	"fmt"
	"time"
)

// ErrKeyReused: an acquire came with a waiter ID (an Idempotency-Key, or
// id= natively) the engine remembers, but asked for another mode, limit,
// lease or owner than the acquire that ID first came with: it is not a
// repeat of that request (a repeat may shorten its wait, nothing else).
// What the client sent is compared, not the lease_default a node filled
// in (see ticket.differs). Nothing changed; a *KeyReusedError names the
// field.
var ErrKeyReused = errors.New("engine: waiter ID reused for another request")

// KeyReusedError is ErrKeyReused with the field that differs.
type KeyReusedError struct {
	// Field is the parameter as the API spells it: "mode", "limit",
	// "lease" or "owner" (the first of them that differs), or
	// "Idempotency-Key" for an ID that a forced release and an acquire
	// of the same key share (ForceReleaseID).
	Field string
	// Reason, when set, is what is wrong, instead of the differing
	// parameter's sentence.
	Reason string
}

// Error names the field that differs and says that another request needs
// a new key.
func (e *KeyReusedError) Error() string {
	if e.Reason != "" {
		return e.Field + ": " + e.Reason
	}
	return fmt.Sprintf("%s: differs from the first acquire with this waiter ID (its Idempotency-Key, ticket or native id=); a repeat must ask for the same mode, limit, lease and owner (only wait may differ): use a new key for another request", e.Field)
}

// Is makes errors.Is(err, ErrKeyReused) hold.
func (e *KeyReusedError) Is(target error) bool { return target == ErrKeyReused }

// asked sets what t's acquire asked for from r, the record that queued or
// granted it (RecEnqueue, RecGrant, or a snapshot's RecOutcome). A record
// that carries Asked (a snapshot's, whose Lease may be a renewal's and
// whose outcome has no Owner) gives the fingerprints as they were taken,
// but for a lease named by none when it says LeaseDefaulted (see
// askedRecord); a RecOutcome without it (an older snapshot's) leaves
// nothing to compare. s.mu is held.
func (t *ticket) asked(r *Record) {
	switch {
	case r.Asked != 0:
		t.leaseSum, t.ownerSum = uint32(r.Asked), uint32(r.Asked>>32)
		if r.LeaseDefaulted {
			t.leaseSum = leaseSum(0)
		}
	case r.Kind == RecOutcome:
		t.limit = 0
		return
	default:
		t.leaseSum, t.ownerSum = leaseSum(r.askedLease()), ownerSum(r.Owner)
	}
	t.mode, t.limit = r.Mode, uint16(max(r.Limit, 1))
}

// askedSum is the Record.Asked of t: its fingerprints, never 0 (leaseSum
// is odd); 0 while t knows nothing.
func (t *ticket) askedSum() uint64 {
	if t.limit == 0 {
		return 0
	}
	return uint64(t.ownerSum)<<32 | uint64(t.leaseSum)
}

// askedRecord is the Record.Asked and Record.LeaseDefaulted a snapshot
// writes for t; def is this node's lease_default. An acquire that named
// no lease is written with def's fingerprint and LeaseDefaulted, which a
// reader takes for none (asked). A node of a version before
// LeaseDefaulted skips that tag and compares a repeat on the lease it
// fills in, as it always did: written as none (leaseSum(0)), the
// fingerprint matched no lease there, and every repeat of such an
// acquire (a client's retry after a failover or a handoff to it, the
// settling repeat of a cancelled acquire) was refused 422
// idempotency_key_reused, field lease, by an old node that had installed
// a newer node's snapshot during a rolling upgrade.
func (t *ticket) askedRecord(def time.Duration) (asked uint64, defaulted bool) {
	sum := t.askedSum()
	if sum == 0 || t.leaseSum != leaseSum(0) {
		return sum, false
	}
	return uint64(t.ownerSum)<<32 | uint64(leaseSum(def)), true
}

// askedLease is the lease r's acquire named: 0 when it named none (Lease
// is then a node's lease_default).
func (r *Record) askedLease() time.Duration {
	if r.LeaseDefaulted {
		return 0
	}
	return r.Lease
}

// differs returns a *KeyReusedError when req asks for another mode,
// limit, lease or owner than t's acquire did; nil for a repeat. Wait is
// not compared: clients shorten it on a retry. A limit of 0 names none
// (the key's), and matches. The lease compared is the one the client
// sent (req.Lease, 0 = none), not the lease_default a node filled in:
// after a failover to a node whose lease_default differs, a repeat that
// names no lease, of an acquire that named none, is still a repeat. Where
// one of the two named a lease and the other did not, they are the same
// when they come to the same lease here (def is this node's
// lease_default), as they always did on one node (and as a ticket made
// from a record written before Record.LeaseDefaulted, which holds the
// lease filled in, is compared). s.mu is held.
func (t *ticket) differs(req *AcquireRequest, def time.Duration) error {
	if t.state == tForced || t.state == tForceNotHeld {
		return errForceIDReused
	}
	if t.limit == 0 {
		return nil
	}
	field := ""
	switch {
	case req.Mode != t.mode:
		field = "mode"
	case req.Limit != 0 && req.Limit != int(t.limit):
		field = "limit"
	case !t.sameLease(req.Lease, def):
		field = "lease"
	case ownerSum(req.Owner) != t.ownerSum:
		field = "owner"
	default:
		return nil
	}
	return &KeyReusedError{Field: field}
}

// sameLease says whether a repeat asking for lease (0 = none; def is this
// node's lease_default) asks for t's acquire's lease (see differs).
func (t *ticket) sameLease(lease, def time.Duration) bool {
	none := leaseSum(0)
	switch {
	case leaseSum(lease) == t.leaseSum:
		return true // what the client sent, both times
	case t.leaseSum == none:
		return leaseSum(lease) == leaseSum(def) // the first named none: def here
	case lease == 0:
		return leaseSum(def) == t.leaseSum // the repeat names none: def here
	}
	return false
}

// leaseSum is a lease's fingerprint: its 64 bits folded into 32 (exact
// below 2^32 ns), made odd so that it is never 0 (a lease differing from
// another by 1 ns only counts as the same).
func leaseSum(d time.Duration) uint32 {
	x := uint64(d)
	return (uint32(x) ^ uint32(x>>32)) | 1
}

// ownerSum is an owner label's fingerprint (FNV-1a, 32 bits): the same in
// every process, as a snapshot carries it to another node.
func ownerSum(owner string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(owner); i++ {
		h ^= uint32(owner[i])
		h *= 16777619
	}
	return h
}
