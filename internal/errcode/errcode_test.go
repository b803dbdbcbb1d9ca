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
		{engine.CheckKey(""), api.CodeInvalidArgument, "key", true},
		{errors.New("disk on fire"), api.CodeInternal, "", false},
	}
	for _, c := range cases {
		code, field, msg, known := Of(c.err)
		if code != c.code || field != c.field || known != c.known || msg == "" {
			t.Errorf("Of(%v) = %q, %q, %q, %v; want %q, %q, a message, %v", c.err, code, field, msg, known, c.code, c.field, c.known)
		}
	}
}
