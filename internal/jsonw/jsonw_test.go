package jsonw_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/baton-io/baton/internal/jsonw"
)

// TestNoHTMLEscaping: <, > and & are written as themselves; what JSON
// requires (quotes, backslashes, control characters) and U+2028/U+2029 are
// escaped as encoding/json escapes them, and the bytes read back the same.
func TestNoHTMLEscaping(t *testing.T) {
	v := map[string]string{"key": "a&b<c>", "x": "q\"\\\n\u2028"}
	const want = `{"key":"a&b<c>","x":"q\"\\\n\u2028"}`
	b, err := jsonw.Marshal(v)
	if err != nil || string(b) != want {
		t.Fatalf("Marshal: %s, %v; want %s", b, err, want)
	}
	var buf bytes.Buffer
	if err := jsonw.NewEncoder(&buf).Encode(v); err != nil || buf.String() != want+"\n" {
		t.Fatalf("NewEncoder: %q, %v; want %q", buf.String(), err, want+"\n")
	}
	var back map[string]string
	if err := json.Unmarshal(b, &back); err != nil || back["key"] != v["key"] || back["x"] != v["x"] {
		t.Fatalf("read back %q, %v", back, err)
	}
	if _, err := jsonw.Marshal(func() {}); err == nil {
		t.Fatal("Marshal of a func: no error")
	}
}
