package native

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/internal/nline"
)

// MaxLine is the longest request line the server reads, in bytes, without
// its "\n". A longer line closes the connection after an error line. It
// holds the longest valid acquire: a 256-byte key and a 256-byte id, both
// percent-encoded (3 bytes per byte at worst), with room to spare.
const MaxLine = 4096

// Ops of SPEC section 2b: nline's constants, written once there for the
// client and the server alike. OpPing is answered by the connection's
// reader, whatever the node's role; OpCancel's acquire leaves the key's
// queue (answered "A <key> T") as it would if the connection closed.
const (
	OpAcquire = nline.OpAcquire
	OpRelease = nline.OpRelease
	OpRenew   = nline.OpRenew
	OpAuth    = nline.OpAuth
	OpPing    = nline.OpPing
	OpCancel  = nline.OpCancel
)

// request is one parsed line.
type request struct {
	op string
	// rawKey is the key field as sent (percent-encoded): answers repeat it,
	// so that the client matches them to what it wrote.
	rawKey string
	key    string
	lease  time.Duration // 0 = not given
	wait   time.Duration // 0 = not given (no limit, or wait_max)
	token  uint64
	force  bool
	id     string
	owner  string      // "" = none
	mode   engine.Mode // Exclusive unless mode=shared
	limit  int         // 0 = not given (the key's limit)
	auth   string      // AUTH's bearer token

	// pre, for an acquire, is its answer made already (a bad line waiting
	// for its turn); start is when the line arrived.
	pre   *answer
	start instant

	// For an acquire: its connection, its parked engine request (to
	// withdraw when the connection ends), and the connection's acquires
	// of the same key that wait their turn behind it.
	c      *conn
	parked *engine.Waiting
	after  []*request
	// cancelled is set (1, atomically: the reader sets it, whoever runs
	// the acquire reads it) by a C line naming it: it leaves the queue,
	// or never joins it, and is answered T.
	cancelled uint32
	// awaited: it has waited once for an active to become known (await),
	// and is answered E unavailable, not held back again, if none did.
	awaited bool
}

// lineError is a line the server refuses. With fatal, the op or the key
// could not be read: the error line carries "-" for them and the
// connection is closed after it.
type lineError struct {
	op, rawKey string
	field      string
	msg        string
	fatal      bool
}

func (e *lineError) Error() string { return e.field + ": " + e.msg }

// fatalf is a line whose op or key cannot be read.
func fatalf(field, msg string) *lineError {
	return &lineError{op: "-", rawKey: "-", field: field, msg: msg, fatal: true}
}

// parse reads one request line, without its "\n" (a "\r" before it is
// dropped). It checks everything that needs no engine state: the op, the
// field count, the percent-encoding, the key (engine.CheckKey), numbers,
// options. A *lineError names the offending field. The request's strings
// are its own (see parseView and request.own).
func parse(line []byte) (request, error) {
	r, err := parseView(line)
	if err == nil {
		r.own(line)
		r.auth = strings.Clone(r.auth)
	}
	return r, err
}

