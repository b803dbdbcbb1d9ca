package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

// lockParams are the parameters of a /locks/{key} call after parsing, in
// the units of the API (seconds), checked by validate.
type lockParams struct {
	Key   string
	Lease given[float64]
	Wait  given[float64]
	Token given[uint64]
	// ID is the Idempotency-Key header; IDGiven: the header was sent
	// (an empty one too, which validate refuses).
	ID      string
	IDGiven bool
	// Ticket is a server ticket carried by a redirect (query only).
	Ticket string
	// Owner, Mode and Limit of an acquire (checked as they are set).
	Owner string
	Mode  engine.Mode
	Limit int
	// Force is an operator's release (DELETE ?force=true).
	Force bool
}

// given is a parameter a call may leave out: V is its value when Set. (A
// value, not a pointer: a pointer to a parsed value put it on the heap.)
type given[T any] struct {
	V   T
	Set bool
}

// validate checks the key and the parameters a call gave (in this order:
// key, lease, wait, token, Idempotency-Key) and returns the first
// complaint as a 400 that names the field (the key: the engine's error).
// Seconds are checked as the time.Duration the engine gets. Plain
// comparisons, not a validator's tags: Validate.Var took a tenth of the
// handler stack's time per acquire+release (reflection and an allocation
// per field).
func (p *lockParams) validate() error {
	if err := engine.CheckKey(p.Key); err != nil {
		return err
	}
	switch {
	case p.Lease.Set && seconds(p.Lease.V) <= 0:
		return badRequest("lease", "must be greater than 0 seconds")
	case p.Lease.Set && engine.SecondsBelowResolution(p.Lease.V):
		return badRequest("lease", engine.BelowResolution(false))
	case p.Wait.Set && seconds(p.Wait.V) < 0:
		return badRequest("wait", "must be 0 (no limit) or more seconds")
	case p.Wait.Set && engine.SecondsBelowResolution(p.Wait.V):
		return badRequest("wait", engine.BelowResolution(true))
	case p.IDGiven && !engine.ValidID(p.ID):
		return badRequest(api.HeaderIdempotencyKey, fmt.Sprintf("must be 1 to %d printable ASCII characters (leave the header out for none)", engine.MaxIDBytes))
	}
	return nil
}

// allowed lists the parameters each method takes.
var allowed = map[string][]string{
	http.MethodPost:   {"lease", "wait", "ticket", "owner", "mode", "limit"},
	http.MethodDelete: {"token", "force"},
	http.MethodPatch:  {"token", "lease"},
}

// sources records where each parameter of a call was given ("query",
// "body"; "" = not yet), indexed like its names in allowed: a call takes at
// most six, so no map is needed.
type sources [6]string

// index returns the position of name in names, or -1.
func index(names []string, name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	return -1
}

// parseLockParams reads the key from the path and lease, wait and token
// from the query string, a JSON body and (token) the Lock-Token header,
// and validates them. Naming one parameter in two places, an unknown
// parameter (a Lock-Token header on a call that takes no token too), a
// malformed value or body is a 400 that names the field; a body over
// maxBody a 413.
func (s *Server) parseLockParams(w http.ResponseWriter, r *http.Request) (lockParams, error) {
	p, err := s.readLockParams(w, r)
	if err == nil {
		err = s.checkLockParams(&p, r.Method)
	}
	return p, err
}

