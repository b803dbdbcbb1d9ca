package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/chromedp/chromedp"

	"github.com/baton-io/baton/api"
)

// TestStatusPageShowsKeysUnambiguously: a key may hold any character but
// a control character (SPEC section 2), so also format characters that
// show as nothing (U+200B zero width space) or reorder the text around
// them (U+202E right-to-left override), and runs of spaces, which HTML
// collapses into one. The page showed "inv/a" and "inv/a\u200b" as the
// same key, "inv/b  c" as "inv/b c", and "inv/x\u202eexe.txt" as
// "inv/xtxt.exe" — in the table, in the events and in the confirmation of
// a forced release, where the override also turned the rest of the
// question around. An operator must see which key a row is: every key the
// page shows reads differently from every other, with no format
// character left to reorder or hide text.
func TestStatusPageShowsKeysUnambiguously(t *testing.T) {
	browserTest(t)
	n := startNode(t, freeAddr(t, loopback(4)), nil, nil)
	c, err := api.NewClient(api.Config{Addresses: []string{n.url}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	keys := []string{"inv/a", "inv/a\u200b", "inv/b c", "inv/b  c", "inv/x\u202eexe.txt", "inv/xtxt.exe", "inv/\u2066d\u2069", "inv/d", "inv/e\u00a0f", "inv/e f"}
	for _, key := range keys {
		if _, err := c.Acquire(context.Background(), key, api.WithLease(120*time.Second)); err != nil {
			t.Fatalf("acquire %q: %v", key, err)
		}
	}
	ctx, cons := tab(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(n.url+"/")); err != nil {
		t.Fatal(err)
	}
	// What a person reads: the rendered text (innerText) of each key in
	// the table and in the events.
	type shown struct {
		Rows    map[string]string `json:"rows"`
		Events  map[string]string `json:"events"`
		Confirm string            `json:"confirm"`
	}
	var got shown
	waitFor(t, 5*time.Second, "every key's row and grant event", func() (bool, string) {
		got = eval[shown](t, ctx, `(() => {
			const rows = {}, events = {};
			for (const tr of document.querySelectorAll('#locks tbody tr')) rows[tr.dataset.key] = tr.querySelector('td.key').innerText;
			for (const li of document.querySelectorAll('#events li[data-kind="grant"]')) events[li.dataset.key] = li.querySelector('.key').innerText;
			return { rows, events };
		})()`)
		return len(got.Rows) == len(keys) && len(got.Events) == len(keys), fmt.Sprintf("%q", got)
	})
	k, _ := json.Marshal("inv/x\u202eexe.txt")
	got.Confirm = eval[string](t, ctx, `(() => {
		let asked = '';
		window.confirm = (m) => { asked = m; return false; };
		[...document.querySelectorAll('#locks tbody tr')].find((r) => r.dataset.key === `+string(k)+`).querySelector('button.force').click();
		return asked;
	})()`)
	hidden := func(s string) bool {
		return strings.IndexFunc(s, func(r rune) bool { return unicode.Is(unicode.Cf, r) || (unicode.IsSpace(r) && r != ' ' && r != '\n') }) >= 0
	}
	for what, m := range map[string]map[string]string{"table": got.Rows, "events": got.Events} {
		seen := map[string]string{}
		for _, key := range keys {
			s, ok := m[key]
			if !ok {
				t.Errorf("%s: no %q", what, key)
				continue
			}
			if hidden(s) {
				t.Errorf("%s: key %q shows as %q, with characters that show as nothing or reorder the text", what, key, s)
			}
			if other, dup := seen[s]; dup {
				t.Errorf("%s: keys %q and %q both read %q", what, other, key, s)
			}
			seen[s] = key
		}
	}
	if got.Confirm == "" {
		t.Errorf("the forced release asked no confirmation")
	} else if hidden(got.Confirm) {
		t.Errorf("the forced release's confirmation %q holds characters that show as nothing or reorder the text", got.Confirm)
	}
	if st, err := c.Status(context.Background(), "inv/x\u202eexe.txt"); err != nil || st.Holder == nil {
		t.Errorf("a forced release not confirmed changed the lock: %+v, %v", st, err)
	}
	screenshot(t, ctx, "status-page-invisible-keys.png")
	if errs := cons.errors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}
