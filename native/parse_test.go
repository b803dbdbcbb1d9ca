package native

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// A wait or lease written with so many zeros after the point that it
// underflows a float64 is still a positive number of seconds, never 0,
// which for a wait means no limit (such a wait once parsed as 0 and
// waited for ever): below the node's resolution, it is refused naming its
// field (TestSecondsBelowTheResolutionRefused).
func TestDurationThatUnderflowsIsNotZero(t *testing.T) {
	tiny := "0." + strings.Repeat("0", 400) + "1"
	r, err := parse([]byte("A k 30 " + tiny))
	if err == nil || !strings.HasPrefix(err.Error(), "wait: ") || !strings.Contains(err.Error(), "resolution") {
		t.Fatalf("A k 30 %.12s…: wait %v, %v; want wait refused below the resolution", tiny, r.wait, err)
	}
	r, err = parse([]byte("A k " + tiny + " -"))
	if err == nil || !strings.HasPrefix(err.Error(), "lease: ") || !strings.Contains(err.Error(), "resolution") {
		t.Fatalf("A k %.12s… -: lease %v, %v; want lease refused below the resolution", tiny, r.lease, err)
	}
	zero := "0." + strings.Repeat("0", 400)
	if r, err = parse([]byte("A k 30 " + zero)); err != nil || r.wait != 0 {
		t.Fatalf("A k 30 0.000…0: wait %v, %v; want 0 (no limit)", r.wait, err)
	}
	if _, err = parse([]byte("A k " + zero + " -")); err == nil {
		t.Fatalf("A k 0.000…0 -: a lease of 0 accepted")
	}
}

// SPEC section 2b: "Same engine, same semantics, same errors as §1–2; only
// the framing differs", and "<wait> and <lease> in seconds, decimals
// allowed" as in section 2. HTTP takes a number of seconds with an
// exponent ("1e3", in the query as in a JSON body); the line protocol
// refused it with invalid_argument, so the same acquire was granted over
// one protocol and refused over the other.
func TestSecondsAsOverHTTP(t *testing.T) {
	for _, c := range []struct {
		field string
		want  time.Duration
	}{
		{"1e3", 1000 * time.Second},
		{"1E1", 10 * time.Second},
		{"5e-1", 500 * time.Millisecond},
		{"2.5e+2", 250 * time.Second},
		{".5e1", 5 * time.Second},
		{"0.000000001", 1}, // the resolution
	} {
		r, err := parse([]byte("A k " + c.field + " " + c.field))
		if err != nil || r.lease != c.want || r.wait != c.want {
			t.Errorf("A k %s %s: lease %v, wait %v, %v; want %v", c.field, c.field, r.lease, r.wait, err, c.want)
		}
		r, err = parse([]byte("N k 5 " + c.field))
		if err != nil || r.lease != c.want {
			t.Errorf("N k 5 %s: lease %v, %v; want %v", c.field, r.lease, err, c.want)
		}
	}
	// 0 with an exponent is 0: a wait without limit, a lease refused.
	if r, err := parse([]byte("A k 30 0e5")); err != nil || r.wait != 0 {
		t.Errorf("A k 30 0e5: wait %v, %v; want 0 (no limit)", r.wait, err)
	}
	for _, line := range []string{
		"A k 0e5 -", "A k 1e -", "A k e3 -", "A k 1e+ -", "A k +1 -", "A k -1 -", "A k 1e3e3 -",
		"A k 0x10 -", "A k Inf -", "A k NaN -", "A k 1_0 -", "A k 1.e -", "A k . -", "A k 30 -1e3",
	} {
		if r, err := parse([]byte(line)); err == nil {
			t.Errorf("%s: accepted: %+v", line, r)
		}
	}
}

// A lease or wait above 0 but below the node's resolution (1 ns) is
// refused naming its field and the resolution, as over HTTP: it was read
// as 1 ns, another request than the one sent (and 1e-400, too small for
// a float64, must never be 0, a wait without limit).
func TestSecondsBelowTheResolutionRefused(t *testing.T) {
	for _, c := range []struct{ line, field string }{
		{"A k 1e-12 -", "lease"},
		{"A k 1e-400 -", "lease"},
		{"A k 30 1e-12", "wait"},
		{"A k 30 1e-400", "wait"},
		{"A k 30 0.0000000009", "wait"},
		{"N k 5 1e-12", "lease"},
	} {
		r, err := parse([]byte(c.line))
		if err == nil || !strings.HasPrefix(err.Error(), c.field+": ") || !strings.Contains(err.Error(), "1 ns, the node's resolution") {
			t.Errorf("%s: %+v, %v; want %s refused below the resolution", c.line, r, err, c.field)
		}
	}
}