// readLockParams is parseLockParams without the validation.
func (s *Server) readLockParams(w http.ResponseWriter, r *http.Request) (lockParams, error) {
	var p lockParams
	p.Key = strings.TrimPrefix(r.URL.Path, "/locks/")
	if ids := r.Header.Values(api.HeaderIdempotencyKey); len(ids) > 1 {
		return p, badRequest(api.HeaderIdempotencyKey, "is given more than once")
	} else if len(ids) == 1 {
		// Go's HTTP/1.1 server trims the blanks around a header's value,
		// its HTTP/2 server does not: engine.TrimID, so that one key
		// names one request whatever the protocol.
		p.ID, p.IDGiven = engine.TrimID(ids[0]), true
	}
	names := allowed[r.Method]
	var from sources
	if err := p.setQuery(r.URL.RawQuery, r.Method, names, &from); err != nil {
		return p, err
	}
	body, err := readBody(w, r, s.cfg.MaxBody)
	if err != nil {
		return p, err
	}
	if len(body) > 0 {
		if err := p.setJSON(body, names, &from); err != nil {
			return p, err
		}
	}
	if hv := r.Header.Values(api.HeaderLockToken); len(hv) > 0 {
		h := hv[0]
		if i := index(names, "token"); i >= 0 {
			if len(hv) > 1 {
				return p, badRequest("token", "is given more than once (Lock-Token header)")
			}
			if from[i] != "" {
				return p, badRequest("token", "is given both in the "+from[i]+" and in the Lock-Token header")
			}
			if h == "" {
				return p, badRequest("token", "is empty (the Lock-Token header)")
			}
			if err := p.set("token", h); err != nil {
				return p, err
			}
		} else if err := noTokenHeader(r, r.Method+" /locks/{key}"); err != nil {
			return p, err
		}
	}
	return p, nil
}

// noTokenHeader is THE rule for a Lock-Token header on a call that takes
// no token (an acquire, every read, route such as "GET /locks"): the
// header is the token parameter's other form, so it is refused as token
// in the call's query string or body is (notParameter), a 400 naming
// token, not ignored. Ignored, a GET /locks/{key} with the caller's token
// answered 200 with whoever held the key.
func noTokenHeader(r *http.Request, route string) error {
	if len(r.Header.Values(api.HeaderLockToken)) == 0 {
		return nil
	}
	return badRequest("token", "is not a parameter of "+route+": the Lock-Token header goes with a release or a renew (DELETE, PATCH)")
}

// checkLockParams validates what readLockParams read for method.
func (s *Server) checkLockParams(p *lockParams, method string) error {
	if err := p.validate(); err != nil {
		return err
	}
	if p.ID == "" && p.Ticket != "" {
		p.ID = engine.TicketID(p.Ticket)
	}
	switch {
	case p.Force && p.Token.Set:
		return badRequest("force", "cannot be given with token: a forced release ends every holder of the key")
	case p.Force:
	case index(allowed[method], "token") >= 0 && !p.Token.Set:
		return badRequest("token", "is required (query, JSON body or Lock-Token header)")
	}
	return nil
}

