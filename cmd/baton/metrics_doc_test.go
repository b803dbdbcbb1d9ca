package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baton-io/baton/handlers"
)

// TestReadmeListsEveryMetric: every metric a node exports (the handlers'
// registry, the log's and the replication's collectors) has a row in the
// README's metrics table, so an operator finds each name /metrics shows.
func TestReadmeListsEveryMetric(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "### Metrics\n")
	if !ok {
		t.Fatal("README has no ### Metrics section")
	}
	table, _, _ = strings.Cut(table, "\n### ")
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| (`[a-z_]+(?:\\{[a-z_,]*\\})?`(?:, `[a-z_]+(?:\\{[a-z_,]*\\})?`)*) \\|").FindAllStringSubmatch(table, -1) {
		for _, name := range strings.Split(m[1], ", ") {
			name, _, _ = strings.Cut(strings.Trim(name, "`"), "{")
			rows[name] = true
		}
	}

	names := map[string]bool{}
	fam, err := handlers.NewMetrics().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fam {
		if strings.HasPrefix(f.GetName(), "baton_") {
			names[f.GetName()] = true
		}
	}
	fqName := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	descs := make(chan *prometheus.Desc, 100)
	walCollector{}.Describe(descs)
	replCollector{}.Describe(descs)
	close(descs)
	for d := range descs {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		names[m[1]] = true
	}
	if len(names) < 20 {
		t.Fatalf("only %d metrics found: %v", len(names), names)
	}
	for name := range names {
		if !rows[name] {
			t.Errorf("%s is exported but has no row in the README's metrics table", name)
		}
	}
}
