package main

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// checkSVG reads an SVG (as vgsvg writes it: <text> and <path> elements
// under nested <g transform>) and reports every text element that does not
// lie wholly inside the picture, every two that overlap, and every text
// drawn over a filled polygon (a bar). A text's box is estimated from its
// font size (textWidth, emAscent, emDescent), so the check holds for the
// fonts a viewer may draw it in; rotated text is a rotated box.
func checkSVG(r io.Reader) ([]string, error) {
	texts, shapes, w, h, err := svgItems(r)
	if err != nil {
		return nil, err
	}
	var problems []string
	const tol = 0.5 // points: rounding in the file, not a defect
	for _, t := range texts {
		x0, y0, x1, y1 := t.bounds()
		if x0 < -tol || y0 < -tol || x1 > w+tol || y1 > h+tol {
			problems = append(problems, fmt.Sprintf("%q is not inside the picture: x %.0f…%.0f, y %.0f…%.0f of %.0f × %.0f",
				t.s, x0, x1, y0, y1, w, h))
		}
	}
	for i, a := range texts {
		for _, b := range texts[i+1:] {
			if overlap(a.corners, b.corners) > tol {
				problems = append(problems, fmt.Sprintf("%q overlaps %q", a.s, b.s))
			}
		}
		for _, b := range shapes {
			if overlap(a.corners, b) > tol {
				x0, y0, x1, y1 := svgText{corners: b}.bounds()
				problems = append(problems, fmt.Sprintf("%q runs over a filled shape at x %.0f…%.0f, y %.0f…%.0f", a.s, x0, x1, y0, y1))
			}
		}
	}
	return problems, nil
}

// svgText is one text element: its string and its estimated box, as four
// corners in picture coordinates (origin at the top left).
type svgText struct {
	s       string
	corners [4][2]float64
}

func (t svgText) bounds() (x0, y0, x1, y1 float64) {
	x0, y0, x1, y1 = math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
	for _, c := range t.corners {
		x0, x1 = math.Min(x0, c[0]), math.Max(x1, c[0])
		y0, y1 = math.Min(y0, c[1]), math.Max(y1, c[1])
	}
	return x0, y0, x1, y1
}

// affine is the SVG matrix(a b c d e f): (x, y) ↦ (ax + cy + e, bx + dy + f).
type affine [6]float64

var identity = affine{1, 0, 0, 1, 0, 0}

// then is m applied after n (m × n).
func (m affine) then(n affine) affine {
	return affine{
		m[0]*n[0] + m[2]*n[1], m[1]*n[0] + m[3]*n[1],
		m[0]*n[2] + m[2]*n[3], m[1]*n[2] + m[3]*n[3],
		m[0]*n[4] + m[2]*n[5] + m[4], m[1]*n[4] + m[3]*n[5] + m[5],
	}
}

func (m affine) apply(x, y float64) [2]float64 {
	return [2]float64{m[0]*x + m[2]*y + m[4], m[1]*x + m[3]*y + m[5]}
}

var (
	transformRE = regexp.MustCompile(`([a-zA-Z]+)\s*\(([^)]*)\)`)
	fontSizeRE  = regexp.MustCompile(`font-size:\s*([0-9.eE+-]+)(px|pt)?`)
	anchorRE    = regexp.MustCompile(`text-anchor:\s*(start|middle|end)`)
)

// parseTransform reads an SVG transform list (matrix, translate, scale,
// rotate).
func parseTransform(s string) (affine, error) {
	m := identity
	for _, f := range transformRE.FindAllStringSubmatch(s, -1) {
		var a []float64
		for _, p := range strings.FieldsFunc(f[2], func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
			v, err := strconv.ParseFloat(p, 64)
			if err != nil {
				return m, fmt.Errorf("transform %q: %w", s, err)
			}
			a = append(a, v)
		}
		var n affine
		switch {
		case f[1] == "matrix" && len(a) == 6:
			n = affine(a)
		case f[1] == "translate" && len(a) == 1:
			n = affine{1, 0, 0, 1, a[0], 0}
		case f[1] == "translate" && len(a) == 2:
			n = affine{1, 0, 0, 1, a[0], a[1]}
		case f[1] == "scale" && len(a) == 1:
			n = affine{a[0], 0, 0, a[0], 0, 0}
		case f[1] == "scale" && len(a) == 2:
			n = affine{a[0], 0, 0, a[1], 0, 0}
		case f[1] == "rotate" && len(a) == 1:
			sin, cos := math.Sincos(a[0] * math.Pi / 180)
			n = affine{cos, sin, -sin, cos, 0, 0}
		default:
			return m, fmt.Errorf("transform %q: %s with %d arguments is not read", s, f[1], len(a))
		}
		m = m.then(n)
	}
	return m, nil
}

