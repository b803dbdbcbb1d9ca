package handlers

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/jsonw"
)

// encodingJSON is what the answers were before the appenders: encoding/json's
// Encoder output of v (with its newline) without HTML escaping, as jsonw
// writes it, or its error.
func encodingJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	err := jsonw.NewEncoder(&buf).Encode(v)
	return buf.Bytes(), err
}

// checkGrant compares appendGrant's bytes and error for g with
// encoding/json's.
func checkGrant(t *testing.T, g api.Grant) {
	t.Helper()
	want, werr := encodingJSON(g)
	got, gerr := appendGrant([]byte("prefix"), &g)
	if (gerr != nil) != (werr != nil) {
		t.Fatalf("%#v: error %v, encoding/json's %v", g, gerr, werr)
	}
	if werr == nil && string(got) != "prefix"+string(want) {
		t.Fatalf("%#v:\n got %q\nwant %q", g, got[len("prefix"):], want)
	}
}

func checkReleased(t *testing.T, r api.Released) {
	t.Helper()
	want, err := encodingJSON(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := appendReleased(nil, &r); string(got) != string(want) {
		t.Fatalf("%#v:\n got %q\nwant %q", r, got, want)
	}
}

// wireStrings are keys, owners and node URLs, many of which encoding/json
// escapes.
var wireStrings = []string{
	"", "a", "orders/42", "a b", `a"b`, `a\b`, "<script>", "a&b", "x>y", "ünïcödé", "日本語",
	"\u2028\u2029", "emoji 🎉", "\x01", "tab\there", "\x7f", "\xff\xfe", "a\u0080b", "'single'",
	"http://node:7070", "https://[::1]:7070/base", strings.Repeat("k", 256), strings.Repeat("é<", 64),
}

var wireFloats = []float64{
	0, math.Copysign(0, -1), 1, 10, 1.5, 0.1, 15, 0.000001, 0.0000009999, 1e-9, 1e-7, 5e-324,
	123456.789, 1e20, 999999999999999999999, 1e21, 1e22, 1.7976931348623157e308, -1, -1e-7,
	2.5e-5, 86400 * 365, math.NaN(), math.Inf(1), math.Inf(-1),
}

var wireTimes = func() []time.Time {
	plus := time.FixedZone("plus", 5*3600+30*60)
	odd := time.FixedZone("odd", 3600+17) // an offset with seconds: not RFC 3339
	return []time.Time{
		{}, time.Unix(0, 0).UTC(), time.Unix(0, 1).UTC(), time.Unix(1700000000, 120000000).UTC(),
		time.Date(2026, 12, 1, 19, 0, 0, 999999999, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(42, 3, 4, 5, 6, 7, 8, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 6, plus),
		time.Date(2026, 1, 2, 3, 4, 5, 6, odd), time.Now(), time.Now().UTC(),
	}
}()

// TestWireMatchesEncodingJSON: the hot answers' appenders write exactly
// what encoding/json writes for api.Grant and api.Released (and fail where
// it fails), over every combination of odd strings, floats and times.
func TestWireMatchesEncodingJSON(t *testing.T) {
	for _, s := range wireStrings {
		checkReleased(t, api.Released{Key: s, Released: true})
		checkReleased(t, api.Released{Key: s})
		for _, node := range wireStrings {
			checkGrant(t, api.Grant{Key: s, Token: 1, Lease: 15, ExpiresAt: time.Unix(1e9, 5).UTC(), Node: node})
		}
	}
	for _, f := range wireFloats {
		for _, tm := range wireTimes {
			for _, tok := range []uint64{0, 1, api.MaxToken - 1, math.MaxUint64} {
				checkGrant(t, api.Grant{Key: "k", Token: tok, Lease: f, ExpiresAt: tm, Node: "http://n"})
			}
		}
	}
	// And random values, printable or not.
	rng := rand.New(rand.NewPCG(1, 2))
	randString := func() string {
		b := make([]byte, rng.IntN(20))
		for i := range b {
			if rng.IntN(4) == 0 {
				b[i] = byte(rng.IntN(256))
			} else {
				b[i] = byte(0x20 + rng.IntN(0x5f))
			}
		}
		return string(b)
	}
	for range 20000 {
		checkGrant(t, api.Grant{
			Key: randString(), Token: rng.Uint64() >> rng.IntN(64),
			Lease:     math.Float64frombits(rng.Uint64()),
			ExpiresAt: time.Unix(rng.Int64N(1<<36)-1<<35, rng.Int64N(1e9)).UTC(), Node: randString(),
		})
		checkGrant(t, api.Grant{Key: "k", Lease: float64(rng.IntN(1e6)) / 1000, ExpiresAt: time.Now().UTC(), Node: "n"})
	}
}

// FuzzWire compares appendGrant with encoding/json on fuzzed values.
func FuzzWire(f *testing.F) {
	f.Add("orders/42", uint64(7), 15.0, int64(1700000000123456789), "http://node:7070")
	f.Add("<&>\u2028\"\\", uint64(1), 1e-7, int64(math.MinInt64), "\xff")
	f.Fuzz(func(t *testing.T, key string, token uint64, lease float64, ns int64, node string) {
		checkGrant(t, api.Grant{Key: key, Token: token, Lease: lease, ExpiresAt: time.Unix(0, ns).UTC(), Node: node})
		checkReleased(t, api.Released{Key: key, Released: true})
	})
}
