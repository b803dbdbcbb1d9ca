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
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-playground/validator/v10"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

// lockParams are the parameters of a /locks/{key} call after parsing, in
// the units of the API (seconds), checked by the validator.
type lockParams struct {
	Key   string   `json:"key" validate:"lockkey"`
	Lease *float64 `json:"lease" validate:"omitnil,gt=0"`
	Wait  *float64 `json:"wait" validate:"omitnil,gte=0"`
	Token *uint64  `json:"token" validate:"omitnil,gt=0,lt=9007199254740992"`
	ID    string   `json:"Idempotency-Key" validate:"max=256,printascii"`
	// Ticket is a server ticket carried by a redirect (query only).
	Ticket string `json:"ticket"`
}

func newValidator() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		return strings.Split(f.Tag.Get("json"), ",")[0]
	})
	_ = v.RegisterValidation("lockkey", func(fl validator.FieldLevel) bool {
		return engine.CheckKey(fl.Field().String()) == nil
	})
	return v
}

// validate runs the validator and turns its first complaint into a 400
// naming the field.
func (s *Server) validate(p *lockParams) error {
	err := s.v.Struct(p)
	if err == nil {
		return nil
	}
	var ves validator.ValidationErrors
	if !errors.As(err, &ves) || len(ves) == 0 {
		return err
	}
	fe := ves[0]
	field := fe.Field()
	switch {
	case fe.Tag() == "lockkey":
		return engine.CheckKey(p.Key)
	case field == "lease" && fe.Tag() == "gt":
		return badRequest(field, "must be greater than 0 seconds")
	case field == "wait":
		return badRequest(field, "must be 0 (no limit) or more seconds")
	case field == "token":
		return badRequest(field, "must be a fencing token: an integer from 1 to 2^53-1")
	case field == api.HeaderIdempotencyKey:
		return badRequest(field, "must be at most 256 printable ASCII characters")
	}
	return badRequest(field, fmt.Sprintf("failed the %q check", fe.Tag()))
}

// allowed lists the parameters each method takes.
var allowed = map[string][]string{
	http.MethodPost:   {"lease", "wait", "ticket"},
	http.MethodDelete: {"token"},
	http.MethodPatch:  {"token", "lease"},
}

// parseLockParams reads the key from the path and lease, wait and token
// from the query string, a JSON body and (token) the Lock-Token header.
// Naming one parameter in two places, an unknown parameter, a malformed
// value or body is a 400 that names the field; a body over maxBody a 413.
func (s *Server) parseLockParams(w http.ResponseWriter, r *http.Request) (lockParams, error) {
	var p lockParams
	p.Key = strings.TrimPrefix(r.URL.Path, "/locks/")
	if ids := r.Header.Values(api.HeaderIdempotencyKey); len(ids) > 1 {
		return p, badRequest(api.HeaderIdempotencyKey, "is given more than once")
	} else if len(ids) == 1 {
		p.ID = ids[0]
	}
	names := allowed[r.Method]
	from := map[string]string{}

	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return p, badRequest("query", "is not a valid query string")
	}
	for name, vals := range q {
		if !contains(names, name) {
			return p, badRequest(name, fmt.Sprintf("is not a parameter of %s /locks/{key} (expected %s)", r.Method, strings.Join(names, ", ")))
		}
		if len(vals) != 1 {
			return p, badRequest(name, "is given more than once")
		}
		if err := p.set(name, vals[0]); err != nil {
			return p, err
		}
		from[name] = "query"
	}

	body, err := readBody(w, r, s.cfg.MaxBody)
	if err != nil {
		return p, err
	}
	if len(body) > 0 {
		if err := p.setJSON(body, names, from); err != nil {
			return p, err
		}
	}
	if h := r.Header.Get(api.HeaderLockToken); h != "" && contains(names, "token") {
		if where, ok := from["token"]; ok {
			return p, badRequest("token", "is given both in the "+where+" and in the Lock-Token header")
		}
		if err := p.set("token", h); err != nil {
			return p, err
		}
	}
	if err := s.validate(&p); err != nil {
		return p, err
	}
	if p.ID == "" && p.Ticket != "" {
		p.ID = engine.TicketID(p.Ticket)
	}
	if contains(names, "token") && p.Token == nil {
		return p, badRequest("token", "is required (query, JSON body or Lock-Token header)")
	}
	return p, nil
}