// svgItems reads the picture's size (its viewBox), every text element and
// the bounding box of every filled polygon but the white background.
func svgItems(r io.Reader) (texts []svgText, shapes [][4][2]float64, w, h float64, err error) {
	d := xml.NewDecoder(r)
	stack := []affine{identity}
	var cur *svgText
	var curStart xml.StartElement
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, 0, 0, err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			m, err := parseTransform(attr(tok, "transform"))
			if err != nil {
				return nil, nil, 0, 0, err
			}
			stack = append(stack, stack[len(stack)-1].then(m))
			switch tok.Name.Local {
			case "svg":
				if _, err := fmt.Sscanf(attr(tok, "viewBox"), "0 0 %g %g", &w, &h); err != nil {
					return nil, nil, 0, 0, fmt.Errorf("viewBox %q: %w", attr(tok, "viewBox"), err)
				}
			case "text":
				cur, curStart = &svgText{}, tok
			case "path":
				if b, ok := filledPolygon(tok, stack[len(stack)-1]); ok {
					shapes = append(shapes, b)
				}
			}
		case xml.CharData:
			if cur != nil {
				cur.s += string(tok)
			}
		case xml.EndElement:
			if tok.Name.Local == "text" && cur != nil && strings.TrimSpace(cur.s) != "" {
				if err := cur.place(curStart, stack[len(stack)-1]); err != nil {
					return nil, nil, 0, 0, err
				}
				texts = append(texts, *cur)
			}
			if tok.Name.Local == "text" {
				cur = nil
			}
			stack = stack[:len(stack)-1]
		}
	}
	if w <= 0 || h <= 0 {
		return nil, nil, 0, 0, errors.New("no <svg viewBox>")
	}
	return texts, shapes, w, h, nil
}

var (
	fillRE    = regexp.MustCompile(`(?:^|;)\s*fill:\s*([^;]+)`)
	polygonRE = regexp.MustCompile(`^(?:[MLZ][-0-9.eE, ]*)+$`)
	numberRE  = regexp.MustCompile(`-?[0-9.]+(?:[eE][-+]?[0-9]+)?`)
)

// filledPolygon is the bounding box of a path filled with a colour other
// than white whose data are straight lines only (M, L, Z: a bar, a legend's
// swatch); curves (point glyphs) and strokes are not read.
func filledPolygon(el xml.StartElement, m affine) ([4][2]float64, bool) {
	f := fillRE.FindStringSubmatch(attr(el, "style"))
	if f == nil || f[1] == "none" || strings.EqualFold(f[1], "#FFFFFF") {
		return [4][2]float64{}, false
	}
	d := strings.TrimSpace(attr(el, "d"))
	if !polygonRE.MatchString(d) {
		return [4][2]float64{}, false
	}
	nums := numberRE.FindAllString(d, -1)
	if len(nums) < 4 || len(nums)%2 != 0 {
		return [4][2]float64{}, false
	}
	x0, y0, x1, y1 := math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
	for i := 0; i < len(nums); i += 2 {
		x, _ := strconv.ParseFloat(nums[i], 64)
		y, _ := strconv.ParseFloat(nums[i+1], 64)
		p := m.apply(x, y)
		x0, x1 = math.Min(x0, p[0]), math.Max(x1, p[0])
		y0, y1 = math.Min(y0, p[1]), math.Max(y1, p[1])
	}
	return [4][2]float64{{x0, y0}, {x1, y0}, {x1, y1}, {x0, y1}}, true
}

// place sets t's corners from its element's x, y, font size and anchor,
// under the transform m (the element's own included).
func (t *svgText) place(el xml.StartElement, m affine) error {
	style := attr(el, "style")
	fs := fontSizeRE.FindStringSubmatch(style)
	if fs == nil {
		return fmt.Errorf("text %q: no font-size", t.s)
	}
	size, err := strconv.ParseFloat(fs[1], 64)
	if err != nil {
		return fmt.Errorf("text %q: %w", t.s, err)
	}
	x, err1 := strconv.ParseFloat(attr(el, "x"), 64)
	y, err2 := strconv.ParseFloat(attr(el, "y"), 64)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("text %q: %w", t.s, err)
	}
	wd := textWidth(t.s, size)
	anchor := attr(el, "text-anchor")
	if a := anchorRE.FindStringSubmatch(style); a != nil {
		anchor = a[1]
	}
	switch anchor {
	case "middle":
		x -= wd / 2
	case "end":
		x -= wd
	}
	top, bottom := y-emAscent*size, y+emDescent*size
	t.corners = [4][2]float64{m.apply(x, top), m.apply(x+wd, top), m.apply(x+wd, bottom), m.apply(x, bottom)}
	return nil
}

func attr(el xml.StartElement, name string) string {
	for _, a := range el.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// overlap is how far two convex quadrilaterals overlap: the least depth of
// their projections over every edge normal of either (separating axes); 0
// or less when they do not.
func overlap(a, b [4][2]float64) float64 {
	least := math.Inf(1)
	for _, q := range [][4][2]float64{a, b} {
		for i := range 4 {
			ex, ey := q[(i+1)%4][0]-q[i][0], q[(i+1)%4][1]-q[i][1]
			n := math.Hypot(ex, ey)
			if n == 0 {
				continue
			}
			nx, ny := -ey/n, ex/n
			amin, amax := project(a, nx, ny)
			bmin, bmax := project(b, nx, ny)
			least = math.Min(least, math.Min(amax, bmax)-math.Max(amin, bmin))
		}
	}
	return least
}

func project(q [4][2]float64, nx, ny float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, c := range q {
		v := c[0]*nx + c[1]*ny
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return lo, hi
}
