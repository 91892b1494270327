package doccheck

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// Module is the module path the import rules speak of.
const Module = "github.com/a2astore/a2astore"

// Graph maps each package of the module, by its path inside the module
// ("engine/authz"), to the module packages its non-test files import.
type Graph map[string][]string

// LoadGraph lists the module's packages with `go list`, run in root.
func LoadGraph(root string) (Graph, error) {
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	g := Graph{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, ok := inModule(f[0])
		if !ok {
			continue
		}
		g[pkg] = []string{}
		for _, imp := range f[1:] {
			if p, ok := inModule(imp); ok {
				g[pkg] = append(g[pkg], p)
			}
		}
	}
	return g, nil
}

func inModule(path string) (string, bool) {
	if path == Module {
		return ".", true
	}
	return strings.CutPrefix(path, Module+"/")
}

// A Rule is one import rule that CONTRIBUTING.md states: Allows reports
// whether package pkg may import package imp (both module paths).
type Rule struct {
	Text   string
	Allows func(pkg, imp string) bool
}

var (
	backends   = []string{"engine/memstore", "pebblestore", "pgstore"}
	backendLib = []string{"engine", "engine/taskcodec", "engine/listpage", "engine/loghub"}
	overAny    = []string{"a2aserver", "taskiter", "clientcompat", "engine/authz", "engine/storemetrics", "engine/retention", "engine/tasklog"}
	testOnly   = []string{"engine/storetest", "engine/authz/authztest", "internal/pgtest", "internal/fakeclock", "internal/ownercost", "internal/retaintest", "internal/rawhttp"}
)

func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// Rules are the import rules, in CONTRIBUTING.md's words.
var Rules = []Rule{
	{"engine imports no other package of the module", func(pkg, imp string) bool {
		return pkg != "engine"
	}},
	{"a package under engine/ imports only packages under engine/ (engine/storetest also taskiter, to walk pages)", func(pkg, imp string) bool {
		return !under(pkg, "engine") || under(imp, "engine") || pkg == "engine/storetest" && imp == "taskiter"
	}},
	{"a backend (engine/memstore, pebblestore, pgstore) imports only engine, engine/taskcodec, engine/listpage, engine/loghub and its own subpackages", func(pkg, imp string) bool {
		return !slices.Contains(backends, pkg) || slices.Contains(backendLib, imp) || under(imp, pkg)
	}},
	{"a2aserver, taskiter, clientcompat, engine/authz, engine/storemetrics, engine/retention and engine/tasklog import no backend: they work over any engine.Store", func(pkg, imp string) bool {
		return !slices.Contains(overAny, pkg) || !slices.Contains(backends, imp)
	}},
	{"test-support packages (engine/storetest, engine/authz/authztest, internal/pgtest, internal/fakeclock, internal/ownercost, internal/retaintest, internal/rawhttp) are imported by tests only", func(pkg, imp string) bool {
		return !slices.Contains(testOnly, imp)
	}},
}

// CheckImports returns an error for every import of g that a rule forbids.
func CheckImports(g Graph) []error {
	var errs []error
	for pkg, imps := range g {
		for _, imp := range imps {
			for _, r := range Rules {
				if !r.Allows(pkg, imp) {
					errs = append(errs, fmt.Errorf("%s imports %s, but %s", pkg, imp, r.Text))
				}
			}
		}
	}
	return errs
}