// parseView is parse without a copy of the line: the strings of the
// request it returns (rawKey, key, id, owner, auth) may be views of line's
// memory, valid only until line is written again (request.own makes them
// the request's own). Its op is one of the Op constants, and a *lineError
// holds no view.
func parseView(line []byte) (request, error) {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	var buf [8]string
	fields := splitFields(unsafe.String(unsafe.SliceData(line), len(line)), buf[:0])
	op := fields[0]
	switch op {
	case OpAcquire:
		op = OpAcquire
	case OpRelease:
		op = OpRelease
	case OpRenew:
		op = OpRenew
	case OpPing:
		op = OpPing
	case OpCancel:
		op = OpCancel
	case OpAuth:
		// A missing token is a token the node does not know (auth ""):
		// on the first line the connection is closed, on a later one the
		// connection keeps its rights. More fields are a malformed line,
		// answered "AUTH - E invalid_argument …" (AUTH has no key).
		if len(fields) > 2 {
			return request{}, &lineError{op: OpAuth, rawKey: "-", field: "fields", msg: "AUTH takes one field: AUTH <bearer-token>"}
		}
		if len(fields) == 1 {
			return request{op: OpAuth}, nil
		}
		return request{op: OpAuth, auth: fields[1]}, nil
	default:
		if !utf8.ValidString(op) || len(op) > 16 {
			return request{}, fatalf("op", "is not an op (A, R, N, C, P, AUTH)")
		}
		return request{}, fatalf("op", strconv.Quote(op)+" is not an op (A, R, N, C, P, AUTH)")
	}
	// The second field is a key, or P's word.
	second, what := "key", "is missing"
	if op == OpPing {
		second, what = "word", "is missing (P <word>)"
	}
	if len(fields) < 2 || fields[1] == "" {
		return request{}, fatalf(second, what)
	}
	raw := fields[1]
	if !printable(raw) {
		return request{}, fatalf(second, "is not valid UTF-8 without control characters")
	}
	r := request{op: op, rawKey: raw}
	bad := func(field, msg string) (request, error) {
		// (Copies: the field's name may be a view of the line.)
		return request{}, &lineError{op: op, rawKey: strings.Clone(raw), field: strings.Clone(field), msg: strings.Clone(msg)}
	}
	if op == OpPing {
		// The word is echoed as it came: no key rules apply to it.
		if len(fields) != 2 {
			return bad("fields", "P takes 2 fields (P <word>), got "+strconv.Itoa(len(fields)))
		}
		return r, nil
	}
	key, ok := unescape(raw)
	if !ok {
		return bad("key", "has a bad percent-encoding (% must be followed by two hex digits)")
	}
	if err := engine.CheckKey(key); err != nil {
		return bad("key", argReason(err))
	}
	r.key = key
	for i, f := range fields[2:] {
		if !utf8.ValidString(f) {
			return bad(fieldOf(op, i+2, f), "is not valid UTF-8")
		}
		if f == "" {
			return bad(fieldOf(op, i+2, f), "is empty (fields are separated by one space)")
		}
	}
	switch op {
	case OpAcquire:
		if len(fields) < 4 {
			return bad(fieldName(op, len(fields)), "is missing (A <key> <lease> <wait> [id=<id>] [owner=<owner>] [mode=shared|exclusive] [limit=<n>])")
		}
		var err error
		if r.lease, err = durationField("lease", fields[2], false); err != nil {
			return bad("lease", err.Error())
		}
		if r.wait, err = durationField("wait", fields[3], true); err != nil {
			return bad("wait", err.Error())
		}
		var seen uint8 // the options read, by their bit in optionBits
		for _, opt := range fields[4:] {
			name, value, hasEq := strings.Cut(opt, "=")
			if !hasEq {
				return bad("option", strconv.Quote(opt)+" is not name=value")
			}
			// (An unknown name is refused below the first time: only the
			// known ones can come twice.)
			bit := optionBit(name)
			if seen&bit != 0 {
				return bad(name, "is given more than once")
			}
			seen |= bit
			switch name {
			case "id":
				var problem string
				if r.id, problem = idField(value); problem != "" {
					return bad("id", problem)
				}
			case "owner", "mode", "limit":
				// The engine's own parsers, as HTTP uses them: the same
				// values, the same messages.
				v, ok := unescape(value)
				if !ok {
					return bad(name, "has a bad percent-encoding")
				}
				var err error
				switch name {
				case "owner":
					r.owner, err = engine.ParseOwner(v)
				case "mode":
					r.mode, err = engine.ParseMode(v)
				case "limit":
					r.limit, err = engine.ParseLimit(v)
				}
				if err != nil {
					return bad(name, argReason(err))
				}
			default:
				if !printable(name) || name == "" {
					return bad("option", "has an unreadable name")
				}
				return bad(name, "is not an option of A (id, owner, mode, limit)")
			}
		}
	case OpRelease:
		if len(fields) == 4 && fields[2] == "force" {
			// R <key> force id=<id>: a force the node remembers under id
			// (an HTTP force's Idempotency-Key).
			name, value, hasEq := strings.Cut(fields[3], "=")
			switch {
			case !hasEq:
				return bad("option", strconv.Quote(fields[3])+" is not name=value")
			case name != "id":
				if !printable(name) || name == "" {
					return bad("option", "has an unreadable name")
				}
				return bad(name, "is not an option of R force (id)")
			}
			var problem string
			if r.id, problem = idField(value); problem != "" {
				return bad("id", problem)
			}
			r.force = true
			break
		}
		if len(fields) != 3 {
			return bad("fields", "R takes 3 fields (R <key> <token>; R <key> force [id=<id>]), got "+strconv.Itoa(len(fields)))
		}
		if fields[2] == "force" {
			r.force = true
			break
		}
		t, ok := tokenField(fields[2])
		if !ok {
			return bad("token", argReason(engine.BadToken(fields[2])))
		}
		r.token = t
	case OpCancel:
		if len(fields) != 3 {
			return bad("fields", "C takes 3 fields (C <key> <id>), got "+strconv.Itoa(len(fields)))
		}
		var problem string
		if r.id, problem = idField(fields[2]); problem != "" {
			return bad("id", problem)
		}
	case OpRenew:
		if len(fields) != 4 {
			return bad("fields", "N takes 4 fields (N <key> <token> <lease>), got "+strconv.Itoa(len(fields)))
		}
		t, ok := tokenField(fields[2])
		if !ok {
			return bad("token", argReason(engine.BadToken(fields[2])))
		}
		r.token = t
		var err error
		if r.lease, err = durationField("lease", fields[3], false); err != nil {
			return bad("lease", err.Error())
		}
	}
	return r, nil
}

