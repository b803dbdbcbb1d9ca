package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// This file owns the record format: the one encoding of a state change that
// the log on disk, replay at start and (later) replication share. It is
// independent of Go field names: a version byte, a kind byte, then tagged
// fields, each a uvarint field key (tag<<3 | wire type) and a value. The
// tags are the named constants below and never change meaning; a decoder
// skips the tags it does not know, so a field can be added without a new
// version. Zero-valued fields are left out. A golden-bytes test
// (TestRecordGolden) guards the format, a fuzz target (FuzzDecodeRecord)
// the decoder.

// RecordVersion is the version byte every record starts with.
const RecordVersion = 1

// RecordKind names the state change a Record carries.
type RecordKind uint8

// The record kinds. The numbers are part of the format: never reuse one.
const (
	// RecGrant: Key granted under Token with Lease, at At, expiring at
	// Expires; WaiterID is the waiter ID it was granted to ("" for an
	// acquire without one that was granted at once), which leaves the
	// queue if it is in it. Until, when set, is the claim deadline of a
	// grant to a detached waiter: released then unless a repeat claims it.
	RecGrant RecordKind = 1
	// RecRelease: the grant Token on Key was released at At (by its
	// holder, or by an operator). With WaiterID (the holder's), its answer
	// could not be delivered: the waiter ID is forgotten, not remembered
	// as ended, so that a retry queues afresh.
	RecRelease RecordKind = 2
	// RecExpire: the grant Token on Key was taken back at At (its lease
	// ran out, or its claim deadline passed).
	RecExpire RecordKind = 3
	// RecRenew: the grant Token on Key was renewed at At with Lease; it
	// now expires at Expires.
	RecRenew RecordKind = 4
	// RecEnqueue: WaiterID joined Key's queue at At, for a grant with
	// Lease, waiting until WaitUntil (0 = no limit).
	RecEnqueue RecordKind = 5
	// RecLeave: WaiterID left Key's queue at At before a grant.
	RecLeave RecordKind = 6
	// RecTimeout: WaiterID's wait on Key ran out at At; the outcome is
	// remembered until Until.
	RecTimeout RecordKind = 7
	// RecDetach: WaiterID's request on Key went away at At while its
	// place is kept until Until (its grace), for a repeat to resume it;
	// Until 0: a repeat resumed it at At (its request is parked again),
	// and, with WaitUntil, ended its wait sooner: at WaitUntil.
	RecDetach RecordKind = 8
	// RecClaim: the claim deadline of the grant Token on Key, made to
	// WaiterID's detached request, is now Until; 0: a repeat claimed the
	// grant at At, and its lease alone decides again.
	RecClaim RecordKind = 9
	// RecOutcome: WaiterID's outcome on Key (Outcome) is remembered until
	// Until, for repeats with the same Idempotency-Key; with what its
	// acquire asked for (Mode, Limit, Asked), to tell a repeat from
	// another request (none without Asked).
	RecOutcome RecordKind = 10
	// RecReserve: no fencing token above Token has been issued; a
	// restart continues above it.
	RecReserve RecordKind = 11
	// RecForce: an operator released every holder of Key at At (a forced
	// release); their waiter IDs are remembered as ended. WaiterID, when
	// set, is the force's own ID, remembered as forced (OutcomeForced).
	// A force under an ID that finds nobody holding Key is a RecOutcome
	// (OutcomeForceNotHeld) instead: its ID is remembered, nothing else.
	RecForce RecordKind = 12
	// RecEpoch: a node became the active at this record, with Epoch
	// (cluster promotions count epochs). A log position is the epoch of
	// the last RecEpoch and the last index; two logs that agree on it
	// hold the same records (see package cluster). No key.
	RecEpoch RecordKind = 13
)

var recordKindNames = [...]string{
	RecGrant:   "grant",
	RecRelease: "release",
	RecExpire:  "expire",
	RecRenew:   "renew",
	RecEnqueue: "enqueue",
	RecLeave:   "leave",
	RecTimeout: "timeout",
	RecDetach:  "detach",
	RecClaim:   "claim",
	RecOutcome: "outcome",
	RecReserve: "reserve",
	RecForce:   "force",
	RecEpoch:   "epoch",
}

