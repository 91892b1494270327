package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// FuncSource returns the source text of the top-level function name
// (tests and examples included) declared in the Go files of dir.
func FuncSource(dir, name string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return "", err
	}
	fset := token.NewFileSet()
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
		if err != nil {
			return "", err
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == name {
				start, end := fset.Position(fd.Pos()).Offset, fset.Position(fd.End()).Offset
				return string(src[start:end]), nil
			}
		}
	}
	return "", fmt.Errorf("no func %s there", name)
}

// gap is the line that, alone in a snippet, stands for code left out.
const gap = "// …"

// Excerpt reports whether snippet is an excerpt of src: its lines, compared
// without indentation and with runs of blanks as one, appear in src one
// after the other, where a line "// …" in the snippet skips any number of
// src lines. Blank lines count in neither.
func Excerpt(src, snippet string) error {
	have := normalize(src)
	at := 0
	for _, chunk := range chunks(normalize(snippet)) {
		i := index(have[at:], chunk)
		if i < 0 {
			return fmt.Errorf("not in the source, in this order: %q", chunk[0])
		}
		at += i + len(chunk)
	}
	return nil
}

// normalize returns the non-blank lines of s, trimmed, blanks collapsed.
func normalize(s string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			out = append(out, strings.Join(f, " "))
		}
	}
	return out
}

// chunks splits lines at every gap line.
func chunks(lines []string) [][]string {
	var out [][]string
	var cur []string
	for _, l := range lines {
		if l == gap {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, l)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// index is the first position of sub in lines as consecutive lines, or -1.
func index(lines, sub []string) int {
	for i := 0; i+len(sub) <= len(lines); i++ {
		if slices.Equal(lines[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}
