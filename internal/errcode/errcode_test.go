package errcode

import (
	"errors"
	"fmt"
	"strings"
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
		{&engine.LimitMismatchError{Limit: 3}, api.CodeLimitMismatch, "limit", true},
		{fmt.Errorf("grant: %w", engine.ErrTokenSpace), api.CodeInternal, "", true},
		{errors.New("disk on fire"), api.CodeInternal, "", false},
	}
	for _, c := range cases {
		code, field, msg, known := Of(c.err)
		if code != c.code || field != c.field || known != c.known || msg == "" {
			t.Errorf("Of(%v) = %q, %q, %q, %v; want %q, %q, a message, %v", c.err, code, field, msg, known, c.code, c.field, c.known)
		}
	}
}

// A limit_mismatch says the key's limit: the caller named another, and
// "name the key's limit, or none" alone left it to guess which (the
// engine's LimitMismatchError carries it; the message dropped it).
func TestLimitMismatchSaysTheKeysLimit(t *testing.T) {
	code, field, msg, known := Of(fmt.Errorf("wrapped: %w", &engine.LimitMismatchError{Limit: 3}))
	if code != api.CodeLimitMismatch || field != "limit" || !known || !strings.HasPrefix(msg, "limit: ") || !strings.Contains(msg, "limit 3") {
		t.Fatalf("Of(limit mismatch, key's limit 3) = %q, %q, %q, %v; want limit_mismatch naming limit and 3", code, field, msg, known)
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

// Each 503 says its cause and no other: a full disk (refused, or made but
// not written), a step-down while the change waited (cluster.ErrSteppedDown
// wraps engine.ErrReplaced, and the engine wraps the log's error in
// ErrNotWritten), a shutdown, no active known, every peer refusing. The
// full disk's messages said "or stepped down from the active role" too,
// a cause that answers ErrReplaced's message since step-downs were
// answered ErrReplaced.
func TestEachUnavailableSaysItsCause(t *testing.T) {
	steppedDown := fmt.Errorf("cluster: this node stepped down (%w)", engine.ErrReplaced)
	cases := []struct {
		cause   string
		err     error
		says    string
		saysNot []string
	}{
		{"disk full, nothing changed", fmt.Errorf("%w: %w", engine.ErrUnavailable, errors.New("wal: no space left on device")), "disk full", []string{"stepped down", "shutting down", "no active"}},
		{"disk full, change not written", fmt.Errorf("%w: %w", engine.ErrNotWritten, errors.New("wal: no space left on device")), "disk full", []string{"stepped down", "shutting down", "no active"}},
		{"step-down while waiting", fmt.Errorf("%w: %w", engine.ErrNotWritten, steppedDown), "stepped down", []string{"disk", "shutting down"}},
		// The log may write on: the answer names the mark, not the log.
		{"token mark unwritable", fmt.Errorf("%w: %w", engine.ErrTokenMarkUnwritable, errors.New("write token-hwm.tmp: no space left on device")), "token-hwm", []string{"its log", "stepped down", "shutting down"}},
		{"shutdown", engine.ErrClosed, "shutting down", []string{"disk", "stepped down"}},
		{"no active known", ErrNoActive, "no active node is known", []string{"disk", "stepped down", "cluster_secret"}},
		{"refused by every peer", ErrRefusedByPeers, "cluster_secret differs", []string{"disk", "stepped down"}},
	}
	seen := map[string]string{}
	for _, c := range cases {
		code, _, msg, known := Of(c.err)
		if code != api.CodeUnavailable || !known || !strings.Contains(msg, c.says) {
			t.Errorf("%s: %s %q; want unavailable saying %q", c.cause, code, msg, c.says)
		}
		for _, not := range c.saysNot {
			if strings.Contains(msg, not) {
				t.Errorf("%s: %q; says %q, another cause's", c.cause, msg, not)
			}
		}
		if other, ok := seen[msg]; ok {
			t.Errorf("%s and %s answer the same message %q", other, c.cause, msg)
		}
		seen[msg] = c.cause
	}
}
