package doccheck_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2astore/a2astore/internal/doccheck"
)

// root is the repository's top directory (this package is two below it).
const root = "../.."

func pages(t *testing.T) []string {
	t.Helper()
	p, err := doccheck.Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func report(t *testing.T, errs []error, fix string) {
	t.Helper()
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.Log(fix)
	}
}

// TestLinks: every relative link and #anchor of the manual resolves.
func TestLinks(t *testing.T) {
	report(t, doccheck.CheckLinks(root, pages(t)), "fix the link, or the heading it points to (anchors are GitHub's: see doccheck.Slug)")
}

// TestSnippets: every Go block of the manual is an excerpt of a function
// the repository compiles (an Example, mostly, which go test runs).
func TestSnippets(t *testing.T) {
	report(t, doccheck.CheckSnippets(root, pages(t)), "change the snippet or its source function so that they agree; name the source in <!-- snippet: DIR FUNC --> above the block")
}

// TestImportRules: the import rules CONTRIBUTING.md states hold.
func TestImportRules(t *testing.T) {
	g, err := doccheck.LoadGraph(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(g["engine"]) != 0 || len(g) < 20 {
		t.Fatalf("implausible graph: %d packages, engine imports %v", len(g), g["engine"])
	}
	report(t, doccheck.CheckImports(g), "the import rules are in CONTRIBUTING.md (Import rules); change the code, or the rule and its text together")
	contributing, err := os.ReadFile(filepath.Join(root, "CONTRIBUTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(string(contributing)), " ")
	for _, r := range doccheck.Rules {
		if !strings.Contains(flat, r.Text) {
			t.Errorf("CONTRIBUTING.md does not state the rule %q", r.Text)
		}
	}
}
