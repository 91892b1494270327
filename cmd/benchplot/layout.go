package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// estimatedText lays text out with textWidth, the upper bound of the
// widths of the fonts a viewer may draw it in, instead of Liberation
// Serif's own: axes leave room for it, right-aligned labels end at their
// mark and centred ones stay centred in any of those fonts.
type estimatedText struct{ text.Plain }

func init() {
	// Every style of every plot, legend and label made from here on.
	plot.DefaultTextHandler = estimatedText{text.Plain{Fonts: font.DefaultCache}}
}

func (h estimatedText) Box(txt string, fnt font.Font) (width, height, depth vg.Length) {
	width, height, depth = h.Plain.Box(txt, fnt)
	return max(width, vg.Length(textWidth(txt, fnt.Size.Points()))), height, depth
}

// Draw offsets the text by its alignment times the estimated width: Plain
// offsets each line by XAlign times the font's own width, so XAlign is
// scaled by the ratio of the two (of the widest line, for several lines).
func (h estimatedText) Draw(c vg.Canvas, txt string, sty text.Style, pt vg.Point) {
	var own, est vg.Length
	for _, line := range h.Lines(txt) {
		w, _, _ := h.Plain.Box(line, sty.Font)
		if w > own {
			own = w
			est, _, _ = h.Box(line, sty.Font)
		}
	}
	if own > 0 {
		sty.XAlign *= text.XAlignment(est / own)
	}
	h.Plain.Draw(c, txt, sty, pt)
}

// fontFamily names fallbacks after Liberation Serif: Times New Roman has
// its widths (Liberation Serif was made to match them); a viewer with
// neither draws its serif font (DejaVu Serif on Debian), which textWidth
// also bounds.
const fontFamily = "font-family:'Liberation Serif','Times New Roman',Times,serif;"

// chart is a plot as the page shows it: the title over the whole picture,
// the legend beside the data (never over it), and under everything one
// line saying what a good result looks like.
type chart struct {
	*plot.Plot
	w, h vg.Length
	good string
}

// newPlot is a plot with the page's text sizes: 10 pt legend entries
// spaced so that their lines do not touch.
func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	p.Legend.Padding = vg.Points(4)
	return p
}

const margin = vg.Length(6) // points, around the picture and between its parts

// draw draws the chart on c: its frame, then the plot without its title,
// legend and axis labels, which go where gonum would not put them: the
// legend beside the data, each axis label centred on the data's extent
// (gonum centres it on the axis' middle value, far from the middle of a log
// axis, and pads the data area to make room for it there).
func (ch *chart) draw(c draw.Canvas) {
	c = ch.frame(c)
	title, legend, xl, yl := ch.Title.Text, ch.Legend, ch.X.Label, ch.Y.Label
	ch.Title.Text, ch.Legend, ch.X.Label.Text, ch.Y.Label.Text = "", plot.NewLegend(), "", ""
	defer func() { ch.Title.Text, ch.Legend, ch.X.Label.Text, ch.Y.Label.Text = title, legend, xl.Text, yl.Text }()
	beside := c
	if w := legend.Rectangle(c).Size().X; w > 0 {
		beside.Min.X = c.Max.X - w
		c.Max.X = beside.Min.X - 2*margin
	}
	labels := c
	if xl.Text != "" {
		c.Min.Y += xl.TextStyle.Height(xl.Text) + xl.Padding
	}
	if yl.Text != "" {
		c.Min.X += yl.TextStyle.Height(yl.Text) + yl.Padding
	}
	data := ch.DataCanvas(c)
	ch.Plot.Draw(c)
	if xl.Text != "" {
		labels.FillText(xl.TextStyle, vg.Point{X: data.Center().X, Y: labels.Min.Y + xl.TextStyle.FontExtents().Descent}, xl.Text)
	}
	if yl.Text != "" {
		sty := yl.TextStyle
		sty.Rotation += math.Pi / 2
		labels.FillText(sty, vg.Point{X: labels.Min.X + sty.Height(yl.Text) - sty.FontExtents().Descent, Y: data.Center().Y}, yl.Text)
	}
	beside.Max.Y = data.Max.Y
	legend.Top, legend.Left = true, true
	legend.Draw(beside)
}

