package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// table is one section of the report, printed as aligned text or Markdown.
type table struct {
	title  string
	header []string
	// left is how many leading columns hold words (aligned left in
	// Markdown); the rest hold numbers.
	left  int
	rows  [][]string
	notes []string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) note(format string, args ...any) {
	t.notes = append(t.notes, fmt.Sprintf(format, args...))
}

func (t *table) print(w io.Writer, markdown bool) {
	if len(t.rows) == 0 {
		return
	}
	if markdown {
		t.markdown(w)
		return
	}
	fmt.Fprintf(w, "%s\n%s\n", t.title, strings.Repeat("-", len(t.title)))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(t.header, "\t")+"\t")
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	_ = tw.Flush()
	for _, n := range t.notes {
		fmt.Fprintf(w, "* %s\n", n)
	}
	fmt.Fprintln(w)
}

func (t *table) markdown(w io.Writer) {
	fmt.Fprintf(w, "### %s\n\n", t.title)
	fmt.Fprintf(w, "| %s |\n|", strings.Join(t.header, " | "))
	for i := range t.header {
		if i < t.left {
			fmt.Fprint(w, ":---|")
		} else {
			fmt.Fprint(w, "---:|")
		}
	}
	fmt.Fprintln(w)
	for _, r := range t.rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
	fmt.Fprintln(w)
	for _, n := range t.notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	if len(t.notes) > 0 {
		fmt.Fprintln(w)
	}
}

// samples are the durations of one variant's operations.
type samples []time.Duration

// pct is the p-th percentile by nearest rank (p 100 is the maximum).
func (s samples) pct(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	sorted := slices.Clone(s)
	slices.Sort(sorted)
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func (s samples) mean() time.Duration {
	if len(s) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return sum / time.Duration(len(s))
}

// dur prints a duration with three significant digits.
func dur(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	switch {
	case d <= 0:
		return "—"
	case us < 1000:
		return fmt.Sprintf("%.0f µs", us)
	case us < 10000:
		return fmt.Sprintf("%.2f ms", us/1000)
	case us < 100000:
		return fmt.Sprintf("%.1f ms", us/1000)
	default:
		return fmt.Sprintf("%.0f ms", us/1000)
	}
}

// ratio prints a/b, or a dash when either is missing.
func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func dratio(a, b time.Duration) string { return ratio(float64(a), float64(b)) }

// bytes prints a byte count per item.
func bytesEach(total int64, n int) string {
	if n == 0 {
		return "—"
	}
	b := float64(total) / float64(n)
	if math.Abs(b) >= 10*1024 {
		return fmt.Sprintf("%.1f KiB", b/1024)
	}
	return fmt.Sprintf("%.0f B", b)
}

func count(n int) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