// own makes the request's strings its own: a view of line (parseView)
// among rawKey, key, id and owner becomes a substring of one copy of the
// part of line they lie in; the others (decoded copies, "") stay.
func (r *request) own(line []byte) {
	if len(line) == 0 {
		return
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(line)))
	lo, hi := uintptr(len(line)), uintptr(0) // the span of the views, as offsets
	fields := [...]*string{&r.rawKey, &r.key, &r.id, &r.owner}
	for _, f := range fields {
		if o, ok := viewOffset(*f, base, len(line)); ok {
			lo, hi = min(lo, o), max(hi, o+uintptr(len(*f)))
		}
	}
	if lo >= hi {
		return
	}
	tail := string(line[lo:hi])
	for _, f := range fields {
		if o, ok := viewOffset(*f, base, len(line)); ok {
			*f = tail[o-lo : o-lo+uintptr(len(*f))]
		}
	}
}

// viewOffset reports whether s (not empty) lies in the n bytes at base,
// and where.
func viewOffset(s string, base uintptr, n int) (uintptr, bool) {
	if s == "" {
		return 0, false
	}
	p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	if p < base || p+uintptr(len(s)) > base+uintptr(n) {
		return 0, false
	}
	return p - base, true
}

// optionBit is the bit of an acquire's option in a set of them; 0 for
// a name that is not an option.
func optionBit(name string) uint8 {
	switch name {
	case "id":
		return 1
	case "owner":
		return 2
	case "mode":
		return 4
	case "limit":
		return 8
	}
	return 0
}

// argReason is the reason of an *engine.ArgError (its field is the one
// the caller names), or err's text.
func argReason(err error) string {
	var ae *engine.ArgError
	if errors.As(err, &ae) {
		return ae.Reason
	}
	return err.Error()
}

// splitFields appends the space-separated fields of s to dst, as
// strings.Split(s, " ") would return them, without a slice of its own for
// the common short line.
func splitFields(s string, dst []string) []string {
	for {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			return append(dst, s)
		}
		dst = append(dst, s[:i])
		s = s[i+1:]
	}
}

// fieldOf names the i-th field (0 = op) of a request with op, which is
// f: an option of A by its name when it is a known one (owner=\xff:
// owner), as fieldName does otherwise.
func fieldOf(op string, i int, f string) string {
	name := fieldName(op, i)
	if name == "option" {
		if n, _, ok := strings.Cut(f, "="); ok && optionBit(n) != 0 {
			return n
		}
	}
	return name
}

// fieldName names the i-th field (0 = op) of a request with op.
func fieldName(op string, i int) string {
	names := map[string][]string{
		OpAcquire: {"op", "key", "lease", "wait"},
		OpRelease: {"op", "key", "token"},
		OpRenew:   {"op", "key", "token", "lease"},
		OpCancel:  {"op", "key", "id"},
	}[op]
	if i < len(names) {
		return names[i]
	}
	if op == OpAcquire {
		return "option"
	}
	return "fields"
}

// durationField reads seconds: "-" (not given, 0), or a decimal with an
// optional exponent, as HTTP takes them (SPEC section 2b: the same
// semantics; "30", "0.5", ".5", "1e3"; no "+", hex, Inf or NaN). A lease
// must be greater than 0; a wait may be 0 (no limit).
func durationField(name, v string, zeroOK bool) (time.Duration, error) {
	if v == "-" {
		return 0, nil
	}
	if n := len(v); n > 0 && n <= 6 && digits(v) == n {
		// Whole seconds, the usual form: what the float path below
		// makes of them, exactly (n*1e9 < 2^53), without ParseFloat.
		secs := 0
		for i := 0; i < n; i++ {
			secs = secs*10 + int(v[i]-'0')
		}
		if secs == 0 && !zeroOK {
			return 0, errors.New("must be greater than 0 seconds")
		}
		return time.Duration(secs) * time.Second, nil
	}
	return durationFloat(v, zeroOK)
}

