package main

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"time"
)

// panel is one chart: a bar per dialect for each row, on a log scale.
type panel struct {
	title string
	rows  []chartRow
}

type chartRow struct {
	label  string
	values map[string]time.Duration // by dialect
}

// set records value for the row labelled label, keeping rows in the order
// they first appear.
func (p *panel) set(label, dialect string, value time.Duration) {
	for i := range p.rows {
		if p.rows[i].label == label {
			p.rows[i].values[dialect] = value
			return
		}
	}
	p.rows = append(p.rows, chartRow{label, map[string]time.Duration{dialect: value}})
}

var chartColors = []struct{ dialect, color string }{
	{"postgres", "#336791"},
	{"mysql", "#e48e00"},
}

// chart draws the latency panels as one SVG.
func chart(t *tables) []byte {
	const (
		width, labelW, plotW = 960, 330, 560
		barH, gap, titleH    = 11, 10, 46
	)
	panels := []*panel{t.uncontendedChart, t.handoffChart}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range panels {
		for _, r := range p.rows {
			for _, v := range r.values {
				if v > 0 {
					lo = math.Min(lo, math.Log10(float64(v)))
					hi = math.Max(hi, math.Log10(float64(v)))
				}
			}
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 5, 6
	}
	lo, hi = math.Floor(lo), math.Ceil(hi)
	if hi == lo {
		hi++
	}
	x := func(d time.Duration) float64 {
		return labelW + plotW*(math.Log10(float64(d))-lo)/(hi-lo)
	}
	var b bytes.Buffer
	height := 30
	for _, p := range panels {
		height += titleH + len(p.rows)*(2*barH+gap) + 24
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	y := 10
	for i, c := range chartColors {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			labelW+i*110, y, c.color, labelW+i*110+16, y+10, c.dialect)
	}
	y += 20
	for _, p := range panels {
		top := y + titleH
		bottom := top + len(p.rows)*(2*barH+gap)
		fmt.Fprintf(&b, `<text x="10" y="%d" font-size="14" font-weight="bold">%s</text>`+"\n", y+20, html.EscapeString(p.title))
		for e := int(lo); e <= int(hi); e++ {
			d := time.Duration(math.Pow(10, float64(e)))
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x(d), top-4, x(d), bottom)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", x(d), top-8, tick(d))
		}
		for i, r := range p.rows {
			ry := top + i*(2*barH+gap)
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW-8, ry+barH+4, html.EscapeString(r.label))
			for j, c := range chartColors {
				v, ok := r.values[c.dialect]
				if !ok || v <= 0 {
					continue
				}
				by := ry + j*barH
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", labelW, by, x(v)-labelW, barH-1, c.color)
				fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="10" fill="#333">%s</text>`+"\n", x(v)+4, by+barH-2, dur(v))
			}
		}
		y = bottom + 24
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// tick labels a power of ten: 100 µs, 1 ms, 10 ms.
func tick(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%d µs", d/time.Microsecond)
	}
	if d < time.Second {
		return fmt.Sprintf("%d ms", d/time.Millisecond)
	}
	return fmt.Sprintf("%d s", d/time.Second)
}
