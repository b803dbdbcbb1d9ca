// Package jsonw is the one place that says how baton writes JSON: as
// encoding/json does, without its HTML escaping. encoding/json writes <, >
// and & in strings as \u003c, \u003e and \u0026 by default, for JSON pasted
// into HTML; baton's JSON is read by curl users, shell scripts and JSON
// parsers, never pasted into HTML (the status page sets keys and owners as
// text, never as markup), so a key "a&b" comes back as "a&b". U+2028 and
// U+2029 are still escaped, as encoding/json always does.
//
// Every writer of JSON in the node (handlers' answers and events, the
// cluster's peer endpoints, api's wire types) and the CLI goes through it.
package jsonw

import (
	"bytes"
	"encoding/json"
	"io"
)

// NewEncoder is json.NewEncoder(w) without HTML escaping: each Encode
// writes one value and a newline.
func NewEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// Marshal is json.Marshal without HTML escaping: v's encoding, with no
// newline; json.Marshal's errors.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := NewEncoder(&buf).Encode(v); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return b[:len(b)-1], nil // without Encode's newline
}
