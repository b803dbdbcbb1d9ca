package api_test

import (
	"strings"
	"testing"

	"github.com/baton-io/baton/api"
)

// An address whose port no TCP connection can have (0, above 65535) is
// refused by NewClient with a message naming the port, as a path or a
// query is: before, it was taken and every call failed "unavailable"
// (the CLI's exit 1, where --addr with a bad port is a usage error).
func TestAddressPortOutOfRange(t *testing.T) {
	for _, bad := range []string{"http://x:0", "http://x:65536", "http://x:99999", "https://x:100000", "baton://x:0", "x:70000", "http://x:00"} {
		c, err := api.NewClient(api.Config{Addresses: []string{bad}})
		if err == nil {
			c.Close()
			t.Errorf("NewClient accepted address %q", bad)
			continue
		}
		if !strings.Contains(err.Error(), "port") {
			t.Errorf("NewClient(%q): %v; want it to name the port", bad, err)
		}
	}
	for _, good := range []string{"http://x:1", "http://x:65535", "baton://x:7071", "x:7070", "http://x"} {
		c, err := api.NewClient(api.Config{Addresses: []string{good}})
		if err != nil {
			t.Errorf("NewClient(%q): %v", good, err)
			continue
		}
		c.Close()
	}
}
