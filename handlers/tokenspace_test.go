package handlers

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

// Fencing tokens exhausted (a token-hwm or a peer's token near 2^53) is a
// 500 that says so: before, the answer was a bare "internal error" and
// the operator had only the log to learn that no grant could ever be
// made.
func TestTokenSpaceIsAnInternalErrorThatSaysWhy(t *testing.T) {
	status, body := classify(fmt.Errorf("acquire: %w", engine.ErrTokenSpace))
	if status != http.StatusInternalServerError || body.Code != api.CodeInternal || !strings.Contains(body.Message, "fencing tokens are exhausted") {
		t.Fatalf("classify(ErrTokenSpace) = %d %+v; want 500 internal saying the fencing tokens are exhausted", status, body)
	}
	if status, body := classify(fmt.Errorf("disk on fire")); status != http.StatusInternalServerError || body.Message != "internal error" {
		t.Fatalf("classify(unknown) = %d %+v; want 500 \"internal error\"", status, body)
	}
}
