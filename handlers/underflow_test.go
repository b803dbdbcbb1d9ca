package handlers_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// A positive number of seconds too small for a float64 (1e-400, or a
// decimal with hundreds of zeros) is still a positive number: a wait of
// it is the shortest wait (a try-lock), never "0 = no limit", and a lease
// of it is the shortest lease, as for 1e-300. It underflowed to 0 before:
// wait=1e-400 on a held lock waited for ever (the wait-0 and try-lock
// confusions of Redisson's tryLock(0) reports), lease=1e-400 was refused
// while lease=1e-300 was granted.
func TestSecondsThatUnderflowAreNotZero(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	held := e.acquire("/locks/u?lease=600")
	tiny := "0." + strings.Repeat("0", 400) + "1"
	for _, w := range []string{"1e-400", tiny} {
		done := make(chan resp, 1)
		go func() { done <- e.do(http.MethodPost, "/locks/u?wait="+w, "") }()
		select {
		case r := <-done:
			if r.code != http.StatusRequestTimeout || r.errBody(t).Code != api.CodeTimeout {
				t.Fatalf("wait=%.12s… on a held lock: %d %s; want 408 timeout", w, r.code, r.body)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("wait=%.12s… on a held lock still waits after 20 s: taken as 0, no limit", w)
		}
		r := e.do(http.MethodPost, "/locks/u", `{"wait":`+w+`}`)
		if r.code != http.StatusRequestTimeout {
			t.Fatalf("wait %.12s… in the body: %d %s; want 408", w, r.code, r.body)
		}
	}
	for _, l := range []string{"1e-300", "1e-400", tiny} {
		if r := e.do(http.MethodPost, "/locks/v?lease="+l, ""); r.code != http.StatusOK {
			t.Fatalf("lease=%.12s…: %d %s; want a grant of the shortest lease, as for 1e-300", l, r.code, r.body)
		}
	}
	for _, w := range []string{"-1e-400", "-" + tiny} {
		if r := e.do(http.MethodPost, "/locks/u?wait="+w, ""); r.code != http.StatusBadRequest || r.errBody(t).Field != "wait" {
			t.Fatalf("wait=%.13s…: %d %s; want 400 naming wait", w, r.code, r.body)
		}
	}
	e.release("u", held.Token)
}