func (p *lockParams) set(name, v string) error {
	switch name {
	case "lease", "wait":
		f, err := parseSeconds(name, v)
		if err != nil {
			return err
		}
		if name == "lease" {
			p.Lease = &f
		} else {
			p.Wait = &f
		}
	case "ticket":
		// A server ticket from a redirect (SPEC section 3): it names the
		// waiter when the client sent no Idempotency-Key of its own.
		if len(v) == 0 || len(v) > 64 || strings.Trim(v, "0123456789abcdef") != "" {
			return badRequest("ticket", "must be the ticket of a redirect (hex)")
		}
		p.Ticket = v
	case "token":
		// Exactly the decimal digits the server wrote: no sign, no space,
		// no leading zero.
		t, err := strconv.ParseUint(v, 10, 64)
		if err != nil || !tokenSyntax.MatchString(v) {
			return badRequest("token", "must be a fencing token: an integer from 1 to 2^53-1, got "+quoteShort(v))
		}
		p.Token = &t
	}
	return nil
}

// Number syntaxes: seconds are plain decimals with an optional exponent
// ("0.5", ".5", "1e3"; no sign "+", underscores, hex, Inf or NaN); tokens
// are canonical decimals.
var (
	secondsSyntax = regexp.MustCompile(`^-?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$`)
	tokenSyntax   = regexp.MustCompile(`^[1-9][0-9]*$`)
)

func parseSeconds(name, v string) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !secondsSyntax.MatchString(v) || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, badRequest(name, "must be a number of seconds, got "+quoteShort(v))
	}
	return f, nil
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
// numbers: each named once, each a parameter of the call.
func (p *lockParams) setJSON(body []byte, names []string, from map[string]string) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return badRequest("body", "must be a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return badRequest("body", "is not valid JSON: "+err.Error())
		}
		name, _ := tok.(string)
		if !contains(names, name) {
			return badRequest(name, fmt.Sprintf("is not a field of this call's body (expected %s)", strings.Join(names, ", ")))
		}
		if where, ok := from[name]; ok {
			if where == "body" {
				return badRequest(name, "is given twice in the body")
			}
			return badRequest(name, "is given both in the "+where+" and in the body")
		}
		tok, err = dec.Token()
		if err != nil {
			return badRequest("body", "is not valid JSON: "+err.Error())
		}
		n, ok := tok.(json.Number)
		if !ok {
			return badRequest(name, "must be a JSON number")
		}
		if err := p.set(name, n.String()); err != nil {
			return err
		}
		from[name] = "body"
	}
	if _, err := dec.Token(); err != nil {
		return badRequest("body", "is not valid JSON: "+err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("body", "has data after the JSON object")
	}
	return nil
}

// readBody reads at most max bytes of r's body.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil, nil
	}
	// Any Content-Type is read as JSON: curl -d sends a form type, and
	// browsers send text/plain to avoid a CORS preflight.
	// A body is read under a deadline so that a slow sender cannot hold a
	// handler; the deadline is lifted again before the long poll.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, badRequest("body", "could not be read: "+err.Error())
	}
	if !utf8.Valid(b) {
		return nil, badRequest("body", "is not UTF-8")
	}
	return b, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// seconds converts API seconds to a Duration, saturating instead of
// overflowing (the engine then refuses it as over the maximum).
func seconds(f *float64) time.Duration {
	if f == nil {
		return 0
	}
	if *f*1e9 >= math.MaxInt64 {
		return math.MaxInt64
	}
	d := time.Duration(*f * 1e9)
	if d == 0 && *f > 0 {
		d = 1
	}
	return d
}