// String returns the kind's name ("grant", "release", ...), or "kind(N)"
// for a kind this version does not know.
func (k RecordKind) String() string {
	if int(k) < len(recordKindNames) && recordKindNames[k] != "" {
		return recordKindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Outcome is a remembered waiter ID's outcome (RecOutcome).
type Outcome uint8

// The outcomes; the numbers are part of the format.
const (
	OutcomeTimeout Outcome = 1 // the wait ran out (a repeat gets ErrTimeout)
	OutcomeEnded   Outcome = 2 // the grant ended (a repeat gets ErrGrantEnded)
	OutcomeForced  Outcome = 3 // a forced release under this ID was made (a repeat changes nothing)
	// A forced release under this ID found nobody holding Key (a repeat
	// gets ErrNotHeld and changes nothing).
	OutcomeForceNotHeld Outcome = 4
)

// Record is one state change, as the log and replay carry it. It holds
// only what a replica needs to reproduce the change exactly; times are on
// the wall clock (Unix ns), since they cross a process (see Clock). Which
// fields a kind uses is said at each RecordKind.
type Record struct {
	Kind     RecordKind    // the change this record carries
	Key      string        // the key changed
	Token    uint64        // the fencing token of the grant concerned
	Lease    time.Duration // the grant's or the waiter's lease
	At       int64         // when the change was made, Unix ns
	Expires  int64         // lease deadline, Unix ns
	WaiterID string        // the waiter's ID (an Idempotency-Key or a server ticket); "" = none
	// WaitUntil is a queued waiter's wait deadline, Unix ns; 0 = no limit.
	WaitUntil int64
	// Until is the end of a kept place, a claim or a remembered outcome,
	// Unix ns.
	Until   int64
	Outcome Outcome // a remembered waiter ID's outcome (RecOutcome)
	// Owner is the holder's or the waiter's label (RecGrant, RecEnqueue);
	// "" = none.
	Owner string
	// Mode is the grant's or the waiter's mode (RecGrant, RecEnqueue).
	Mode Mode
	// Limit is the key's holder limit (RecGrant, RecEnqueue); 0 and 1
	// both mean one holder, as records written before limits existed say.
	Limit int
	// Epoch is the epoch a RecEpoch begins.
	Epoch uint64
	// Asked is the fingerprint of the lease and owner a waiter ID's
	// acquire asked for (a snapshot's RecGrant and RecOutcome of a
	// ticket; 0 = none: taken from Lease and Owner).
	Asked uint64
	// LeaseDefaulted: the acquire named no lease, and Lease is the
	// lease_default of the node that made the record (RecGrant,
	// RecEnqueue). A repeat under its waiter ID is compared on what the
	// client sent (no lease), not on that default, which another node may
	// set differently. Records written before it existed lack it: their
	// Lease counts as asked. With Asked (a snapshot's RecGrant or
	// RecOutcome), the lease fingerprint in Asked is then the writing
	// node's lease_default's, for readers that predate this field, and
	// is read as none (ticket.askedRecord).
	LeaseDefaulted bool
}

// Mode is how a holder holds its key. The numbers are part of the format.
type Mode uint8

// The modes (SPEC section 1, "Shared modes").
const (
	// Exclusive: the holder holds the key alone (the default).
	Exclusive Mode = 0
	// Shared: the holder holds the key together with other shared
	// holders, never with an exclusive one (see lock.canGrant).
	Shared Mode = 1
)

// String returns "shared" for Shared and "exclusive" otherwise, as the API
// spells the modes.
func (m Mode) String() string {
	if m == Shared {
		return "shared"
	}
	return "exclusive"
}

// The field tags. They are part of the format: never reuse or renumber
// one; a new field takes a new tag.
const (
	tagKey       = 1  // bytes
	tagToken     = 2  // uvarint
	tagLease     = 3  // uvarint, nanoseconds
	tagAt        = 4  // zigzag varint, Unix ns
	tagExpires   = 5  // zigzag varint, Unix ns
	tagWaiterID  = 6  // bytes
	tagWaitUntil = 7  // zigzag varint, Unix ns
	tagUntil     = 8  // zigzag varint, Unix ns
	tagOutcome   = 9  // uvarint
	tagOwner     = 10 // bytes
	tagMode      = 11 // uvarint (Mode)
	tagLimit     = 12 // uvarint
	tagEpoch     = 13 // uvarint
	tagAsked     = 14 // uvarint
	tagDefaulted = 15 // uvarint, 1 = LeaseDefaulted
	maxTag       = 63 // tags above are refused when encoding (none exist)
)

// The wire types of a field key's low 3 bits.
const (
	wireVarint = 0 // a uvarint (signed values zigzag-encoded)
	wireBytes  = 2 // a uvarint length, then that many bytes
)

// Errors of DecodeRecord; each comes wrapped with the offset it was found at.
var (
	// ErrRecordVersion: the record was written by a newer (or unknown)
	// version of the format.
	ErrRecordVersion = errors.New("engine: unknown record version")
	// ErrRecordCorrupt: the record's bytes do not decode.
	ErrRecordCorrupt = errors.New("engine: corrupt record")
)

// AppendRecord appends the encoding of r to b and returns the extended
// slice. It allocates only when b lacks the room.
func AppendRecord(b []byte, r *Record) []byte {
	b = append(b, RecordVersion, byte(r.Kind))
	b = appendBytesField(b, tagKey, r.Key)
	b = appendUvarintField(b, tagToken, r.Token)
	b = appendUvarintField(b, tagLease, uint64(r.Lease))
	b = appendVarintField(b, tagAt, r.At)
	b = appendVarintField(b, tagExpires, r.Expires)
	b = appendBytesField(b, tagWaiterID, r.WaiterID)
	b = appendVarintField(b, tagWaitUntil, r.WaitUntil)
	b = appendVarintField(b, tagUntil, r.Until)
	b = appendUvarintField(b, tagOutcome, uint64(r.Outcome))
	b = appendBytesField(b, tagOwner, r.Owner)
	b = appendUvarintField(b, tagMode, uint64(r.Mode))
	b = appendUvarintField(b, tagLimit, uint64(r.Limit))
	b = appendUvarintField(b, tagEpoch, r.Epoch)
	b = appendUvarintField(b, tagAsked, r.Asked)
	if r.LeaseDefaulted {
		b = appendUvarintField(b, tagDefaulted, 1)
	}
	return b
}

func appendUvarintField(b []byte, tag int, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = binary.AppendUvarint(b, uint64(tag)<<3|wireVarint)
	return binary.AppendUvarint(b, v)
}

func appendVarintField(b []byte, tag int, v int64) []byte {
	if v == 0 {
		return b
	}
	b = binary.AppendUvarint(b, uint64(tag)<<3|wireVarint)
	return binary.AppendVarint(b, v)
}

func appendBytesField(b []byte, tag int, s string) []byte {
	if s == "" {
		return b
	}
	b = binary.AppendUvarint(b, uint64(tag)<<3|wireBytes)
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// DecodeRecord decodes one record that fills b. It returns an error
// wrapping ErrRecordVersion for a version it does not know and
// ErrRecordCorrupt for anything else that does not decode (a truncated
// field, an unknown kind, a lease beyond int64, a repeated field); fields
// with unknown tags are skipped. The strings it returns do not share b's
// memory.
func DecodeRecord(b []byte) (Record, error) {
	var r Record
	if len(b) < 2 {
		return r, fmt.Errorf("%w: %d bytes, shorter than a header", ErrRecordCorrupt, len(b))
	}
	if b[0] != RecordVersion {
		return r, fmt.Errorf("%w %d", ErrRecordVersion, b[0])
	}
	r.Kind = RecordKind(b[1])
	if r.Kind == 0 || int(r.Kind) >= len(recordKindNames) {
		return r, fmt.Errorf("%w: unknown kind %d at offset 1", ErrRecordCorrupt, b[1])
	}
	var seen uint64 // bit per known tag
	for off := 2; off < len(b); {
		at := off
		key, n := binary.Uvarint(b[off:])
		if n <= 0 {
			return r, fmt.Errorf("%w: bad field key at offset %d", ErrRecordCorrupt, at)
		}
		off += n
		tag, wire := key>>3, key&7
		var v uint64
		var s []byte
		switch wire {
		case wireVarint:
			v, n = binary.Uvarint(b[off:])
			if n <= 0 {
				return r, fmt.Errorf("%w: bad value of tag %d at offset %d", ErrRecordCorrupt, tag, off)
			}
			off += n
		case wireBytes:
			l, n := binary.Uvarint(b[off:])
			if n <= 0 || l > uint64(len(b)-off-n) {
				return r, fmt.Errorf("%w: bad length of tag %d at offset %d", ErrRecordCorrupt, tag, off)
			}
			off += n
			s = b[off : off+int(l)]
			off += int(l)
		default:
			return r, fmt.Errorf("%w: unknown wire type %d of tag %d at offset %d", ErrRecordCorrupt, wire, tag, at)
		}
		if tag == 0 || tag > maxTag || !knownTag(tag) {
			continue // a field of a later writer: skipped
		}
		if seen&(1<<tag) != 0 {
			return r, fmt.Errorf("%w: tag %d repeated at offset %d", ErrRecordCorrupt, tag, at)
		}
		seen |= 1 << tag
		if want := tagWire(tag); wire != want {
			return r, fmt.Errorf("%w: tag %d has wire type %d, want %d, at offset %d", ErrRecordCorrupt, tag, wire, want, at)
		}
		switch tag {
		case tagKey:
			r.Key = string(s)
		case tagToken:
			r.Token = v
		case tagLease:
			if v > math.MaxInt64 {
				return r, fmt.Errorf("%w: lease %d beyond int64 at offset %d", ErrRecordCorrupt, v, at)
			}
			r.Lease = time.Duration(v)
		case tagAt:
			r.At = unzigzag(v)
		case tagExpires:
			r.Expires = unzigzag(v)
		case tagWaiterID:
			r.WaiterID = string(s)
		case tagWaitUntil:
			r.WaitUntil = unzigzag(v)
		case tagUntil:
			r.Until = unzigzag(v)
		case tagOutcome:
			if v > math.MaxUint8 {
				return r, fmt.Errorf("%w: outcome %d at offset %d", ErrRecordCorrupt, v, at)
			}
			r.Outcome = Outcome(v)
		case tagOwner:
			r.Owner = string(s)
		case tagMode:
			if v > uint64(Shared) {
				return r, fmt.Errorf("%w: mode %d at offset %d", ErrRecordCorrupt, v, at)
			}
			r.Mode = Mode(v)
		case tagLimit:
			if v > MaxLimit {
				return r, fmt.Errorf("%w: limit %d above %d at offset %d", ErrRecordCorrupt, v, MaxLimit, at)
			}
			r.Limit = int(v)
		case tagEpoch:
			r.Epoch = v
		case tagAsked:
			r.Asked = v
		case tagDefaulted:
			if v > 1 {
				return r, fmt.Errorf("%w: lease_defaulted %d at offset %d", ErrRecordCorrupt, v, at)
			}
			r.LeaseDefaulted = v == 1
		}
	}
	return r, nil
}

func knownTag(tag uint64) bool { return tag >= tagKey && tag <= tagDefaulted }

func tagWire(tag uint64) uint64 {
	if tag == tagKey || tag == tagWaiterID || tag == tagOwner {
		return wireBytes
	}
	return wireVarint
}

// unzigzag decodes a signed value binary.AppendVarint wrote.
func unzigzag(u uint64) int64 {
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}