// setQuery reads the query string: "&"-separated name=value pairs in the
// form encoding of url.ParseQuery (a ";" or a bad escape makes it
// invalid), each name a parameter of method, given once. It walks the
// string in place: parsing to a url.Values map cost more than the rest of
// a release.
func (p *lockParams) setQuery(raw, method string, names []string, from *sources) error {
	var vals [len(sources{})]string
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if strings.Contains(pair, ";") {
			return badRequest("query", "is not a valid query string")
		}
		if pair == "" {
			continue
		}
		name, value, _ := strings.Cut(pair, "=")
		name, err1 := unescapeQuery(name)
		value, err2 := unescapeQuery(value)
		if err1 != nil || err2 != nil {
			return badPair(pair, method+" /locks/{key}", names)
		}
		i := index(names, name)
		if i < 0 {
			return notParameter(name, method+" /locks/{key}", names)
		}
		if from[i] != "" {
			return badRequest(name, "is given more than once")
		}
		from[i], vals[i] = "query", value
	}
	for i, name := range names {
		if from[i] != "" {
			if err := p.set(name, vals[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// strictQuery parses the query string of a GET route that takes the
// parameters names, each at most once: a malformed query string, an
// unknown or a repeated parameter is a 400 that names it, as for the lock
// calls; so are a body (noBody) and a Lock-Token header (noTokenHeader).
// route names the call in the message ("GET /locks").
func strictQuery(w http.ResponseWriter, r *http.Request, route string, names ...string) (url.Values, error) {
	if err := noBody(w, r, route); err != nil {
		return nil, err
	}
	if err := noTokenHeader(r, route); err != nil {
		return nil, err
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		for _, pair := range strings.Split(r.URL.RawQuery, "&") {
			if _, err := url.ParseQuery(pair); err != nil {
				return nil, badPair(pair, route, names)
			}
		}
		return nil, badRequest("query", "is not a valid query string")
	}
	for name, vals := range q {
		if index(names, name) < 0 {
			return nil, notParameter(name, route, names)
		}
		if len(vals) != 1 {
			return nil, badRequest(name, "is given more than once")
		}
		if err := checkEmpty(name, vals[0]); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// noBody refuses a body on a read (route, such as "GET /locks"), which
// takes its parameters in the query string alone: a {"prefix":"x"} body
// was ignored, and the whole list answered as if it had been obeyed.
// What counts as a body is hasBody's.
func noBody(w http.ResponseWriter, r *http.Request, route string) error {
	if hasBody(w, r) {
		return badRequest("body", route+" takes its parameters in the query string, not in a body")
	}
	return nil
}

// hasBody reports whether r, a read's request, carries a body: one
// announced by Content-Length, or one of unknown length (chunked over
// HTTP/1.1; over HTTP/2 a request whose headers did not end the stream)
// that yields a byte. An empty one is none. The byte is awaited at most
// bodyTimeout, as readBody awaits a body: one that does not come by then
// counts as a body (a 400 then, and the connection closed, the deadline
// kept); otherwise the deadline is lifted, so that a stream of events
// that follows is not cut by it.
func hasBody(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case r.ContentLength > 0:
		return true
	case r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody:
		return false
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(bodyTimeout))
	var b [1]byte
	n, err := io.ReadFull(r.Body, b[:])
	if n == 0 && err != nil && !errors.Is(err, io.EOF) {
		return true // not arrived in time, or not readable: refused, the deadline kept
	}
	_ = rc.SetReadDeadline(time.Time{})
	return n > 0
}

// noParams refuses a body, a Lock-Token header (noTokenHeader) and every
// query parameter on a call that takes none (route, such as "GET
// /cluster"): a 400 naming the first parameter
// of the query string ("query" when its name does not decode). Those calls
// ignored them, while the others refuse what they do not take.
func noParams(w http.ResponseWriter, r *http.Request, route string) error {
	if hasBody(w, r) {
		// Not noBody's message, which points to the query string:
		// that takes none either.
		return badRequest("body", route+" takes no parameters and no body")
	}
	if err := noTokenHeader(r, route); err != nil {
		return err
	}
	if r.URL.RawQuery == "" {
		return nil
	}
	for _, pair := range strings.Split(r.URL.RawQuery, "&") {
		if pair == "" {
			continue
		}
		name, _, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(name)
		if err != nil {
			name = "query"
		}
		return badRequest(name, route+" takes no parameters")
	}
	return nil
}

// checkEmpty is THE rule for a parameter given with an empty value
// ("?limit=", "?since=", "?lease="): it is bad input (SPEC section 2: a 400
// that names the field), not its default, which leaving it out gives; only
// prefix and after, where "" is a value (every key), take it.
func checkEmpty(name, v string) error {
	if v != "" || name == "prefix" || name == "after" {
		return nil
	}
	return badRequest(name, "is empty (give a value, or leave the parameter out)")
}

// notParameter is the error of a query parameter that route (a call:
// "GET /locks") does not take.
func notParameter(name, route string, names []string) error {
	return badRequest(name, fmt.Sprintf("is not a parameter of %s (expected %s)", route, strings.Join(names, ", ")))
}

// badPair names what is wrong with pair, a name=value pair of the query
// string of route that does not decode: a ";" (the query as a whole), a
// name with a bad escape (the query), a parameter route does not take,
// or a value with a bad escape (its parameter).
func badPair(pair, route string, names []string) error {
	if strings.Contains(pair, ";") {
		return badRequest("query", "is not a valid query string (parameters are separated by &; write ; as %3B)")
	}
	name, value, _ := strings.Cut(pair, "=")
	name, err := url.QueryUnescape(name)
	if err != nil {
		return badRequest("query", "is not a valid query string (a parameter's name has a bad percent-encoding)")
	}
	if index(names, name) < 0 {
		return notParameter(name, route, names)
	}
	if _, err := url.QueryUnescape(value); err != nil {
		return badRequest(name, "has a bad percent-encoding (% must be followed by two hex digits; write % itself as %25)")
	}
	return badRequest("query", "is not a valid query string")
}

// unescapeQuery decodes one name or value of a query string; most have
// nothing to decode and are returned as they are, without a copy.
func unescapeQuery(v string) (string, error) {
	if strings.IndexByte(v, '%') < 0 && strings.IndexByte(v, '+') < 0 {
		return v, nil
	}
	return url.QueryUnescape(v)
}

func (p *lockParams) set(name, v string) error {
	if err := checkEmpty(name, v); err != nil {
		return err
	}
	switch name {
	case "lease", "wait":
		f, err := parseSeconds(name, v)
		if err != nil {
			return err
		}
		if f == 0 && nonzeroMantissa(v) {
			// Too small for a float64 (1e-400), yet not 0: the smallest
			// float64 of its sign, never 0, which is a wait without
			// limit (validate refuses it as below the resolution).
			f = math.Copysign(math.SmallestNonzeroFloat64, f)
		}
		if name == "lease" {
			p.Lease = given[float64]{f, true}
		} else {
			p.Wait = given[float64]{f, true}
		}
	case "ticket":
		// A server ticket from a redirect (SPEC section 3): it names the
		// waiter when the client sent no Idempotency-Key of its own.
		// Hex in either case; a waiter ID is compared exactly, so it is
		// taken in lower case, the case of the tickets a node writes.
		if len(v) == 0 || len(v) > 64 || strings.Trim(v, "0123456789abcdefABCDEF") != "" {
			return badRequest("ticket", "must be 1 to 64 hex digits (the ticket of a redirect), got "+quoteShort(v))
		}
		p.Ticket = strings.ToLower(v)
	case "owner":
		owner, err := engine.ParseOwner(v)
		if err != nil {
			return err
		}
		p.Owner = owner
	case "mode":
		mode, err := engine.ParseMode(v)
		if err != nil {
			return err
		}
		p.Mode = mode
	case "limit":
		n, err := engine.ParseLimit(v)
		if err != nil {
			return err
		}
		p.Limit = n
	case "force":
		if v != "true" {
			return badRequest("force", "must be true, got "+quoteShort(v))
		}
		p.Force = true
	case "token":
		// Exactly the decimal digits the server wrote: no sign, no space,
		// no leading zero; below 2^53.
		t, err := strconv.ParseUint(v, 10, 64)
		if err != nil || !tokenSyntax(v) || t >= api.MaxToken {
			return engine.BadToken(v)
		}
		p.Token = given[uint64]{t, true}
	}
	return nil
}

// secondsSyntax reports whether v is a plain decimal with an optional
// exponent: -?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)? ("0.5", ".5",
// "1e3"; no "+" sign, underscores, hex, Inf or NaN, which ParseFloat takes).
func secondsSyntax(v string) bool {
	v = strings.TrimPrefix(v, "-")
	intDigits := digits(v)
	v = v[intDigits:]
	fracDigits := 0
	if rest, ok := strings.CutPrefix(v, "."); ok {
		fracDigits = digits(rest)
		v = rest[fracDigits:]
	}
	if intDigits+fracDigits == 0 {
		return false
	}
	if len(v) > 0 && (v[0] == 'e' || v[0] == 'E') {
		v = v[1:]
		if len(v) > 0 && (v[0] == '+' || v[0] == '-') {
			v = v[1:]
		}
		n := digits(v)
		if n == 0 {
			return false
		}
		v = v[n:]
	}
	return v == ""
}

// tokenSyntax reports whether v is a canonical decimal: digits without a
// sign, a space or a leading zero. It is the syntax of a token and of GET
// /locks' limit (an acquire's limit has the same rule, engine.ParseLimit).
func tokenSyntax(v string) bool {
	return v != "" && v[0] != '0' && digits(v) == len(v)
}

// seqSyntax reports whether v is an event's Seq as the feed writes it:
// 0 or a canonical decimal (tokenSyntax).
func seqSyntax(v string) bool { return v == "0" || tokenSyntax(v) }

// nonzeroMantissa reports whether a number secondsSyntax accepted has a
// digit other than 0 before its exponent: its value is not 0, even when
// it underflows a float64 to 0.
func nonzeroMantissa(v string) bool {
	if i := strings.IndexAny(v, "eE"); i >= 0 {
		v = v[:i]
	}
	return strings.ContainsAny(v, "123456789")
}

// digits returns the number of ASCII digits v starts with.
func digits(v string) int {
	i := 0
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	return i
}

func parseSeconds(name, v string) (float64, error) {
	if !secondsSyntax(v) {
		return 0, badRequest(name, "must be a number of seconds, got "+quoteShort(v))
	}
	f, ok := exactDecimal(v)
	if !ok {
		var err error
		f, err = strconv.ParseFloat(v, 64)
		if errors.Is(err, strconv.ErrRange) && math.IsInf(f, 0) {
			// Too large for a float64 (1e400), yet a number: the largest
			// of its sign, so that it is judged as 1e300 is (a lease
			// over lease_max, a wait without end), as native reads it.
			f, err = math.Copysign(math.MaxFloat64, f), nil
		}
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, badRequest(name, "must be a number of seconds, got "+quoteShort(v))
		}
	}
	return f, nil
}

// float64pow10 holds the powers of ten a float64 represents exactly.
var float64pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// exactDecimal converts v, which secondsSyntax accepted, when its digits
// (at most 15 of them) form an integer m < 2^53 and its decimal exponent e
// lies in [-22, 22]: then m and 10^|e| are exact float64s and one
// multiplication or division rounds correctly (Clinger's fast path: W. D. Clinger, "How to Read
// Floating Point Numbers Accurately", PLDI 1990). That covers the leases
// and waits people write; it returns ok=false for the rest, which
// strconv.ParseFloat converts. The point is the stack: ParseFloat keeps a
// 900-byte frame, which grew the stack of every parked HTTP/2 request from
// 4 to 8 KiB, about 40% of what a waiter costs.
func exactDecimal(v string) (f float64, ok bool) {
	neg := false
	if v[0] == '-' {
		neg, v = true, v[1:]
	}
	var m uint64
	exp, n := 0, 0 // n counts the significant digits in m
	seenDot := false
	i := 0
	for ; i < len(v) && v[i] != 'e' && v[i] != 'E'; i++ {
		c := v[i]
		if c == '.' {
			seenDot = true
			continue
		}
		if seenDot {
			exp--
		}
		if m == 0 && c == '0' {
			continue // a leading zero adds no digit
		}
		if n++; n > 15 {
			return 0, false
		}
		m = m*10 + uint64(c-'0')
	}
	if i < len(v) { // an exponent: [eE][-+]?[0-9]+
		e, err := strconv.Atoi(strings.TrimPrefix(v[i+1:], "+"))
		if err != nil || e < -22 || e > 22 {
			return 0, false
		}
		exp += e
	}
	switch {
	case exp < -22 || exp > 22:
		return 0, false
	case exp >= 0:
		f = float64(m) * float64pow10[exp]
	default:
		f = float64(m) / float64pow10[-exp]
	}
	if neg {
		f = -f
	}
	return f, true
}

// formHint says where the parameters of a body that is a form of this
// call's parameters go ("lease=5&wait=1", as curl -d sends one, typed
// application/x-www-form-urlencoded whatever the data): the query string
// (each pair as sent),
// or a JSON object, spelled out when every value fits its JSON type. It
// is "" for any other body (a name that is no parameter of the call, a
// pair without "=", a name twice, a body over 512 bytes), which keeps the
// plain message, as does one with a control character.
func formHint(body []byte, names []string) string {
	s := strings.TrimRight(string(body), "\r\n")
	if s == "" || len(s) > 512 || strings.ContainsFunc(s, unicode.IsControl) {
		return "" // a control character would break a text/plain answer's line
	}
	obj, fits := []byte{'{'}, true
	seen := make([]bool, len(names))
	for _, pair := range strings.Split(s, "&") {
		k, v, ok := strings.Cut(pair, "=")
		name, err1 := url.QueryUnescape(k)
		val, err2 := url.QueryUnescape(v)
		i := index(names, name)
		if !ok || err1 != nil || err2 != nil || i < 0 || seen[i] {
			return ""
		}
		seen[i] = true
		var jv []byte
		switch name {
		case "owner", "mode":
			// Go's quoting of printable text is JSON's.
			if q := strconv.QuoteToGraphic(val); utf8.ValidString(val) && json.Valid([]byte(q)) {
				jv = []byte(q)
			}
		case "force":
			if val == "true" {
				jv = []byte(val)
			}
		default:
			if _, err := strconv.ParseFloat(val, 64); err == nil && json.Valid([]byte(val)) {
				jv = []byte(val)
			}
		}
		fits = fits && jv != nil
		if fits {
			if len(obj) > 1 {
				obj = append(obj, ',')
			}
			obj = append(strconv.AppendQuote(obj, name), ':')
			obj = append(obj, jv...)
		}
	}
	// The pairs as sent (URL-encoded: as they go in a query string),
	// listed in words.
	pairs := strings.Split(s, "&")
	list := pairs[0]
	if n := len(pairs); n > 1 {
		list = strings.Join(pairs[:n-1], ", ") + " and " + pairs[n-1]
	}
	hint := ", got a form (as curl -d sends one): put " + list + " in the query string"
	if !fits {
		return hint + "."
	}
	return hint + ", or send them as JSON: " + string(obj) + "}"
}

// quoteShort quotes a client's value for an error message, cut to a
// readable length.
func quoteShort(v string) string {
	const max = 40
	if len(v) > max {
		return strconv.Quote(v[:max]) + "…"
	}
	return strconv.Quote(v)
}

// setJSON reads a body that must be one JSON object whose members are
// numbers (owner and mode: strings; force: true): each named once, each
// a parameter of the call other than ticket (query only).
func (p *lockParams) setJSON(body []byte, names []string, from *sources) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return badRequest("body", "must be a JSON object"+formHint(body, names))
	}
	// The object's syntax as a whole first: its tokens are read one by
	// one below, and a number such as 02 reads as 0 before the 2 is found
	// wrong, so that a field was judged on a value the client never sent
	// ("limit: ... got \"0\"").
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(new(json.RawMessage)); err != nil {
		return badRequest("body", "is not valid JSON: "+err.Error())
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return badRequest("body", "is not valid JSON: "+err.Error())
		}
		name, _ := tok.(string)
		i := index(names, name)
		if i < 0 || !inBody(name) {
			// A ticket travels only in the query string of a handoff's
			// redirect (Location); a body never carries one.
			return badRequest(name, fmt.Sprintf("is not a field of this call's body (expected %s)", strings.Join(bodyNames(names), ", ")))
		}
		if where := from[i]; where != "" {
			if where == "body" {
				return badRequest(name, "is given twice in the body")
			}
			return badRequest(name, "is given both in the "+where+" and in the body")
		}
		start := dec.InputOffset()
		tok, err = dec.Token()
		if err != nil {
			return badRequest("body", "is not valid JSON: "+err.Error())
		}
		var v string
		switch x := tok.(type) {
		case string:
			if name != "owner" && name != "mode" {
				return jsonTypeError(name)
			}
			if loneSurrogate(body[start:dec.InputOffset()]) {
				// encoding/json decodes it as U+FFFD: the value would be
				// taken as another than the client sent.
				return badRequest(name, `has a \u escape of a lone UTF-16 surrogate, which is no character`)
			}
			v = x
		case bool:
			if name != "force" {
				return jsonTypeError(name)
			}
			v = strconv.FormatBool(x)
		case json.Number:
			if name == "owner" || name == "mode" || name == "force" {
				return jsonTypeError(name)
			}
			v = x.String()
		default:
			return jsonTypeError(name)
		}
		if err := p.set(name, v); err != nil {
			return err
		}
		from[i] = "body"
	}
	if _, err := dec.Token(); err != nil {
		return badRequest("body", "is not valid JSON: "+err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("body", "has data after the JSON object")
	}
	return nil
}

// inBody reports whether a JSON body may carry the parameter name: all
// but ticket, which only the query string of a handoff's redirect
// (Location) carries.
func inBody(name string) bool { return name != "ticket" }

// bodyNames returns the members a JSON body may name among a call's
// parameters names (inBody).
func bodyNames(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if inBody(n) {
			out = append(out, n)
		}
	}
	return out
}

// loneSurrogate reports whether raw, the JSON text of a string (and what
// precedes it), holds a \u escape of a UTF-16 surrogate that is not the
// first half of a pair followed by its second.
func loneSurrogate(raw []byte) bool {
	hex4 := func(b []byte) (rune, bool) {
		if len(b) < 4 {
			return 0, false
		}
		n, err := strconv.ParseUint(string(b[:4]), 16, 16)
		return rune(n), err == nil
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		i++ // the escaped character
		if raw[i] != 'u' {
			continue
		}
		r, ok := hex4(raw[i+1:])
		if !ok {
			continue
		}
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		case r >= 0xD800 && r <= 0xDBFF:
			if i+2 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
				return true
			}
			r2, ok := hex4(raw[i+3:])
			if !ok || r2 < 0xDC00 || r2 > 0xDFFF {
				return true
			}
			i += 6
		}
	}
	return false
}

