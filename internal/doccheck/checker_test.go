package doccheck_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2astore/a2astore/internal/doccheck"
)

// tree writes files (slash paths → content) under a new directory.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// want checks that errs are exactly one error per substring of wants, in
// order.
func want(t *testing.T, errs []error, wants ...string) {
	t.Helper()
	if len(errs) != len(wants) {
		t.Fatalf("got %d errors %v, want %d %q", len(errs), errs, len(wants), wants)
	}
	for i, w := range wants {
		if !strings.Contains(errs[i].Error(), w) {
			t.Errorf("error %d: %v, want it to say %q", i, errs[i], w)
		}
	}
}

func TestSlug(t *testing.T) {
	for heading, slug := range map[string]string{
		"Two commands": "two-commands",
		"Retention: removing finished tasks (`-retain`)": "retention-removing-finished-tasks--retain",
		"Listing tasks with the a2a-go CLI":              "listing-tasks-with-the-a2a-go-cli",
		"[Linked](x.md) *and* **bold**":                  "linked-and-bold",
		"Owners (O1–O6)":                                 "owners-o1o6",
		"snake_case and `code_span`":                     "snake_case-and-code_span",
		"Ünïcode café":                                   "ünïcode-café",
	} {
		if got := doccheck.Slug(heading); got != slug {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, slug)
		}
	}
}

func TestCheckLinks(t *testing.T) {
	dir := tree(t, map[string]string{
		"README.md": "# Top\n\n## Same\n\n## Same\n\n" +
			"[ok](docs/a.md#part-one) [dup](#same-1) [dir](docs/) [web](https://example.com/x#y)\n" +
			"[gone](docs/missing.md) [bad anchor](docs/a.md#part-two) [up](../x.md)\n" +
			"`[in code](nowhere.md)`\n\n```\n[in block](nowhere.md)\n# Not a heading\n```\n" +
			"[self](#not-a-heading)\n[ref]: docs/a.md#nope\n",
		"CONTRIBUTING.md": "<a id=\"custom\"></a>\n[custom](#custom) [src](engine/x.go#L3)\n",
		"docs/a.md":       "# Part one\n",
		"engine/x.go":     "package x\n",
	})
	errs := doccheck.CheckLinks(dir, []string{"README.md", "CONTRIBUTING.md", "docs/a.md"})
	want(t, errs,
		"README.md:8: link docs/missing.md: no such file",
		"README.md:8: link docs/a.md#part-two: no heading or anchor #part-two in docs/a.md",
		"README.md:8: link ../x.md: outside the repository",
		"README.md:15: link #not-a-heading: no heading",
		"README.md:16: link docs/a.md#nope: no heading")
}

const exampleSrc = `package p

func Example() {
	store := New()   // aligned comment
	defer store.Close()

	for i := range 3 {
		use(i)
	}
	// Output:
}
`

func TestCheckSnippets(t *testing.T) {
	block := func(marker, code string) string { return marker + "\n```go\n" + code + "\n```\n" }
	dir := tree(t, map[string]string{
		"p/example_test.go": exampleSrc,
		"README.md": block("<!-- snippet: p Example -->", "store := New() // aligned comment\ndefer store.Close()") +
			block("<!-- snippet: p Example -->", "store := New() // aligned comment\n// …\n\tuse(i)\n}") +
			block("", "fmt.Println(1)") +
			block("<!-- snippet: p Example -->", "defer store.Close()\nstore := New() // aligned comment") +
			block("<!-- snippet: p Missing -->", "x") +
			block("<!-- snippet: p Example -->", "store := New()\ndefer store.Close()") +
			"```sh\nnot go\n```\n",
		"CONTRIBUTING.md": "```go\nunclosed\n",
	})
	errs := doccheck.CheckSnippets(dir, []string{"README.md", "CONTRIBUTING.md"})
	want(t, errs,
		"README.md:14: go block: no <!-- snippet",
		`README.md:18: go block: not an excerpt of p Example: not in the source, in this order: "defer store.Close()"`,
		"README.md:23: go block: source p: no func Missing there",
		`README.md:27: go block: not an excerpt of p Example: not in the source, in this order: "store := New()"`,
		"CONTRIBUTING.md: line 1: code block never closed")
}

func TestCheckImports(t *testing.T) {
	errs := doccheck.CheckImports(doccheck.Graph{
		"engine":           {"engine/taskcodec"},
		"engine/memstore":  {"engine", "engine/listpage", "engine/authz"},
		"pebblestore":      {"engine", "pebblestore/internal/desckey"},
		"a2aserver":        {"engine", "pgstore"},
		"engine/authz":     {"engine", "internal/fakeclock"},
		"engine/storetest": {"engine", "taskiter"},
	})
	var got []string
	for _, err := range errs {
		got = append(got, err.Error())
	}
	joined := strings.Join(got, "\n")
	for _, w := range []string{
		"engine imports engine/taskcodec, but engine imports no other package",
		"engine/memstore imports engine/authz, but a backend",
		"a2aserver imports pgstore, but a2aserver, taskiter",
		"engine/authz imports internal/fakeclock, but a package under engine/",
		"engine/authz imports internal/fakeclock, but test-support packages",
	} {
		if !strings.Contains(joined, w) {
			t.Errorf("no error %q in:\n%s", w, joined)
		}
	}
	if len(errs) != 5 {
		t.Errorf("%d errors, want 5:\n%s", len(errs), joined)
	}
}
