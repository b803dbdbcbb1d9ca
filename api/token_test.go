package api_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/baton-io/baton/api"
)

// A Token no Authorization header (or native AUTH line) can carry: a
// newline from a file read whole, a space, "…" pasted from the README.
// Over HTTP every call failed "service unavailable: … invalid header
// field value", over baton:// "service unavailable: no connection:
// invalid_argument (fields)": the caller's argument, reported as a node
// that did not answer. NewClient refuses it, naming Token and not
// echoing the secret.
func TestNewClientRefusesATokenNoHeaderCanCarry(t *testing.T) {
	for _, addr := range []string{"http://127.0.71.9:9", "baton://127.0.71.9:9"} {
		for _, token := range []string{"secret\n", "sec ret", "secr…t", "sec\x00ret", "\x7f"} {
			c, err := api.NewClient(api.Config{Addresses: []string{addr}, Token: token})
			if err == nil {
				c.Close()
				t.Errorf("%s: Token %q accepted; want an error naming Token", addr, token)
				continue
			}
			if !errors.Is(err, api.ErrTokenUnsendable) || !strings.Contains(err.Error(), "Token") || strings.Contains(err.Error(), "sec") {
				t.Errorf("%s: Token %q: err %q; want one that names Token and does not echo it", addr, token, err)
			}
		}
		c, err := api.NewClient(api.Config{Addresses: []string{addr}, Token: "s3cr!t~token"})
		if err != nil {
			t.Fatalf("%s: a printable ASCII token refused: %v", addr, err)
		}
		c.Close()
	}
}