// jsonTypeError is the 400 for a body member of the wrong JSON type: it
// names the type the member takes.
func jsonTypeError(name string) error {
	switch name {
	case "owner", "mode":
		return badRequest(name, "must be a JSON string")
	case "force":
		return badRequest(name, "must be the JSON value true")
	}
	return badRequest(name, "must be a JSON number")
}

// bodyTimeout is how long a request body may take to arrive, from the
// start of its read.
const bodyTimeout = 10 * time.Second

// readBody reads at most max bytes of r's body. A body that does not
// arrive within bodyTimeout is a 400 naming body.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil, nil
	}
	if ce := r.Header.Values("Content-Encoding"); len(ce) > 0 && (len(ce) > 1 || !strings.EqualFold(strings.TrimSpace(ce[0]), "identity")) {
		// A compressed body was read as JSON and refused as "not UTF-8",
		// which said nothing of the cause.
		return nil, badRequest("Content-Encoding", "must be identity or left out, got "+quoteShort(strings.Join(ce, ", "))+": send the body uncompressed")
	}
	// A Content-Length over max is a 413 before any byte is read: with
	// Expect: 100-continue (curl's, for a body over 1 MB) reading would
	// first invite the body with 100 Continue, and the connection was then
	// closed under the rest of it, so the client saw a reset, no 413.
	if r.ContentLength > max {
		return nil, &http.MaxBytesError{Limit: max}
	}
	// Any Content-Type is read as JSON: curl -d sends a form type, and
	// browsers send text/plain to avoid a CORS preflight.
	// A body is read under a deadline so that a slow sender cannot hold a
	// handler; the deadline is lifted again before the long poll. A body
	// that could not be read keeps it: before it answers, net/http reads
	// what is left of a body the handler did not finish, and without the
	// deadline it waited for bytes that never came (the sender heard
	// nothing); past it, the 400 is written and the connection closed.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(bodyTimeout))
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err == nil {
		_ = rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, badRequest("body", fmt.Sprintf("did not arrive in full within %v", bodyTimeout))
		}
		return nil, badRequest("body", "could not be read: "+err.Error())
	}
	if !utf8.Valid(b) {
		return nil, badRequest("body", "is not UTF-8")
	}
	return b, nil
}

// seconds converts API seconds to a Duration, saturating instead of
// overflowing (the engine then refuses it as over the maximum). A value
// too small for a nanosecond keeps its sign: 1e-300 is 1 ns, -1e-300 is
// -1 ns.
func seconds(f float64) time.Duration {
	switch {
	case f*1e9 >= math.MaxInt64:
		return math.MaxInt64
	case f*1e9 <= math.MinInt64:
		return math.MinInt64
	}
	d := time.Duration(f * 1e9)
	if d == 0 && f > 0 {
		d = 1
	} else if d == 0 && f < 0 {
		d = -1
	}
	return d
}
