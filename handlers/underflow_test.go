package handlers_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// A positive number of seconds below the node's resolution (1 ns: 1e-12,
// or 1e-400 and a decimal with hundreds of zeros, too small for a
// float64) is refused as such, a 400 naming its field (in the query or a
// JSON body): it has no duration on the node. It is never "0 = no limit"
// (wait=1e-400 on a held lock once waited for ever: the wait-0 and
// try-lock confusions of Redisson's tryLock(0) reports), and no longer
// rounded up to 1 ns either, another request than the one sent; 1 ns
// itself is a lease and a wait like any other.
func TestSecondsBelowTheResolutionRefused(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	held := e.acquire("/locks/u?lease=600")
	tiny := "0." + strings.Repeat("0", 400) + "1"
	for _, field := range []string{"lease", "wait"} {
		for i, v := range []string{"1e-12", "0.0000000009", "1e-300", "1e-400", tiny} {
			// A wait on the held lock, a lease on a free key: either
			// answers at once when taken as 1 ns.
			path := "/locks/u"
			if field == "lease" {
				path = "/locks/free-" + strconv.Itoa(i)
			}
			for _, r := range []resp{
				e.do(http.MethodPost, path+"?"+field+"="+v, ""),
				e.do(http.MethodPost, path, `{"`+field+`":`+v+`}`),
			} {
				if eb := r.errBody(t); r.code != http.StatusBadRequest || eb.Field != field || eb.Message != field+": "+engine.BelowResolution(field == "wait") {
					t.Fatalf("%s=%.12s…: %d %s; want 400 naming %s below the resolution", field, v, r.code, r.body, field)
				}
			}
		}
	}
	if r := e.do(http.MethodPost, "/locks/u?wait=0.000000001", ""); r.code != http.StatusRequestTimeout {
		t.Fatalf("wait=1 ns on a held lock: %d %s; want 408", r.code, r.body)
	}
	if r := e.do(http.MethodPost, "/locks/v?lease=0.000000001", ""); r.code != http.StatusOK {
		t.Fatalf("lease=1 ns: %d %s; want a grant", r.code, r.body)
	}
	for _, w := range []string{"-1e-400", "-" + tiny} {
		if r := e.do(http.MethodPost, "/locks/u?wait="+w, ""); r.code != http.StatusBadRequest || r.errBody(t).Field != "wait" {
			t.Fatalf("wait=%.13s…: %d %s; want 400 naming wait", w, r.code, r.body)
		}
	}
	e.release("u", held.Token)
}
