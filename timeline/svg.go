package timeline

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/breakwater-go/breakwater"
)

// Geometry of the drawing, in SVG user units.
const (
	svgWidth  = 1000
	left      = 130 // room for the row labels
	right     = 30
	plotW     = svgWidth - left - right
	bandH     = 18
	minProbeW = 3.0 // the narrowest a half-open span is drawn, in pixels
	bandGap   = 6
	bandsTop  = 48
	chartTop  = bandsTop + 3*(bandH+bandGap) + 16
	chartH    = 260
	legendTop = chartTop + chartH + 34
	legendRow = 18 // from one legend row's baseline to the next
	bottom    = 12 // below the last row's baseline
)

// Colours of the series; the status page uses the same ones.
var colours = map[string]string{
	"succeeded":  "#2e7d32",
	"failed":     "#c62828",
	BreakerOpen:  "#ef6c00",
	HalfOpenBusy: "#f9a825",
	Paused:       "#6a1b9a",
	RateLimited:  "#1565c0",
	Concurrency:  "#00838f",
	Other:        "#757575",
	"sent":       "#212121",
	"retried":    "#0277bd",
	"hedged":     "#00897b",
	"throttled":  "#ad1457",
	"closed":     "#a5d6a7",
	"half_open":  "#ffe082",
	"open":       "#ef9a9a",
	"healthy":    "#a5d6a7",
	"failing":    "#ef9a9a",
	"degraded":   "#ffe082",
	"unknown":    "#e0e0e0",
	"pause":      "#ce93d8",
	"ejected":    "#b71c1c",
}

// WriteSVG draws t as one self-contained SVG document (no scripts, fonts
// or links outside it) under the given title:
//
//   - three bands: the upstream's health (its phases, or the share of
//     failing attempts), the breaker's state, and the pauses;
//   - per interval, a stacked bar of the calls that ended: succeeded,
//     failed, and rejected by reason;
//   - lines for the requests the upstream saw, the retries and the hedges,
//     and, when the upstream answered any, its 429s;
//   - a mark on the upstream's band where a failover endpoint changed
//     tier (ejected, degraded, healthy again), titled with its name.
//
// Every series is an element with an id and a data-values attribute
// holding its numbers per interval, so that tests and tools can read the
// drawing back.
func WriteSVG(w io.Writer, t Timeline, title string) error {
	var b bytes.Buffer
	d := drawing{b: &b, t: t}
	d.draw(title)
	_, err := w.Write(b.Bytes())
	return err
}

type drawing struct {
	b    *bytes.Buffer
	t    Timeline
	ymax int
}

// legendItem is one entry of the legend, placed at x, y (the label's
// baseline).
type legendItem struct {
	key, label, kind string
	x, y             int
}

func (d *drawing) printf(format string, args ...any) { fmt.Fprintf(d.b, format, args...) }

// total is the width of the timeline in time.
func (d *drawing) total() time.Duration {
	return max(time.Duration(len(d.t.Intervals))*d.t.Interval, time.Nanosecond)
}

func (d *drawing) x(t time.Duration) float64 {
	return left + float64(plotW)*float64(min(t, d.total()))/float64(d.total())
}

func (d *drawing) y(v int) float64 {
	return chartTop + chartH - float64(chartH)*float64(v)/float64(d.ymax)
}

func esc(s string) string { return html.EscapeString(s) }

