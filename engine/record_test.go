package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"testing"
	"time"
)

// goldenRecords is one record of every kind, with the fields that kind
// uses (times near 2026-12-01 in Unix ns).
func goldenRecords() []Record {
	const at = 1_796_130_000_000_000_000
	return []Record{
		{Kind: RecGrant, Key: "orders/42", Token: 1_796_130_000_000_001, Lease: 30 * time.Second, At: at, Expires: at + int64(30*time.Second), WaiterID: "job-7"},
		{Kind: RecRelease, Key: "orders/42", Token: 1_796_130_000_000_001, At: at + 1},
		{Kind: RecExpire, Key: "k", Token: 5, At: at},
		{Kind: RecRenew, Key: "k", Token: 5, Lease: time.Minute, At: at, Expires: at + int64(time.Minute)},
		{Kind: RecEnqueue, Key: "k", WaiterID: "\x1fab", Lease: 1500 * time.Millisecond, At: at, WaitUntil: at + int64(time.Second)},
		{Kind: RecLeave, Key: "k", WaiterID: "w", At: at},
		{Kind: RecTimeout, Key: "k", WaiterID: "w", At: at, Until: at + int64(2*time.Minute)},
		{Kind: RecDetach, Key: "k", WaiterID: "w", At: at, Until: at + int64(5*time.Second)},
		{Kind: RecClaim, Key: "k", Token: 6, WaiterID: "w", Until: at + int64(5*time.Second)},
		{Kind: RecOutcome, Key: "k", WaiterID: "w", Outcome: OutcomeEnded, Until: at},
		{Kind: RecReserve, Token: 1<<53 - 1},
		{Kind: RecExpire, Key: "before 1970", Token: 1, At: -1},
		// Issue 14's fields (owner, mode, limit) and the forced release,
		// added as new records: the ones above still decode as they did.
		{Kind: RecGrant, Key: "api", Token: 7, Lease: 10 * time.Second, At: at, Expires: at + int64(10*time.Second), WaiterID: "r1", Owner: "web-3:4411", Mode: Shared, Limit: 3},
		{Kind: RecEnqueue, Key: "api", WaiterID: "r2", Lease: time.Second, At: at, Owner: "ops", Mode: Shared, Limit: 3},
		{Kind: RecForce, Key: "api", At: at},
		// What a remembered waiter ID asked for (a snapshot's outcome):
		// mode, limit, and the fingerprints of lease and owner (tag 14).
		{Kind: RecOutcome, Key: "k", WaiterID: "w", Outcome: OutcomeTimeout, Until: at, Mode: Shared, Limit: 2, Asked: 0x811c9dc5_12a05f21},
		// An acquire that named no lease: Lease is the node's
		// lease_default (tag 15, 1).
		{Kind: RecEnqueue, Key: "d", WaiterID: "w", Lease: 30 * time.Second, At: at, LeaseDefaulted: true},
	}
}

// The bytes of the format, as written by this version. A change here is a
// change of the format on disk: old logs must still decode (add a tag, or
// a new RecordVersion with a decoder for the old one).
var goldenHex = []string{
	"01010a096f72646572732f34321081a8fbd4a1b298031880d88ee16f208080e1c6ffad91ed312880b0fe88dfaf91ed3132056a6f622d37",
	"01020a096f72646572732f34321081a8fbd4a1b29803208280e1c6ffad91ed31",
	"01030a016b1005208080e1c6ffad91ed31",
	"01040a016b10051880b09dc2df01208080e1c6ffad91ed312880e09bcbbeb191ed31",
	"01050a016b1880dea0cb05208080e1c6ffad91ed3132031f61623880a8b78087ae91ed31",
	"01060a016b208080e1c6ffad91ed31320177",
	"01070a016b208080e1c6ffad91ed313201774080c0d6cffdb491ed31",
	"01080a016b208080e1c6ffad91ed313201774080c890e7a4ae91ed31",
	"01090a016b10063201774080c890e7a4ae91ed31",
	"010a0a016b320177408080e1c6ffad91ed314802",
	"010b10ffffffffffffff0f",
	// version 1, expire, key "before 1970", token 1, At -1 (zigzag 1)
	"01030a0b6265666f7265203139373010012001",
	// grant ... owner (tag 10, bytes) "web-3:4411", mode (tag 11) 1 =
	// shared, limit (tag 12) 3
	"01010a0361706910071880c8afa025208080e1c6ffad91ed31288090c087caae91ed3132027231520a7765622d333a3434313158016003",
	"01050a03617069188094ebdc03208080e1c6ffad91ed313202723252036f707358016003",
	"010c0a03617069208080e1c6ffad91ed31",
	// outcome ... timeout (tag 9) 1, mode 1, limit 2, asked (tag 14)
	"010a0a016b320177408080e1c6ffad91ed3148015801600270a1be8195d1b8a78e8101",
	// enqueue ... lease_defaulted (tag 15) 1
	"01050a01641880d88ee16f208080e1c6ffad91ed313201777801",
}

