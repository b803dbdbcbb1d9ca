// Package keyrule is the one place of the rule for lock keys (SPEC
// section 2: 1 to MaxBytes bytes of UTF-8 with no control characters) and
// of the sentences that say what is wrong with one. The node checks keys
// with it (engine.CheckKey, engine.CheckKeyText), and the Go client
// (package api) checks a key with it before it sends it over the native
// protocol, where a key the node cannot read would close the connection:
// both say the same thing about the same key. It imports nothing of the
// project, so that api stays free of the engine.
package keyrule

import (
	"fmt"
	"unicode/utf8"
)

// MaxBytes is the longest key, in bytes of UTF-8.
const MaxBytes = 256

// Problem says what is wrong with s as a key or a part of one (a
// listing's prefix, the key a page starts after): its length, its UTF-8,
// a control character (C0, DEL, C1); "" when nothing is. An empty s is
// not checked here: it is a part of every key, and no key (Empty).
func Problem(s string) string {
	switch {
	case len(s) > MaxBytes:
		return fmt.Sprintf("is %d bytes; at most %d are allowed", len(s), MaxBytes)
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	}
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r < 0xa0) {
			return fmt.Sprintf("contains the control character %U", r)
		}
	}
	return ""
}

// Empty is what is wrong with an empty key.
const Empty = "must not be empty"
