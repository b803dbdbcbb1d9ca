package native_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/native"
)

// The README's table of native requests and answers (section "Native
// protocol") is the protocol's user-facing description: this test holds
// the server to it. Its ops must be the server's, and each row's first
// request, filled in, must be answered in the shape of the row's first
// answer (literal fields equal, <key> the key sent, numbers where the
// README has a token, a lease or a time).
func TestReadmeNativeTableMatchesTheServer(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	start := strings.Index(readme, "\n## Native protocol\n")
	if start < 0 {
		t.Fatal("README has no ## Native protocol section")
	}
	section := readme[start+1:]
	section = section[:strings.Index(section, "\n## ")]

	type row struct{ op, request, answer string }
	var rows []row
	code := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(strings.ReplaceAll(line, `\|`, "¦"), "|")
		if len(cells) != 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue // not a row, or a row about any request ("any error")
		}
		req, ans := code.FindStringSubmatch(cells[1]), code.FindStringSubmatch(cells[2])
		if req == nil || ans == nil {
			t.Fatalf("README row %q: no request or no answer in backquotes", line)
		}
		rows = append(rows, row{op: strings.Fields(req[1])[0], request: req[1], answer: ans[1]})
	}
	var ops []string
	for _, r := range rows {
		ops = append(ops, r.op)
	}
	serverOps := []string{native.OpAcquire, native.OpRelease, native.OpRenew, native.OpCancel, native.OpPing, native.OpAuth}
	slices.Sort(ops)
	slices.Sort(serverOps)
	if !slices.Equal(ops, serverOps) {
		t.Fatalf("the README's native table has the ops %q, the server %q", ops, serverOps)
	}

	e := newEnv(t, engine.Config{}, native.Config{AuthTokens: []string{"secret"}})
	c := e.dial()
	token := ""
	fill := map[string]string{"<key>": "k", "<lease>": "10", "<wait>": "-", "<id>": "i1", "<word>": "w1"}
	// AUTH first (the server wants it on the first line), then A, N and R
	// (the grant's token kept for the renewal and the release), then the
	// others in the README's order.
	slices.SortStableFunc(rows, func(a, b row) int {
		rank := map[string]int{native.OpAuth: 0, native.OpAcquire: 1, native.OpRenew: 2, native.OpRelease: 3}
		ra, ok := rank[a.op]
		if !ok {
			ra = 4
		}
		rb, ok := rank[b.op]
		if !ok {
			rb = 4
		}
		return ra - rb
	})
	for _, r := range rows {
		var fields []string
		for _, f := range strings.Fields(r.request) {
			if strings.HasPrefix(f, "[") {
				break // options
			}
			switch {
			case f == "<token>" && r.op == native.OpAuth:
				f = "secret"
			case f == "<token>":
				f = token
			case fill[f] != "":
				f = fill[f]
			}
			fields = append(fields, f)
		}
		line := strings.Join(fields, " ")
		c.send(line)
		got := c.read()
		if r.op == native.OpAcquire {
			if f := strings.Fields(got); len(f) > 3 {
				token = f[3]
			}
		}
		want := strings.Fields(r.answer)
		gotF := strings.Fields(got)
		if len(gotF) != len(want) {
			t.Errorf("README: %q answered %q; the server answered %q (%q)", r.request, r.answer, got, line)
			continue
		}
		for i, w := range want {
			var ok bool
			switch w {
			case "<key>":
				ok = gotF[i] == fill["<key>"]
			case "<word>":
				ok = gotF[i] == fill["<word>"]
			case "<token>", "<lease>", "<expires-unix-ms>":
				ok = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`).MatchString(gotF[i])
			default:
				ok = gotF[i] == w
			}
			if !ok {
				t.Errorf("README: %q answered %q; the server answered %q to %q (field %d)", r.request, r.answer, got, line, i+1)
				break
			}
		}
	}
}