func (d *drawing) draw(title string) {
	d.ymax = niceCeil(d.peak())
	// The legend's rows wrap, so the picture is as tall as they make it.
	legend := d.legendItems()
	height := legend[len(legend)-1].y + bottom
	d.printf(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	d.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-labelledby="title" font-family="system-ui, -apple-system, 'Segoe UI', sans-serif" font-size="12">`+"\n",
		svgWidth, height, svgWidth, height)
	d.printf(`<title id="title">%s</title>`+"\n", esc(title))
	d.printf(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	// Shrink a long title to fit: a glyph is about 0.56 of the font size wide.
	size := min(16, float64(plotW)/(0.56*float64(max(1, len([]rune(title))))))
	d.printf(`<text x="%d" y="26" font-size="%.1f" font-weight="600">%s</text>`+"\n", left, size, esc(title))
	d.healthBand(bandsTop)
	d.healthMarks(bandsTop)
	d.stateBand(bandsTop + bandH + bandGap)
	d.pauseBand(bandsTop + 2*(bandH+bandGap))
	d.axes()
	d.bars()
	d.line("sent", "requests the upstream saw", func(iv Interval) int { return iv.Attempts }, "")
	d.line("retried", "retries", func(iv Interval) int { return iv.Retries }, ` stroke-dasharray="5 3"`)
	d.line("hedged", "hedges", func(iv Interval) int { return iv.Hedges }, ` stroke-dasharray="2 2"`)
	if d.throttled() {
		d.line("throttled", "429s the upstream answered", func(iv Interval) int { return iv.Throttled }, ` stroke-dasharray="8 3"`)
	}
	d.legend(legend)
	d.printf("</svg>\n")
}

// throttled reports whether the upstream answered any 429.
func (d *drawing) throttled() bool {
	for _, iv := range d.t.Intervals {
		if iv.Throttled > 0 {
			return true
		}
	}
	return false
}

// peak is the largest value any chart series reaches.
func (d *drawing) peak() int {
	p := 1
	for _, iv := range d.t.Intervals {
		p = max(p, iv.Ended, iv.Attempts, iv.Retries, iv.Hedges)
	}
	return p
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v int) int {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(float64(v))))
	for _, m := range []float64{1, 2, 5, 10} {
		if n := int(m * p); n >= v {
			return n
		}
	}
	return v
}

func (d *drawing) bandLabel(y int, label string) {
	d.printf(`<text x="%d" y="%d" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", left-8, y+bandH/2, esc(label))
}

func (d *drawing) rect(x0, x1 float64, y, h int, fill, attrs string) {
	if x1-x0 <= 0 {
		return
	}
	d.printf(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"%s/>`+"\n", x0, y, x1-x0, h, fill, attrs)
}

// healthBand draws the upstream's declared phases, or else the share of
// failing attempts per interval.
func (d *drawing) healthBand(y int) {
	d.bandLabel(y, "upstream")
	d.printf(`<g id="band-upstream" data-series="upstream">` + "\n")
	if len(d.t.Phases) > 0 {
		for i, p := range d.t.Phases {
			end := d.total()
			if i+1 < len(d.t.Phases) {
				end = d.t.Phases[i+1].At
			}
			health := "failing"
			if p.Healthy {
				health = "healthy"
			}
			x0, x1 := d.x(p.At), d.x(end)
			d.rect(x0, x1, y, bandH, colours[health], fmt.Sprintf(` data-phase="%s" data-health="%s"`, esc(p.Name), health))
			if x1-x0 > float64(6*len(p.Name)) {
				d.printf(`<text x="%.1f" y="%d" dominant-baseline="middle" font-size="11">%s</text>`+"\n", x0+4, y+bandH/2, esc(p.Name))
			}
		}
	} else {
		for _, iv := range d.t.Intervals {
			health := "unknown"
			if iv.Attempts > 0 {
				switch f := float64(iv.FailedAttempts) / float64(iv.Attempts); {
				case f >= 0.5:
					health = "failing"
				case f >= 0.1:
					health = "degraded"
				default:
					health = "healthy"
				}
			}
			d.rect(d.x(iv.Start), d.x(iv.Start+d.t.Interval), y, bandH, colours[health], fmt.Sprintf(` data-health="%s"`, health))
		}
	}
	d.printf("</g>\n")
}

// healthMarks marks each change of a failover endpoint's tier across the
// upstream's band: a solid mark for an ejection, a dashed one for a
// return.
func (d *drawing) healthMarks(y int) {
	if len(d.t.Health) == 0 {
		return
	}
	d.printf(`<g id="health-changes" data-series="health">` + "\n")
	for _, h := range d.t.Health {
		x := d.x(h.At)
		dash := ` stroke-dasharray="3 2"`
		if h.Health == breakwater.HealthEjected {
			dash = ""
		}
		d.printf(`<line class="health" data-endpoint="%s" data-health="%s" x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="%s" stroke-width="2"%s><title>%s: %s %s (%s)</title></line>`+"\n",
			esc(h.Endpoint), esc(string(h.Health)), x, x, y-2, y+bandH+2, colours["ejected"], dash,
			esc(fmtSeconds(h.At)), esc(h.Endpoint), esc(string(h.Health)), esc(string(h.Reason)))
	}
	d.printf("</g>\n")
}

func (d *drawing) stateBand(y int) {
	d.bandLabel(y, "breaker")
	d.printf(`<g id="band-breaker" data-series="breaker">` + "\n")
	to := func(i int) time.Duration {
		if i == len(d.t.States)-1 {
			return d.total() // the last state lasts to the end of the drawing
		}
		return d.t.States[i].To
	}
	for i, s := range d.t.States {
		if s.State != breakwater.StateHalfOpen {
			d.rect(d.x(s.From), d.x(to(i)), y, bandH, colours[s.State.String()], fmt.Sprintf(` data-state="%s"`, s.State))
		}
	}
	// Half-open spans go on top, at least minProbeW wide: a probe lasts
	// one attempt, often well under a pixel or no time at all, and would
	// otherwise show only as the two transition marks around it. The
	// widening takes at most half of the span after it, so that a breaker
	// that stays open between probes still looks open.
	for i, s := range d.t.States {
		if s.State != breakwater.StateHalfOpen {
			continue
		}
		x0, x1 := d.x(s.From), d.x(to(i))
		if x1-x0 < minProbeW {
			room := float64(left + plotW)
			if i+1 < len(d.t.States) {
				room = (x1 + d.x(to(i+1))) / 2
			}
			x1 = max(x1, min(x0+minProbeW, room))
			if x1-x0 < minProbeW && i+1 == len(d.t.States) { // at the right edge: widen leftwards
				x0 = max(float64(left), x1-minProbeW)
			}
		}
		d.rect(x0, x1, y, bandH, colours["half_open"], ` data-state="half_open"`)
	}
	for _, t := range d.t.Transitions {
		x := d.x(t.At)
		d.printf(`<line class="transition" x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#424242" stroke-width="1"><title>%s: %s → %s (%s)</title></line>`+"\n",
			x, x, y-2, y+bandH+2, esc(fmtSeconds(t.At)), t.From, t.To, esc(string(t.Reason)))
	}
	d.printf("</g>\n")
}

func (d *drawing) pauseBand(y int) {
	d.bandLabel(y, "paused")
	d.rect(left, left+plotW, y, bandH, "#f5f5f5", "")
	var values []string
	d.printf(`<g id="band-paused" data-series="paused">` + "\n")
	for _, iv := range d.t.Intervals {
		values = append(values, strconv.FormatFloat(iv.Paused.Seconds(), 'f', 2, 64))
	}
	for _, p := range d.t.Pauses {
		d.rect(d.x(p.From), d.x(p.To), y, bandH, colours["pause"], "")
	}
	d.printf("</g>\n")
	d.printf(`<desc id="paused-values" data-values="%s">seconds paused per interval</desc>`+"\n", strings.Join(values, ","))
}

func (d *drawing) axes() {
	d.printf(`<g id="axes" stroke="#9e9e9e" stroke-width="1">` + "\n")
	d.printf(`<line x1="%d" y1="%d" x2="%d" y2="%d"/>`+"\n", left, chartTop+chartH, left+plotW, chartTop+chartH)
	d.printf(`<line x1="%d" y1="%d" x2="%d" y2="%d"/>`+"\n", left, chartTop, left, chartTop+chartH)
	d.printf("</g>\n")
	for _, v := range []int{0, d.ymax / 2, d.ymax} {
		y := d.y(v)
		d.printf(`<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eeeeee"/>`+"\n", left, left+plotW, y, y)
		d.printf(`<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%d</text>`+"\n", left-6, y, v)
	}
	d.printf(`<text x="%d" y="%d" text-anchor="end" transform="rotate(-90 %d %d)">per %s</text>`+"\n",
		left-40, chartTop+chartH/2, left-40, chartTop+chartH/2, esc(fmtSeconds(d.t.Interval)))
	step := tickStep(d.total())
	for t := time.Duration(0); t <= d.total(); t += step {
		x := d.x(t)
		d.printf(`<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#9e9e9e"/>`+"\n", x, x, chartTop+chartH, chartTop+chartH+4)
		d.printf(`<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, chartTop+chartH+16, esc(fmtSeconds(t)))
	}
}

// tickStep chooses about ten ticks over total.
func tickStep(total time.Duration) time.Duration {
	for _, s := range []time.Duration{100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour} {
		if total/s <= 12 {
			return s
		}
	}
	return total / 10
}

func fmtSeconds(d time.Duration) string {
	if d < time.Second && d > 0 {
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

// bars draws the stacked call outcomes, one series per group.
func (d *drawing) bars() {
	series := append([]string{"succeeded", "failed"}, Reasons...)
	value := func(iv Interval, s string) int {
		switch s {
		case "succeeded":
			return iv.Succeeded
		case "failed":
			return iv.Failed
		}
		return iv.Rejected[s]
	}
	barW := float64(plotW) / float64(max(1, len(d.t.Intervals)))
	gap := min(2, barW/5)
	base := make([]int, len(d.t.Intervals))
	for _, s := range series {
		values := make([]string, len(d.t.Intervals))
		d.printf(`<g id="calls-%s" data-series="%s" fill="%s"`, s, s, colours[s])
		var rects bytes.Buffer
		for i, iv := range d.t.Intervals {
			v := value(iv, s)
			values[i] = strconv.Itoa(v)
			if v == 0 {
				continue
			}
			y0, y1 := d.y(base[i]+v), d.y(base[i])
			fmt.Fprintf(&rects, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`+"\n", d.x(iv.Start)+gap/2, y0, barW-gap, y1-y0)
			base[i] += v
		}
		d.printf(` data-values="%s">`+"\n", strings.Join(values, ","))
		d.b.Write(rects.Bytes())
		d.printf("</g>\n")
	}
}

func (d *drawing) line(id, label string, value func(Interval) int, attrs string) {
	values := make([]string, len(d.t.Intervals))
	points := make([]string, len(d.t.Intervals))
	for i, iv := range d.t.Intervals {
		v := value(iv)
		values[i] = strconv.Itoa(v)
		points[i] = fmt.Sprintf("%.1f,%.1f", d.x(iv.Start+d.t.Interval/2), d.y(v))
	}
	d.printf(`<polyline id="%s" data-series="%s" data-values="%s" fill="none" stroke="%s" stroke-width="2"%s points="%s"><title>%s</title></polyline>`+"\n",
		id, id, strings.Join(values, ","), colours[id], attrs, strings.Join(points, " "), esc(label))
}

// legendItems places the legend's entries, which explain every colour,
// in two rows that wrap at the plot's width: the calls' outcomes, then
// the lines and bands.
func (d *drawing) legendItems() []legendItem {
	rows := [][]legendItem{{
		{key: "succeeded", label: "succeeded", kind: "box"},
		{key: "failed", label: "failed (upstream error)", kind: "box"},
		{key: BreakerOpen, label: "rejected: breaker open", kind: "box"},
		{key: HalfOpenBusy, label: "rejected: half-open busy", kind: "box"},
		{key: Paused, label: "rejected: paused", kind: "box"},
		{key: RateLimited, label: "rejected: rate limit", kind: "box"},
		{key: Concurrency, label: "rejected: concurrency", kind: "box"},
		{key: Other, label: "rejected: other", kind: "box"},
	}, {
		{key: "sent", label: "requests the upstream saw", kind: "line"},
		{key: "retried", label: "retries", kind: "dash"},
		{key: "hedged", label: "hedges", kind: "dot"},
		{key: "closed", label: "breaker closed", kind: "box"},
		{key: "half_open", label: "breaker half-open", kind: "box"},
		{key: "open", label: "breaker open", kind: "box"},
		{key: "pause", label: "upstream asked to pause", kind: "box"},
	}}
	if d.throttled() {
		rows[1] = append(rows[1], legendItem{key: "throttled", label: "429s the upstream answered", kind: "long"})
	}
	if len(d.t.Health) > 0 {
		rows[1] = append(rows[1], legendItem{key: "ejected", label: "endpoint ejected (dashed: back)", kind: "line"})
	}
	var out []legendItem
	y := legendTop
	for _, row := range rows {
		x := 0
		for _, it := range row {
			w := 22 + int(6.2*float64(len([]rune(it.label))))
			if x > 0 && x+w > plotW {
				x, y = 0, y+legendRow
			}
			it.x, it.y = left+x, y
			out = append(out, it)
			x += w + 10
		}
		y += legendRow
	}
	return out
}

// legend draws the entries legendItems placed.
func (d *drawing) legend(items []legendItem) {
	d.printf(`<g id="legend" font-size="11">` + "\n")
	for _, it := range items {
		lx, y := it.x, it.y
		switch it.kind {
		case "box":
			d.printf(`<rect x="%d" y="%d" width="11" height="11" fill="%s"/>`, lx, y-9, colours[it.key])
		case "line":
			d.printf(`<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"/>`, lx, lx+12, y-4, y-4, colours[it.key])
		case "dash":
			d.printf(`<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2" stroke-dasharray="4 2"/>`, lx, lx+12, y-4, y-4, colours[it.key])
		case "long":
			d.printf(`<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2" stroke-dasharray="8 3"/>`, lx, lx+12, y-4, y-4, colours[it.key])
		case "dot":
			d.printf(`<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2" stroke-dasharray="2 2"/>`, lx, lx+12, y-4, y-4, colours[it.key])
		}
		d.printf(`<text x="%d" y="%d">%s</text>`+"\n", lx+16, y, esc(it.label))
	}
	d.printf("</g>\n")
}
