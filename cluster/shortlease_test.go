package cluster_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/baton-io/baton/api"
)

// TestSyncLeaseEndedBeforeItsAnswerIsNotAnsweredHeld: with sync_standbys
// 1 and the only standby stopped, a change waits sync_timeout (1 s)
// before the active degrades and answers it; a grant or a renewal whose
// lease is shorter than that wait has ended by then, and the lock may be
// the next waiter's. It must not be answered 200 (a tester's curl got the
// token of a grant whose lease had ended 0.7 s before, in the same
// millisecond as the next holder's grant): the acquire is answered 410
// grant_ended, the renewal 404 not_held, and the key is free for the next
// acquire at once.
func TestSyncLeaseEndedBeforeItsAnswerIsNotAnsweredHeld(t *testing.T) {
	c := newCluster(t, 2, false, "--sync-standbys", "1", "--sync-timeout", "1s")
	c.args = map[int][]string{0: {"--native-listen", freeAddr(t, nodeHost(0))}}
	c.startAll()
	c.waitActive(0, 1)
	active := "http://" + c.nodes[0].listen
	for _, change := range []string{"grant", "renewal", "native grant", "native renewal"} {
		t.Run(strings.ReplaceAll(change, " ", "_"), func(t *testing.T) {
			key := "short-" + strings.ReplaceAll(change, " ", "-")
			var held api.Grant
			if strings.HasSuffix(change, "renewal") {
				held = c.acquire(0, key, "lease=60")
				c.waitHolder(1, key, held.Token)
			}
			c.waitDegraded(0, false)
			c.stopStandby(t, 1)
			var a answer
			var err error
			want, code := http.StatusGone, api.CodeGrantEnded
			switch change {
			case "grant":
				a, err = do(http.MethodPost, active+"/locks/"+key+"?lease=0.3")
			case "renewal":
				a, err = do(http.MethodPatch, fmt.Sprintf("%s/locks/%s?lease=0.2", active, key), "Lock-Token", fmt.Sprint(held.Token))
				want, code = http.StatusNotFound, api.CodeNotHeld
			case "native grant":
				a = nativeLine(c, "A "+key+" 0.3 -")
				want, code = 0, "A "+key+" E "+api.CodeGrantEnded+" "
			case "native renewal":
				a = nativeLine(c, fmt.Sprintf("N %s %d 0.2", key, held.Token))
				want, code = 0, "N "+key+" E "+api.CodeNotHeld+" "
			}
			if err != nil {
				t.Fatal(err)
			}
			if want == 0 && !strings.HasPrefix(a.body, code) || want != 0 && (a.status != want || !strings.Contains(a.body, `"`+code+`"`)) {
				t.Fatalf("a %s with a lease shorter than the wait for the stopped standby: %d %s, want %d %s", change, a.status, a.body, want, code)
			}
			if got := c.holder(0, key); got != 0 {
				t.Fatalf("after the %s answered %d, the active shows %s held by %d", change, a.status, key, got)
			}
		})
	}
}