// BenchmarkParse reads the lines of a cycle: the Go client's acquire (an
// id= and an owner=), a plain acquire and a release.
func BenchmarkParse(b *testing.B) {
	for _, bc := range []struct{ name, line string }{
		{"acquire-id-owner", "A jobs/nightly 30 - id=QWERTYUIOPASDFGHJKLZXCVBNM-1k2 owner=build-host-7%3A4242"},
		{"acquire", "A jobs/nightly 30 -"},
		{"release", "R jobs/nightly 123456"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			line := []byte(bc.line)
			b.ReportAllocs()
			for range b.N {
				if _, err := parse(line); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// parse's request keeps its strings when the line's buffer is written
// again (the reader reuses it for the next lines); parseView's may not,
// and it copies nothing for a release: the connection keeps the key
// (keyCache) for its answer.
func TestParseOwnsItsStrings(t *testing.T) {
	for _, line := range []string{
		"A k%20x 30 - id=W-1 owner=host-7",
		"A plain/key 30 5 owner=o id=i",
		"R some/key 12",
		"N k%25 7 30",
	} {
		buf := []byte(line)
		r, err := parse(buf)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		want := r
		want.rawKey, want.key, want.id, want.owner = strings.Clone(r.rawKey), strings.Clone(r.key), strings.Clone(r.id), strings.Clone(r.owner)
		for i := range buf {
			buf[i] = '#'
		}
		if r.rawKey != want.rawKey || r.key != want.key || r.id != want.id || r.owner != want.owner {
			t.Errorf("%q: after the buffer changed: %q %q %q %q", line, r.rawKey, r.key, r.id, r.owner)
		}
	}
	buf := []byte("R some/key 12")
	if n := testing.AllocsPerRun(100, func() { _, _ = parseView(buf) }); n != 0 {
		t.Errorf("parseView of a release: %v allocations, want 0", n)
	}
	var k keyCache
	a := k.own(string(buf[2:10]))
	if b := k.own(string(buf[2:10])); unsafe.StringData(a) != unsafe.StringData(b) {
		t.Errorf("keyCache: a second copy of %q", a)
	}
}

// Whole seconds (up to 6 digits) and tokens are read without strconv:
// the same values and the same refusals as the float path and
// strconv.ParseUint.
func TestWholeSecondsAndTokensAsBefore(t *testing.T) {
	var vs []string
	for n := 0; n <= 1_000_000; n += 1 + n/37 {
		vs = append(vs, strconv.Itoa(n), fmt.Sprintf("%06d", n%1_000_000), fmt.Sprintf("%03d", n%1000))
	}
	vs = append(vs, "0", "00", "000000", "999999", "1000000", "9007199254740991", "9007199254740992", "1234567890123456", "12345678901234567", "01", "")
	for _, v := range vs {
		for _, zeroOK := range []bool{false, true} {
			got, err := durationField("x", v, zeroOK)
			want, werr := durationFloat(v, zeroOK)
			if v == "" {
				want, werr = 0, errors.New("")
			}
			if got != want || (err == nil) != (werr == nil) || (err != nil && v != "" && err.Error() != werr.Error()) {
				t.Fatalf("durationField(%q, %v) = %v, %v; the float path: %v, %v", v, zeroOK, got, err, want, werr)
			}
		}
		tok, ok := tokenField(v)
		p, perr := strconv.ParseUint(v, 10, 64)
		wantOK := perr == nil && v != "" && v[0] != '0' && len(v) <= 16 && p < 1<<53
		if ok != wantOK || (ok && tok != p) {
			t.Fatalf("tokenField(%q) = %d, %v; want %d, %v", v, tok, ok, p, wantOK)
		}
	}
}

// A token the parser refuses is named in its message as over HTTP
// (`token: must be a fencing token: an integer from 1 to 2^53-1, got
// "abc"`): the native answers said only what a token must be.
func TestBadTokenSaysWhatItGot(t *testing.T) {
	for _, line := range []string{"R k abc", "R k 0", "R k 9007199254740992", "N k 12x 5"} {
		v := strings.Fields(line)[2]
		_, err := parse([]byte(line))
		want := `token: must be a fencing token: an integer from 1 to 2^53-1, got "` + v + `"`
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", line, err, want)
		}
	}
}

// A P without its word, or with a word that is not printable, is refused
// naming the word, P's only field: it was named the key, which P has none
// of ("P" alone: "key: is missing").
func TestPingWithoutAWordNamesTheWord(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{"P", "word: is missing (P <word>)"},
		{"P \x01", "word: is not valid UTF-8 without control characters"},
		{"A", "key: is missing"},
	} {
		_, err := parse([]byte(c.line))
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: %v, want %s", c.line, err, c.want)
		}
	}
}

// A malformed field of a C line is named as the field it is (SPEC
// section 2b: "E invalid_argument naming the field"): its third field is
// the id, as for every other check of it ("C k x%2": id), not "fields",
// which names a wrong field count. An empty id or one that is not UTF-8
// said "fields: is empty" and "fields: is not valid UTF-8".
func TestCancelFieldErrorsNameTheID(t *testing.T) {
	for _, line := range []string{"C k ", "C k \xff", "C k%20b \xfe"} {
		_, err := parse([]byte(line))
		var le *lineError
		if !errors.As(err, &le) || le.fatal || le.field != "id" {
			t.Errorf("%q: %v; want a non-fatal error naming id", line, err)
		}
	}
}