func TestRecordGolden(t *testing.T) {
	recs := goldenRecords()
	if len(recs) != len(goldenHex) {
		t.Fatalf("%d records, %d golden encodings", len(recs), len(goldenHex))
	}
	for i, r := range recs {
		got := hex.EncodeToString(AppendRecord(nil, &r))
		if got != goldenHex[i] {
			t.Errorf("%s: encoded %s\n\twant %s", r.Kind, got, goldenHex[i])
		}
		b, _ := hex.DecodeString(goldenHex[i])
		d, err := DecodeRecord(b)
		if err != nil {
			t.Errorf("%s: decoding the golden bytes: %v", r.Kind, err)
		} else if d != r {
			t.Errorf("%s: decoded %+v\n\twant %+v", r.Kind, d, r)
		}
	}
}

// A field of a later writer (an unknown tag, of either wire type) is
// skipped; everything else in the record still decodes.
func TestRecordSkipsUnknownTags(t *testing.T) {
	r := Record{Kind: RecRenew, Key: "k", Token: 9, Lease: time.Second, At: 100, Expires: 200}
	b := []byte{RecordVersion, byte(RecRenew)}
	b = binary.AppendUvarint(b, 40<<3|wireVarint)
	b = binary.AppendUvarint(b, 12345)
	b = appendBytesField(b, tagKey, "k")
	b = binary.AppendUvarint(b, 41<<3|wireBytes)
	b = binary.AppendUvarint(b, 3)
	b = append(b, "new"...)
	b = appendUvarintField(b, tagToken, 9)
	b = appendUvarintField(b, tagLease, uint64(time.Second))
	b = appendVarintField(b, tagAt, 100)
	b = appendVarintField(b, tagExpires, 200)
	b = binary.AppendUvarint(b, 1000<<3|wireVarint) // beyond maxTag
	b = binary.AppendUvarint(b, 1)
	got, err := DecodeRecord(b)
	if err != nil || got != r {
		t.Fatalf("DecodeRecord = %+v, %v; want %+v", got, err, r)
	}
}

func TestRecordDecodeErrors(t *testing.T) {
	good := AppendRecord(nil, &Record{Kind: RecGrant, Key: "k", Token: 1, Lease: time.Second, At: 1, Expires: 2})
	for _, c := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrRecordCorrupt},
		{"version only", []byte{RecordVersion}, ErrRecordCorrupt},
		{"version 2", []byte{2, byte(RecGrant)}, ErrRecordVersion},
		{"version 0", []byte{0, byte(RecGrant)}, ErrRecordVersion},
		{"kind 0", []byte{RecordVersion, 0}, ErrRecordCorrupt},
		{"unknown kind", []byte{RecordVersion, 200}, ErrRecordCorrupt},
		{"truncated", good[:len(good)-1], ErrRecordCorrupt},
		{"truncated key", good[:4], ErrRecordCorrupt},
		{"bad field key", append(bytes.Clone(good), 0x80), ErrRecordCorrupt},
		{"wire type 1", append(bytes.Clone(good), 10<<3|1), ErrRecordCorrupt},
		{"repeated tag", appendUvarintField(bytes.Clone(good), tagToken, 2), ErrRecordCorrupt},
		{"token as bytes", appendBytesField([]byte{RecordVersion, byte(RecGrant)}, tagToken, "x"), ErrRecordCorrupt},
		{"key as varint", appendUvarintField([]byte{RecordVersion, byte(RecGrant)}, tagKey, 1), ErrRecordCorrupt},
		{"lease beyond int64", appendUvarintField([]byte{RecordVersion, byte(RecGrant)}, tagLease, 1<<63), ErrRecordCorrupt},
		{"outcome beyond a byte", appendUvarintField([]byte{RecordVersion, byte(RecOutcome)}, tagOutcome, 256), ErrRecordCorrupt},
		{"mode 2", appendUvarintField([]byte{RecordVersion, byte(RecGrant)}, tagMode, 2), ErrRecordCorrupt},
		{"limit above MaxLimit", appendUvarintField([]byte{RecordVersion, byte(RecGrant)}, tagLimit, MaxLimit+1), ErrRecordCorrupt},
		{"owner as varint", appendUvarintField([]byte{RecordVersion, byte(RecGrant)}, tagOwner, 1), ErrRecordCorrupt},
		{"length beyond the record", append([]byte{RecordVersion, byte(RecGrant), tagKey<<3 | wireBytes, 5}, "abc"...), ErrRecordCorrupt},
	} {
		if _, err := DecodeRecord(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s (% x): error %v, want %v", c.name, c.b, err, c.want)
		}
	}
}

// The decoder never panics, and whatever it accepts encodes to bytes that
// decode to the same record (the canonical form: known fields only, zero
// fields left out).
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range goldenRecords() {
		f.Add(AppendRecord(nil, &r))
	}
	f.Add(append(binary.AppendUvarint([]byte{RecordVersion, byte(RecGrant)}, 41<<3|wireBytes), 1, 'x'))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			if !errors.Is(err, ErrRecordCorrupt) && !errors.Is(err, ErrRecordVersion) {
				t.Fatalf("error %v wraps neither sentinel", err)
			}
			return
		}
		enc := AppendRecord(nil, &r)
		r2, err := DecodeRecord(enc)
		if err != nil || r2 != r {
			t.Fatalf("re-encoded % x decodes to %+v, %v; want %+v", enc, r2, err, r)
		}
		if enc2 := AppendRecord(nil, &r2); !bytes.Equal(enc, enc2) {
			t.Fatalf("canonical encoding not stable: % x then % x", enc, enc2)
		}
	})
}
