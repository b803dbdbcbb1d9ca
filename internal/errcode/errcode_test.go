package errcode

import (
	"errors"
	"fmt"
	"testing"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

func TestOf(t *testing.T) {
	cases := []struct {
		err   error
		code  string
		field string
		known bool
	}{
		{engine.ErrTimeout, api.CodeTimeout, "", true},
		{fmt.Errorf("wrapped: %w", engine.ErrNotHolder), api.CodeNotHolder, "", true},
		{engine.ErrNotHeld, api.CodeNotHeld, "", true},
		{engine.ErrTooManyWaiters, api.CodeTooManyWaiters, "", true},
		{engine.ErrClosed, api.CodeUnavailable, "", true},
		{engine.ErrUnavailable, api.CodeUnavailable, "", true},
		{fmt.Errorf("%w: disk full", engine.ErrNotWritten), api.CodeUnavailable, "", true},
		{engine.CheckKey(""), api.CodeInvalidArgument, "key", true},
		{fmt.Errorf("wrapped: %w", &engine.KeyReusedError{Field: "owner"}), api.CodeKeyReused, "owner", true},
		{errors.New("disk on fire"), api.CodeInternal, "", false},
	}
	for _, c := range cases {
		code, field, msg, known := Of(c.err)
		if code != c.code || field != c.field || known != c.known || msg == "" {
			t.Errorf("Of(%v) = %q, %q, %q, %v; want %q, %q, a message, %v", c.err, code, field, msg, known, c.code, c.field, c.known)
		}
	}
}

// A change made but not written must not be answered like one refused:
// the first may stand, the second changed nothing.
func TestNotWrittenIsNotNothingChanged(t *testing.T) {
	_, _, notWritten, _ := Of(fmt.Errorf("%w: disk full", engine.ErrNotWritten))
	_, _, refused, _ := Of(engine.ErrUnavailable)
	if notWritten == refused {
		t.Fatalf("ErrNotWritten and ErrUnavailable answer the same message %q", refused)
	}
}
