// Package nline is the client side of the native protocol's line format
// (SPEC section 2b): it writes request lines and reads answer lines. The
// Go client (package api) and cmd/baton-bench's raw client use it; the
// server's parser (package native) is the reference that it is tested
// against, and native.Escape is this package's Escape.
package nline

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Ops of SPEC section 2b.
const (
	OpAcquire = "A"
	OpRelease = "R"
	OpRenew   = "N"
	OpAuth    = "AUTH"
	// OpPing is the liveness check: "P <word>", answered "P <word> OK".
	OpPing = "P"
	// OpCancel withdraws an acquire: "C <key> <id>", answered "C <key>
	// OK" (and the acquire "A <key> T" if it was still waiting).
	OpCancel = "C"
)

// Outcomes of an answer line.
const (
	OK      = "OK" // granted, released, renewed, authenticated
	Timeout = "T"  // an acquire's wait ran out: no grant
	Moved   = "M"  // this node is a standby: ask the active at Answer.Addr
	Error   = "E"  // an error: Answer.Code and Answer.Message
)

// Escape percent-encodes a key or an option value for a request line:
// "%", space and control characters (bytes up to 0x20, and 0x7f) become
// %XX; everything else is taken literally.
func Escape(s string) string {
	need := false
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '%' || c <= ' ' || c == 0x7f {
			need = true
			break
		}
	}
	if !need {
		return s
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' || c <= ' ' || c == 0x7f {
			b = append(b, '%', hex[c>>4], hex[c&15])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

// ID is what answers are matched by: the op and the raw (escaped) key as
// the request line carried them.
func ID(op, rawKey string) string { return op + " " + rawKey }

// AppendSeconds appends d as the protocol's decimal seconds, or "-" (not
// given) when d <= 0.
func AppendSeconds(b []byte, d time.Duration) []byte {
	if d <= 0 {
		return append(b, '-')
	}
	return strconv.AppendFloat(b, d.Seconds(), 'f', -1, 64)
}

// AcquireOptions are the optional fields of an acquire line; zero values
// are left out.
type AcquireOptions struct {
	ID    string // idempotency key (id=)
	Owner string // owner=
	Mode  string // mode=shared|exclusive
	Limit int    // limit=
}

// AppendAcquire appends "A <rawKey> <lease> <wait> [options]\n". rawKey
// must be Escape(key); lease and wait <= 0 are "-" (not given; wait "-"
// waits without limit).
func AppendAcquire(b []byte, rawKey string, lease, wait time.Duration, o AcquireOptions) []byte {
	b = append(append(append(b, "A "...), rawKey...), ' ')
	b = append(AppendSeconds(b, lease), ' ')
	b = AppendSeconds(b, wait)
	if o.ID != "" {
		b = append(append(b, " id="...), Escape(o.ID)...)
	}
	if o.Owner != "" {
		b = append(append(b, " owner="...), Escape(o.Owner)...)
	}
	if o.Mode != "" {
		b = append(append(b, " mode="...), Escape(o.Mode)...)
	}
	if o.Limit != 0 {
		b = strconv.AppendInt(append(b, " limit="...), int64(o.Limit), 10)
	}
	return append(b, '\n')
}

// AppendRelease appends "R <rawKey> <token>\n".
func AppendRelease(b []byte, rawKey string, token uint64) []byte {
	b = append(append(append(b, "R "...), rawKey...), ' ')
	return append(strconv.AppendUint(b, token, 10), '\n')
}

// AppendForceRelease appends "R <rawKey> force id=<id>\n", an operator's
// release remembered under id (percent-encoded here, as a key is), which
// the node answers again without forcing again when it is repeated.
func AppendForceRelease(b []byte, rawKey, id string) []byte {
	b = append(append(append(b, "R "...), rawKey...), " force id="...)
	return append(append(b, Escape(id)...), '\n')
}

// AppendRenew appends "N <rawKey> <token> <lease>\n" (lease <= 0: "-",
// the grant's lease).
func AppendRenew(b []byte, rawKey string, token uint64, lease time.Duration) []byte {
	b = append(append(append(b, "N "...), rawKey...), ' ')
	b = append(strconv.AppendUint(b, token, 10), ' ')
	return append(AppendSeconds(b, lease), '\n')
}

// AppendPing appends "P <word>\n"; word must be printable ASCII
// without spaces.
func AppendPing(b []byte, word string) []byte {
	return append(append(append(b, "P "...), word...), '\n')
}

// AppendCancel appends "C <rawKey> <id>\n" (id escaped here).
func AppendCancel(b []byte, rawKey, id string) []byte {
	b = append(append(append(b, "C "...), rawKey...), ' ')
	return append(append(b, Escape(id)...), '\n')
}

// AppendAuth appends "AUTH <token>\n".
func AppendAuth(b []byte, token string) []byte {
	return append(append(append(b, "AUTH "...), token...), '\n')
}

// Answer is one answer line, read.
type Answer struct {
	// Op is the request's op ("A", "R", "N", "P", "AUTH"; "-" on the error
	// line of a request whose op could not be read).
	Op string
	// Key is the key as the request line carried it (escaped; a ping's
	// word), "" for AUTH answers and "-" when it could not be read.
	Key string
	// Outcome is OK, Timeout, Moved or Error.
	Outcome string
	// Token, Lease and Expires: a grant (A ... OK) or a renewal (N ... OK).
	Token   uint64
	Lease   time.Duration
	Expires time.Time
	// Addr is the native address of the active (M).
	Addr string
	// Code and Message: an error (E). The message of an invalid_argument
	// starts with the field it names ("lease: must be ...").
	Code, Message string
}

// ID is the answer's (op, key), as ID(op, rawKey) of its request.
func (a *Answer) ID() string { return ID(a.Op, a.Key) }

// Field returns the field an error message names ("lease" of "lease: must
// be greater than 0 seconds"), or "".
func (a *Answer) Field() string {
	f, _, ok := strings.Cut(a.Message, ": ")
	if !ok || f == "" || strings.ContainsAny(f, " \t") {
		return ""
	}
	return f
}

// ErrBadAnswer is returned by ParseAnswer for a line that is not an
// answer of SPEC section 2b.
var ErrBadAnswer = errors.New("nline: not an answer line")

// ErrHTTP is wrapped by ParseAnswer's error for an HTTP status line: the
// address serves HTTP (a node's listen address), not the native protocol
// (its native_listen address).
var ErrHTTP = errors.New("an HTTP status line: this address serves HTTP, not baton's native protocol (baton:// takes a node's native_listen address)")

func bad(line, why string) error {
	if len(line) > 80 {
		line = line[:80] + "…"
	}
	return errors.New(ErrBadAnswer.Error() + ": " + why + ": " + strconv.Quote(line))
}

// ParseAnswer reads one answer line (without its "\n"; a "\r" before it
// is dropped). An error says what is wrong; it wraps ErrHTTP for an HTTP
// status line, nothing otherwise.
func ParseAnswer(line string) (Answer, error) {
	line = strings.TrimSuffix(line, "\r")
	if strings.HasPrefix(line, "HTTP/") {
		return Answer{}, fmt.Errorf("%s: %w: %q", ErrBadAnswer, ErrHTTP, line)
	}
	var a Answer
	op, rest, _ := strings.Cut(line, " ")
	a.Op = op
	if op == OpAuth {
		// "AUTH OK", "AUTH E <code> <msg>", or (a malformed AUTH line)
		// "AUTH - E <code> <msg>".
		if k, r, ok := strings.Cut(rest, " "); ok && k == "-" {
			a.Key, rest = k, r
		}
	} else {
		var ok bool
		a.Key, rest, ok = strings.Cut(rest, " ")
		if !ok || a.Key == "" {
			return Answer{}, bad(line, "no outcome")
		}
	}
	outcome, rest, _ := strings.Cut(rest, " ")
	a.Outcome = outcome
	switch outcome {
	case OK:
		if op != OpAcquire && op != OpRenew {
			if rest != "" {
				return Answer{}, bad(line, "extra fields after OK")
			}
			return a, nil
		}
		// Three fields, cut in place (an answer line is on the path of
		// every request: no slice for them).
		tok, rest, ok1 := strings.Cut(rest, " ")
		lease, exp, ok2 := strings.Cut(rest, " ")
		if !ok1 || !ok2 || strings.Contains(exp, " ") {
			return Answer{}, bad(line, "a grant has 3 fields: token, lease, expiry")
		}
		var err error
		if a.Token, err = strconv.ParseUint(tok, 10, 64); err != nil || a.Token == 0 {
			return Answer{}, bad(line, "bad token")
		}
		secs, err := strconv.ParseFloat(lease, 64)
		if err != nil || secs < 0 {
			return Answer{}, bad(line, "bad lease")
		}
		a.Lease = time.Duration(secs * float64(time.Second))
		ms, err := strconv.ParseInt(exp, 10, 64)
		if err != nil {
			return Answer{}, bad(line, "bad expiry")
		}
		a.Expires = time.UnixMilli(ms)
	case Timeout:
		if op != OpAcquire || rest != "" {
			return Answer{}, bad(line, "T answers an acquire, with no fields")
		}
	case Moved:
		if rest == "" || strings.Contains(rest, " ") {
			return Answer{}, bad(line, "M takes one address")
		}
		a.Addr = rest
	case Error:
		a.Code, a.Message, _ = strings.Cut(rest, " ")
		if a.Code == "" {
			return Answer{}, bad(line, "E without a code")
		}
	default:
		return Answer{}, bad(line, "unknown outcome")
	}
	return a, nil
}