// durationFloat is durationField for any v but "-".
func durationFloat(v string, zeroOK bool) (time.Duration, error) {
	if rest, neg := strings.CutPrefix(v, "-"); neg && decimalSyntax(rest) {
		// A negative number: refused by the rule HTTP states for it, in
		// HTTP's words (SPEC section 2b: the same errors), not as a
		// syntax error. -0 is 0.
		mantissa, _, _ := strings.Cut(strings.ToLower(rest), "e")
		if !strings.ContainsAny(mantissa, "123456789") {
			return durationFloat(rest, zeroOK)
		}
		if !zeroOK {
			return 0, errors.New("must be greater than 0 seconds")
		}
		return 0, errors.New("must be 0 (no limit) or more seconds")
	}
	if !decimalSyntax(v) {
		return 0, errors.New("must be a number of seconds or -, got " + quoteShort(v))
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, errors.New("must be a number of seconds or -, got " + quoteShort(v))
	}
	if mantissa, _, _ := strings.Cut(strings.ToLower(v), "e"); f == 0 && strings.ContainsAny(mantissa, "123456789") {
		// Too small for a float64, yet not 0 (never 0, which is a wait
		// without limit): refused below as shorter than the resolution.
		f = math.SmallestNonzeroFloat64
	}
	if f == 0 && !zeroOK {
		return 0, errors.New("must be greater than 0 seconds")
	}
	switch {
	case f*1e9 >= math.MaxInt64 || math.IsInf(f, 0):
		return math.MaxInt64, nil // the engine refuses it as over its maximum
	case engine.SecondsBelowResolution(f):
		return 0, errors.New(engine.BelowResolution(zeroOK))
	}
	return time.Duration(f * 1e9), nil
}

// decimalSyntax reports whether v is ([0-9]+(\.[0-9]*)?|\.[0-9]+) with an
// optional exponent ([eE][-+]?[0-9]+).
func decimalSyntax(v string) bool {
	n := digits(v)
	rest := v[n:]
	if rest != "" && rest[0] == '.' {
		m := digits(rest[1:])
		n += m
		rest = rest[1+m:]
	}
	if n == 0 {
		return false
	}
	if rest == "" {
		return true
	}
	if rest[0] != 'e' && rest[0] != 'E' {
		return false
	}
	rest = rest[1:]
	if rest != "" && (rest[0] == '+' || rest[0] == '-') {
		rest = rest[1:]
	}
	return rest != "" && digits(rest) == len(rest)
}

// tokenField reads a canonical fencing token: digits, no leading zero,
// 1 to 2^53-1.
func tokenField(v string) (uint64, bool) {
	if v == "" || v[0] == '0' || digits(v) != len(v) || len(v) > 16 {
		return 0, false
	}
	var t uint64 // at most 16 digits: no overflow
	for i := 0; i < len(v); i++ {
		t = t*10 + uint64(v[i]-'0')
	}
	if t >= 1<<53 {
		return 0, false
	}
	return t, true
}

func digits(v string) int {
	i := 0
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	return i
}

// unescape decodes %XX escapes; everything else is taken literally. A %
// not followed by two hex digits is an error (ok=false).
func unescape(s string) (string, bool) {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s, true
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			b = append(b, c)
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		h, l := unhex(s[i+1]), unhex(s[i+2])
		if h < 0 || l < 0 {
			return "", false
		}
		b = append(b, byte(h<<4|l))
		i += 2
	}
	return string(b), true
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// Escape percent-encodes a key or an option value for a request line:
// "%", space and control characters become %XX; everything else is taken
// literally (SPEC section 2b). It is the clients' encoder (internal/nline),
// named here beside the decoder it must match.
func Escape(s string) string { return nline.Escape(s) }

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r < 0xa0) {
			return false
		}
	}
	return true
}

// idField decodes an idempotency key as sent (percent-encoded: the id=
// of A and R force, C's third field), trims the blanks around it as HTTP
// does the Idempotency-Key's (engine.TrimID) and checks it against the
// engine's rule; problem is the message of a bad one ("" when it is good).
func idField(raw string) (id, problem string) {
	id, ok := unescape(raw)
	if !ok {
		return "", "has a bad percent-encoding"
	}
	if id = engine.TrimID(id); !engine.ValidID(id) {
		return "", idRule
	}
	return id, ""
}

// idRule is the native protocol's words for engine.ValidID.
var idRule = fmt.Sprintf("must be 1 to %d printable ASCII characters", engine.MaxIDBytes)

func quoteShort(v string) string {
	if len(v) > 40 {
		return strconv.Quote(v[:40]) + "…"
	}
	return strconv.Quote(v)
}
