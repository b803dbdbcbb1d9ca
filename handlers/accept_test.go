package handlers

import (
	"net/http/httptest"
	"testing"
)

// Accept negotiation between JSON and text/plain (RFC 9110 section
// 12.5.1): weights, wildcards, and the order of equal weights.
func TestWantsText(t *testing.T) {
	for _, tc := range []struct {
		accept string
		text   bool
	}{
		{"", false},
		{"*/*", false},
		{"application/json", false},
		{"text/plain", true},
		{"text/*", true},
		{"text/plain; charset=utf-8", true},
		{"text/plain, application/json", true},
		{"application/json, text/plain", false},
		{"application/json;q=0.1, text/plain", true},
		{"text/plain;q=0.5, application/json", false},
		{"text/plain;q=0, */*", false},
		{"text/*;q=0.9, */*;q=0.1", true},
		{"text/html", false},
		{"text/html, */*;q=0.8", false},
		{"TEXT/PLAIN", true},
		{"text/plain;q=bogus", true},
	} {
		r := httptest.NewRequest("GET", "/locks/k", nil)
		if tc.accept != "" {
			r.Header.Set("Accept", tc.accept)
		}
		if got := wantsText(r); got != tc.text {
			t.Errorf("Accept %q: wantsText = %v, want %v", tc.accept, got, tc.text)
		}
	}
}
