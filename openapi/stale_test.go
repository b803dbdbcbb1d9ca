package openapi_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/baton-io/baton/openapi"
)

// TestDocumentIsCurrent regenerates the document with scripts/openapi.sh
// (swag at its pinned version) into a temporary directory and fails when
// the committed openapi/swagger.json differs: run scripts/openapi.sh (or
// go generate ./openapi) and commit the result. The first run builds swag
// from the module cache (fetching it once through the module proxy).
func TestDocumentIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs swag; skipped with -short")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command in PATH")
	}
	dir := t.TempDir()
	cmd := exec.Command("sh", filepath.Join("..", "scripts", "openapi.sh"), dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/openapi.sh: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "swagger.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, openapi.JSON) {
		t.Fatalf("openapi/swagger.json is stale: run scripts/openapi.sh and commit it (regenerated %d bytes, committed %d)", len(got), len(openapi.JSON))
	}
}
