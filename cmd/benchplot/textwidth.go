package main

import "strings"

// Text extents without the font. The SVGs name Liberation Serif, but a
// viewer without it draws a fallback: DejaVu Serif on a bare Debian (what
// rsvg-convert showed), Times elsewhere. DejaVu Serif is about 1.25× as
// wide as Liberation Serif, so text that gonum laid out with Liberation's
// widths ran past its place (peer-ratios' labels out of the picture and
// into their bars, page-vs-n's last tick clipped). textWidth is an upper
// bound of both fonts' advance widths, per character class (measured from
// the two fonts' tables, in em): the charts are laid out with it
// (estimatedText) and checked with it (checkSVG), so what passes the check
// fits in either font.

// Character classes, in em, each at least the widest member's advance in
// DejaVu Serif and in Liberation Serif.
const (
	emNarrow = 0.41 // i j l t f I J ! ( ) [ ] , . : ; ' | / \ - · and space
	emMedium = 0.54 // r s z ? "
	emNormal = 0.66 // other lower case, digits, µ and the rest
	emUpper  = 0.88 // capitals but M and W
	emSymbol = 0.84 // + < = > × ≥ ≤ ≈ ÷ ~ ^ #
	emWide   = 1.03 // m w M W @ % & — …
)

func charEm(r rune) float64 {
	switch {
	case strings.ContainsRune(" ijltfIJ!()[],.:;'|/\\-·", r):
		return emNarrow
	case strings.ContainsRune("rsz?\"", r):
		return emMedium
	case strings.ContainsRune("mwMW@%&—…", r):
		return emWide
	case strings.ContainsRune("+<=>×≥≤≈÷~^#", r):
		return emSymbol
	case r >= 'A' && r <= 'Z':
		return emUpper
	}
	return emNormal
}

// textWidth is the estimated width of s at font size (same unit as size).
func textWidth(s string, size float64) float64 {
	em := 0.0
	for _, r := range s {
		em += charEm(r)
	}
	return em * size
}

// Vertical extents of a line of text around its baseline, in em: the tallest
// capitals, digits and parentheses above, the descenders below.
const (
	emAscent  = 0.76
	emDescent = 0.24
)
