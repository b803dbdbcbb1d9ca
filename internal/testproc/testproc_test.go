package testproc

import "testing"

// FreeAddr never hands out a port that Chromium refuses to load a page
// from (net::ERR_UNSAFE_PORT failed a status page test in CI on 10080),
// and hands out the ports beside it.
func TestBrowserRefusedPortIsSkipped(t *testing.T) {
	if !browserRefuses(10080) {
		t.Fatal("10080 (Chromium's and Firefox's restricted amanda port) is not skipped")
	}
	for _, p := range []int{10000, 10079, 10081, 32767} {
		if browserRefuses(p) {
			t.Errorf("port %d skipped; browsers load it", p)
		}
	}
}
