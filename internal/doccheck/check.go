package doccheck

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Pages are the manual's pages under root: README.md, CONTRIBUTING.md and
// every .md file under docs/, as slash-separated paths relative to root.
func Pages(root string) ([]string, error) {
	pages := []string{"README.md", "CONTRIBUTING.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		rel, err := filepath.Rel(root, p)
		pages = append(pages, filepath.ToSlash(rel))
		return err
	})
	return pages, err
}

// site reads and parses pages of one tree, each once.
type site struct {
	root  string
	pages map[string]page
}

func (s *site) page(name string) (page, error) {
	if p, ok := s.pages[name]; ok {
		return p, nil
	}
	b, err := os.ReadFile(filepath.Join(s.root, filepath.FromSlash(name)))
	if err != nil {
		return page{}, err
	}
	p, err := parse(string(b))
	if err != nil {
		return page{}, fmt.Errorf("%s: %w", name, err)
	}
	s.pages[name] = p
	return p, nil
}

// CheckLinks checks every relative link of pages under root: the file or
// directory it names exists inside root, and its #anchor, on a Markdown
// page, is one of that page's anchors. Links with a scheme (https:,
// mailto:) are not followed.
func CheckLinks(root string, pages []string) []error {
	return eachPage(root, pages, func(s *site, name string, p page) (errs []error) {
		for _, l := range p.links() {
			if err := s.resolve(name, l.Target); err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: link %s: %w", name, l.Line, l.Target, err))
			}
		}
		return errs
	})
}

// eachPage parses each of pages under root and returns what check finds
// in it, with the pages that fail to parse.
func eachPage(root string, pages []string, check func(s *site, name string, p page) []error) []error {
	s := &site{root: root, pages: map[string]page{}}
	var errs []error
	for _, name := range pages {
		p, err := s.page(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, check(s, name, p)...)
	}
	return errs
}

// resolve checks one link target written on page from.
func (s *site) resolve(from, target string) error {
	if strings.Contains(target, ":") && !strings.HasPrefix(target, "#") {
		return nil // https:, mailto:, …
	}
	file, anchor, _ := strings.Cut(target, "#")
	to := from
	if file != "" {
		to = path.Clean(path.Join(path.Dir(from), file))
		if to == ".." || strings.HasPrefix(to, "../") {
			return fmt.Errorf("outside the repository")
		}
		if _, err := os.Stat(filepath.Join(s.root, filepath.FromSlash(to))); err != nil {
			return fmt.Errorf("no such file")
		}
	}
	if anchor == "" || !strings.HasSuffix(to, ".md") {
		return nil
	}
	p, err := s.page(to)
	if err != nil {
		return err
	}
	if !p.anchors()[anchor] {
		return fmt.Errorf("no heading or anchor #%s in %s", anchor, to)
	}
	return nil
}

// CheckSnippets checks every ```go block of pages under root: a
// `<!-- snippet: DIR FUNC -->` comment above it names a function of the Go
// files in DIR (relative to root) of which the block is an excerpt
// (Excerpt), so the code shown is code `go vet` compiles and, for Example
// functions with an Output comment, `go test` runs.
func CheckSnippets(root string, pages []string) []error {
	return eachPage(root, pages, func(_ *site, name string, p page) (errs []error) {
		for _, sn := range p.snippets {
			if sn.Lang != "go" {
				continue
			}
			if err := checkSnippet(root, sn); err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: go block: %w", name, sn.Line, err))
			}
		}
		return errs
	})
}

func checkSnippet(root string, sn Snippet) error {
	dir, fn, ok := strings.Cut(sn.Source, " ")
	if !ok {
		return fmt.Errorf("no <!-- snippet: DIR FUNC --> comment above it")
	}
	src, err := FuncSource(filepath.Join(root, filepath.FromSlash(dir)), fn)
	if err != nil {
		return fmt.Errorf("source %s: %w", dir, err)
	}
	if err := Excerpt(src, sn.Text); err != nil {
		return fmt.Errorf("not an excerpt of %s %s: %w", dir, fn, err)
	}
	return nil
}