// frame fills the picture white, writes the title at the top and the line
// saying what good looks like at the bottom, and returns the room between.
func (ch *chart) frame(c draw.Canvas) draw.Canvas {
	c.SetColor(color.White)
	c.Fill(c.Rectangle.Path())
	c.Rectangle = vg.Rectangle{Min: c.Min.Add(vg.Point{X: margin, Y: margin}), Max: c.Max.Sub(vg.Point{X: margin, Y: margin})}
	if ch.good != "" {
		sty := ch.Legend.TextStyle
		sty.Color = color.Gray{Y: 60}
		good := "Good: " + ch.good
		c.FillText(sty, vg.Point{X: c.Min.X, Y: c.Min.Y + sty.FontExtents().Descent}, good)
		c.Min.Y += sty.Height(good) + 2*margin
	}
	if t := ch.Title; t.Text != "" {
		c.FillText(t.TextStyle, vg.Point{X: c.Center().X, Y: c.Max.Y + t.TextStyle.FontExtents().Descent}, t.Text)
		c.Max.Y -= t.TextStyle.Height(t.Text) + t.Padding + margin
	}
	return c
}

// save writes the chart in the format its file name ends in.
func (ch *chart) save(file string) error {
	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(file), "."))
	c, err := draw.NewFormattedCanvas(ch.w, ch.h, format)
	if err != nil {
		return err
	}
	ch.draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return err
	}
	b := buf.Bytes()
	if format == "svg" {
		b = bytes.ReplaceAll(b, []byte("font-family:Liberation Serif;"), []byte(fontFamily))
	}
	return os.WriteFile(file, b, 0o644)
}

// logAxis makes ax logarithmic, its range widened to labelled ticks.
// Labels have one format on the axis: 1e3, 2e3 … when exp (sizes n) or when
// the range leaves 1e-2…1e6, else plain numbers with thousands separators.
// An axis of two decades or less labels 1, 2 and 5 of each; a wider one its
// powers of ten only.
func logAxis(ax *plot.Axis, exp bool) {
	ax.Scale = plot.LogScale{}
	ax.Tick.Marker = logTicks{exp: exp}
	ax.AutoRescale = true
}

type logTicks struct{ exp bool }

func (t logTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo {
		return plot.LogTicks{}.Ticks(lo, hi)
	}
	steps := []int{1, 2, 5}
	if math.Log10(ceilTick(hi, steps)/floorTick(lo, steps)) > 2.01 {
		steps = []int{1}
	}
	lo, hi = floorTick(lo, steps), ceilTick(hi, steps)
	exp := t.exp || lo < 0.01 || hi > 1e6
	var ticks []plot.Tick
	for e := int(math.Floor(math.Log10(lo))); e <= int(math.Ceil(math.Log10(hi))); e++ {
		for m := 1; m <= 9; m++ {
			v := decimal(m, e)
			if v < lo || v > hi {
				continue
			}
			tick := plot.Tick{Value: v}
			if slices.Contains(steps, m) {
				tick.Label = tickLabel(v, m, e, exp)
			}
			ticks = append(ticks, tick)
		}
	}
	return ticks
}

// decimal is m × 10^e, the float nearest to it.
func decimal(m, e int) float64 {
	v, _ := strconv.ParseFloat(fmt.Sprintf("%de%d", m, e), 64)
	return v
}

func tickLabel(v float64, m, e int, exp bool) string {
	switch {
	case exp:
		return fmt.Sprintf("%de%d", m, e)
	case v >= 1:
		return commas(v)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// floorTick is the largest m × 10^e ≤ v with m in steps; ceilTick the
// smallest ≥ v.
func floorTick(v float64, steps []int) float64 {
	e := int(math.Floor(math.Log10(v)))
	for _, m := range slices.Backward(steps) {
		if t := decimal(m, e); t <= v*(1+1e-9) {
			return t
		}
	}
	return decimal(steps[len(steps)-1], e-1)
}

func ceilTick(v float64, steps []int) float64 {
	e := int(math.Floor(math.Log10(v)))
	for _, m := range steps {
		if t := decimal(m, e); t >= v*(1-1e-9) {
			return t
		}
	}
	return decimal(1, e+1)
}

// commaTicks are gonum's linear ticks, whole numbers written with
// thousands separators (4,000 rather than 4000).
type commaTicks struct{}

func (commaTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for _, t := range ticks {
		if t.Label != "" && t.Value != math.Trunc(t.Value) {
			return ticks
		}
	}
	for i, t := range ticks {
		if t.Label != "" {
			ticks[i].Label = commas(t.Value)
		}
	}
	return ticks
}

// valueTicks label exactly the given values (writers 1, 4, 16), whole
// numbers with thousands separators.
func valueTicks(vs ...float64) plot.ConstantTicks {
	var ticks plot.ConstantTicks
	for _, v := range vs {
		ticks = append(ticks, plot.Tick{Value: v, Label: commas(v)})
	}
	return ticks
}
