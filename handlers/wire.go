package handlers

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/jsonw"
)

// The answers of the hot calls (a grant, a renewal, a release) are
// appended to a buffer field by field instead of going through
// encoding/json's reflection; every other answer is encoded by
// encoding/json (writeJSON). The bytes are encoding/json's own, newline
// included: TestWireMatchesEncodingJSON compares them for many values,
// keys and node URLs that need escaping among them. encoding/json here
// is jsonw's: without HTML escaping (<, > and & are written as they are).
// A value the appenders do not know how to write exactly as encoding/json
// (a string that needs escaping, a float in exponent form, a time outside
// RFC 3339) is handed to encoding/json for that value alone.

// appendGrant appends g as encoding/json's Encoder writes it: one line.
func appendGrant(b []byte, g *api.Grant) ([]byte, error) {
	var err error
	b = append(b, `{"key":`...)
	b = appendJSONString(b, g.Key)
	b = append(b, `,"token":`...)
	b = strconv.AppendUint(b, g.Token, 10)
	b = append(b, `,"lease":`...)
	if b, err = appendJSONFloat(b, g.Lease); err != nil {
		return b, err
	}
	b = append(b, `,"expires_at":`...)
	if b, err = appendJSONTime(b, g.ExpiresAt); err != nil {
		return b, err
	}
	b = append(b, `,"node":`...)
	b = appendJSONString(b, g.Node)
	return append(b, "}\n"...), nil
}

// appendReleased appends r as encoding/json's Encoder writes it: one line.
func appendReleased(b []byte, r *api.Released) []byte {
	b = append(b, `{"key":`...)
	b = appendJSONString(b, r.Key)
	b = append(b, `,"released":`...)
	b = strconv.AppendBool(b, r.Released)
	return append(b, "}\n"...)
}

// appendJSONString appends s as a JSON string, as jsonw writes it (no
// HTML escaping: <, > and & as they are).
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			q, _ := jsonw.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendJSONFloat appends f as encoding/json writes a float64: the
// shortest decimal that reads back as f, in exponent form below 1e-6 and
// from 1e21. NaN and the infinities are an error, as in encoding/json.
func appendJSONFloat(b []byte, f float64) ([]byte, error) {
	if abs := math.Abs(f); abs == 0 || (abs >= 1e-6 && abs < 1e21) {
		return strconv.AppendFloat(b, f, 'f', -1, 64), nil
	}
	q, err := json.Marshal(f)
	return append(b, q...), err
}

// appendJSONTime appends t as its MarshalJSON does: RFC 3339 with
// nanoseconds, quoted; a year outside 0-9999 or a zone offset that RFC
// 3339 cannot write is an error.
func appendJSONTime(b []byte, t time.Time) ([]byte, error) {
	n0 := len(b)
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	if b[n0+len(`"9999`)] == '-' && b[len(b)-1] == 'Z' {
		return append(b, '"'), nil
	}
	// Not UTC, or a year of another width: MarshalJSON checks it.
	q, err := t.MarshalJSON()
	return append(b[:n0], q...), err
}

// Header values the answers share. net/http only reads them (an Add
// appends to a copy: each has a capacity of one), so that setting them
// costs no allocation.
var (
	jsonContentType = []string{"application/json; charset=utf-8"}
	nosniff         = []string{"nosniff"} // X-Content-Type-Options, on every answer (ServeHTTP)
	textContentType = []string{"text/plain; charset=utf-8"}
	// contentLengths[n] is the Content-Length header value of an n-byte
	// body, for the sizes most answers have.
	contentLengths = func() [][]string {
		v := make([][]string, 1024)
		for n := range v {
			v[n] = []string{strconv.Itoa(n)}
		}
		return v
	}()
)

// setContentLength sets the Content-Length header of an n-byte body.
func setContentLength(h http.Header, n int) {
	if n < len(contentLengths) {
		h["Content-Length"] = contentLengths[n]
		return
	}
	h["Content-Length"] = []string{strconv.Itoa(n)}
}

// jsonBuffer is a buffer answers are encoded in; an io.Writer for
// encoding/json.
type jsonBuffer struct{ b []byte }

func (j *jsonBuffer) Write(p []byte) (int, error) {
	j.b = append(j.b, p...)
	return len(p), nil
}

// jsonBuffers recycles the buffers answers are encoded in.
var jsonBuffers = sync.Pool{New: func() any { return &jsonBuffer{b: make([]byte, 0, 512)} }}

// putJSONBuffer returns j to jsonBuffers unless it grew large.
func putJSONBuffer(j *jsonBuffer) {
	if cap(j.b) <= 64<<10 {
		j.b = j.b[:0]
		jsonBuffers.Put(j)
	}
}

// writeJSON writes v as the JSON body with status. The body goes out with a
// Content-Length, in one write.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	j := jsonBuffers.Get().(*jsonBuffer)
	defer putJSONBuffer(j)
	if err := jsonw.NewEncoder(j).Encode(v); err != nil {
		return err
	}
	return writeBody(w, status, jsonContentType, j.b)
}

// writeGrant writes g as the JSON body of a 200 answer, like writeJSON;
// flushHeaders as writeBodyAfter's.
func writeGrant(w http.ResponseWriter, g *api.Grant, flushHeaders bool) error {
	j := jsonBuffers.Get().(*jsonBuffer)
	defer putJSONBuffer(j)
	var err error
	if j.b, err = appendGrant(j.b, g); err != nil {
		return err
	}
	return writeBodyAfter(w, http.StatusOK, jsonContentType, j.b, flushHeaders)
}

// writeReleased writes r as the JSON body of a 200 answer, like writeJSON.
func writeReleased(w http.ResponseWriter, r *api.Released) error {
	j := jsonBuffers.Get().(*jsonBuffer)
	defer putJSONBuffer(j)
	j.b = appendReleased(j.b, r)
	return writeBody(w, http.StatusOK, jsonContentType, j.b)
}

// writeText writes the parts as a text/plain body with status, in one
// write with a Content-Length (an empty body for none).
func writeText(w http.ResponseWriter, status int, body []byte, more ...byte) error {
	return writeBody(w, status, textContentType, append(body, more...))
}

// writeBody writes body with status, its Content-Type and a
// Content-Length: net/http then sends the answer in one write, instead of
// a chunked body and its terminator.
func writeBody(w http.ResponseWriter, status int, contentType []string, body []byte) error {
	return writeBodyAfter(w, status, contentType, body, false)
}

// writeBodyAfter is writeBody; with flushHeaders it first flushes the
// status and headers alone and returns the flush's error (the body is
// then not written). Over HTTP/2 that is a HEADERS frame now, and the
// body's DATA frame, ending the stream, when the handler returns.
func writeBodyAfter(w http.ResponseWriter, status int, contentType []string, body []byte, flushHeaders bool) error {
	h := w.Header()
	h["Content-Type"] = contentType
	setContentLength(h, len(body))
	w.WriteHeader(status)
	if flushHeaders {
		if err := http.NewResponseController(w).Flush(); err != nil {
			return err
		}
	}
	_, err := w.Write(body)
	return err
}
