package doccheck

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// A Link is a link target written on a line of a Markdown page.
type Link struct {
	Line   int
	Target string
}

// A Snippet is a fenced code block: its info string's language, its text,
// and the source a `<!-- snippet: DIR FUNC -->` comment right above its
// fence names ("" when none does).
type Snippet struct {
	Line   int // of the opening fence
	Lang   string
	Text   string
	Source string
}

var (
	fenceRE     = regexp.MustCompile("^\\s*(```+|~~~+)\\s*([A-Za-z0-9_+-]*)")
	headingRE   = regexp.MustCompile(`^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	inlineRE    = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDefRE    = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	codeSpanRE  = regexp.MustCompile("(`+)[^`]*?(`+)")
	htmlIDRE    = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	snippetRE   = regexp.MustCompile(`^<!--\s*snippet:\s*(\S+\s+\S+)\s*-->\s*$`)
	mdLinkRE    = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	htmlTagRE   = regexp.MustCompile(`<[^>]+>`)
	codeTicksRE = regexp.MustCompile("`+")
)

// page is a Markdown page split into its prose lines (code blocks blanked,
// so that nothing in them counts as a heading or link) and its fenced
// blocks.
type page struct {
	prose    []string
	snippets []Snippet
}

// parse splits src into prose and fenced blocks. An unclosed fence is an
// error: GitHub would render the rest of the page as code.
func parse(src string) (page, error) {
	lines := strings.Split(src, "\n")
	var p page
	for i := 0; i < len(lines); i++ {
		m := fenceRE.FindStringSubmatch(lines[i])
		if m == nil {
			p.prose = append(p.prose, lines[i])
			continue
		}
		s := Snippet{Line: i + 1, Lang: m[2], Source: sourceAbove(lines, i)}
		p.prose = append(p.prose, "")
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			p.prose = append(p.prose, "")
			if t := strings.TrimSpace(lines[i]); strings.HasPrefix(t, m[1]) && strings.Trim(t, m[1][:1]) == "" {
				closed = true
				break
			}
			body = append(body, lines[i])
		}
		if !closed {
			return page{}, fmt.Errorf("line %d: code block never closed", s.Line)
		}
		s.Text = strings.Join(body, "\n")
		p.snippets = append(p.snippets, s)
	}
	return p, nil
}

// sourceAbove is the DIR FUNC of a snippet comment on the last non-blank
// line above line i, or "".
func sourceAbove(lines []string, i int) string {
	for j := i - 1; j >= 0; j-- {
		t := strings.TrimSpace(lines[j])
		if t == "" {
			continue
		}
		if m := snippetRE.FindStringSubmatch(t); m != nil {
			return strings.Join(strings.Fields(m[1]), " ")
		}
		return ""
	}
	return ""
}

// links returns every link target of the prose: inline links and images,
// and reference definitions; code spans are not links.
func (p page) links() []Link {
	var out []Link
	for i, line := range p.prose {
		line = codeSpanRE.ReplaceAllString(line, "")
		for _, m := range inlineRE.FindAllStringSubmatch(line, -1) {
			out = append(out, Link{Line: i + 1, Target: m[1]})
		}
		if m := refDefRE.FindStringSubmatch(line); m != nil {
			out = append(out, Link{Line: i + 1, Target: m[1]})
		}
	}
	return out
}

// anchors returns the anchors GitHub gives the page: one per heading
// (duplicates numbered -1, -2, … in order) and the id or name of every
// <a> tag.
func (p page) anchors() map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range p.prose {
		for _, m := range htmlIDRE.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := Slug(m[2])
		if n := seen[s]; n > 0 {
			seen[s]++
			s = fmt.Sprintf("%s-%d", s, n)
		} else {
			seen[s] = 1
		}
		out[s] = true
	}
	return out
}

// Slug is the anchor GitHub gives a heading written as text (Markdown
// inline syntax included): the rendered text — link texts, code spans
// without their backticks, no tags — lower-cased, with every character but
// letters, digits, marks, '_', '-' and ' ' removed and each space turned
// into '-'. (Emphasis written with '_' would keep its underscores here:
// the manual's headings use '*' or none.)
func Slug(heading string) string {
	text := mdLinkRE.ReplaceAllString(heading, "$1")
	text = htmlTagRE.ReplaceAllString(text, "")
	text = codeTicksRE.ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
