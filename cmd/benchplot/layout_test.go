package main

import (
	"slices"
	"testing"
)

// TestLogTicks: a log axis is widened to labelled ticks and labelled in one
// format: 1eK for sizes, plain numbers with separators otherwise (1eK when
// the range leaves 1e-2…1e6); 1, 2 and 5 of each decade over two decades
// or less, powers of ten only over more.
func TestLogTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		exp    bool
		want   []string
	}{
		{1e3, 1e6, true, []string{"1e3", "1e4", "1e5", "1e6"}},
		{4.5, 420, false, []string{"1", "10", "100", "1,000"}},
		{8, 130, false, []string{"5", "10", "20", "50", "100", "200"}},
		{3500, 11000, false, []string{"2,000", "5,000", "10,000", "20,000"}},
		{0.3, 40, false, []string{"0.1", "1", "10", "100"}},
		{0.004, 3, false, []string{"1e-3", "1e-2", "1e-1", "1e0", "1e1"}},
		{170, 4.5e7, false, []string{"1e2", "1e3", "1e4", "1e5", "1e6", "1e7", "1e8"}},
	} {
		var got []string
		for _, tick := range (logTicks{exp: tc.exp}).Ticks(tc.lo, tc.hi) {
			if tick.Label != "" {
				got = append(got, tick.Label)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%g…%g: labels %q, want %q", tc.lo, tc.hi, got, tc.want)
		}
	}
}

// TestTextWidthBounds: the estimate is at least as wide as both fonts a
// viewer may draw the charts in (advance widths in em of DejaVu Serif and
// Liberation Serif, the wider of the two, read from their tables).
func TestTextWidthBounds(t *testing.T) {
	for r, em := range map[rune]float64{
		' ': 0.318, 'i': 0.320, 't': 0.402, 'I': 0.395, '(': 0.390, '-': 0.338,
		'r': 0.478, 's': 0.513, 'z': 0.527, '?': 0.536,
		'a': 0.596, 'h': 0.644, '0': 0.636, 'µ': 0.650, '_': 0.500, '`': 0.500, '{': 0.636,
		'A': 0.722, 'H': 0.872, 'N': 0.875, 'Y': 0.722, '+': 0.838, '×': 0.838, '≤': 0.838,
		'm': 0.948, 'w': 0.856, 'M': 1.024, 'W': 1.028, '%': 0.950, '@': 1.000, '—': 1.000,
	} {
		if got := textWidth(string(r), 1); got < em {
			t.Errorf("%q: estimated %.3f em, narrower than %.3f em", r, got, em)
		}
	}
}
