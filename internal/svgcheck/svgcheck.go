// Package svgcheck checks that every element of an SVG picture lies inside
// its viewBox, for the tests of the tools that draw one (the timeline, the
// breakwater command, the client demo).
//
// It reads the geometry the timeline writes: rect (x, y, width, height;
// a percentage is the whole picture), line (x1, y1, x2, y2), polyline
// (points) and text (x, y and an estimated box: a glyph is 0.56 of the
// font size wide, as the timeline assumes when it fits a title, with
// text-anchor and dominant-baseline applied, and a rotate(a cx cy)
// transform). Font sizes are inherited from the enclosing elements.
package svgcheck

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// glyphWidth is a glyph's width as a fraction of the font size.
const glyphWidth = 0.56

// box is an axis-aligned rectangle.
type box struct{ x0, y0, x1, y1 float64 }

func (b box) String() string {
	return fmt.Sprintf("x %.1f..%.1f, y %.1f..%.1f", b.x0, b.x1, b.y0, b.y1)
}

// Check reads one SVG document and reports every element that reaches
// outside its root's viewBox, or an error if it is not well-formed or has
// no viewBox.
func Check(r io.Reader) error {
	dec := xml.NewDecoder(r)
	var (
		view     *box
		sizes    []float64 // font size of each open element
		problems []error
		text     *xml.StartElement // the text element being read
		content  strings.Builder
		textSize float64
	)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("not well-formed: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			size := 16.0 // SVG's default
			if len(sizes) > 0 {
				size = sizes[len(sizes)-1]
			}
			if v, ok := attr(t, "font-size"); ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					size = f
				}
			}
			sizes = append(sizes, size)
			if view == nil {
				if t.Name.Local != "svg" {
					return fmt.Errorf("the root element is <%s>, not <svg>", t.Name.Local)
				}
				v, err := viewBox(t)
				if err != nil {
					return err
				}
				view = &v
				continue
			}
			if t.Name.Local == "text" {
				text, textSize = &t, size
				content.Reset()
				continue
			}
			b, ok, err := bounds(t, *view)
			if err != nil {
				problems = append(problems, err)
			} else if ok && !inside(b, *view) {
				problems = append(problems, fmt.Errorf("%s: %v, outside the viewBox (%v)", describe(t), b, *view))
			}
		case xml.CharData:
			if text != nil {
				content.Write(t)
			}
		case xml.EndElement:
			sizes = sizes[:len(sizes)-1]
			if text != nil && t.Name.Local == "text" {
				b, err := textBounds(*text, textSize, content.String())
				label := fmt.Sprintf("<text> %q", strings.TrimSpace(content.String()))
				if err != nil {
					problems = append(problems, fmt.Errorf("%s: %w", label, err))
				} else if !inside(b, *view) {
					problems = append(problems, fmt.Errorf("%s: %v, outside the viewBox (%v)", label, b, *view))
				}
				text = nil
			}
		}
	}
	if view == nil {
		return errors.New("no <svg> element")
	}
	return errors.Join(problems...)
}

func attr(el xml.StartElement, name string) (string, bool) {
	for _, a := range el.Attr {
		if a.Name.Local == name {
			return a.Value, true
		}
	}
	return "", false
}

// num reads a numeric attribute; a missing one is 0, and a percentage
// is that share of whole.
func num(el xml.StartElement, name string, whole float64) (float64, error) {
	v, ok := attr(el, name)
	if !ok {
		return 0, nil
	}
	if p, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %s=%q: %w", describe(el), name, v, err)
		}
		return whole * f / 100, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %s=%q: %w", describe(el), name, v, err)
	}
	return f, nil
}

func viewBox(el xml.StartElement) (box, error) {
	v, ok := attr(el, "viewBox")
	if !ok {
		return box{}, errors.New("<svg> has no viewBox")
	}
	f := strings.Fields(strings.ReplaceAll(v, ",", " "))
	if len(f) != 4 {
		return box{}, fmt.Errorf("viewBox %q: want four numbers", v)
	}
	var n [4]float64
	for i, s := range f {
		var err error
		if n[i], err = strconv.ParseFloat(s, 64); err != nil {
			return box{}, fmt.Errorf("viewBox %q: %w", v, err)
		}
	}
	return box{n[0], n[1], n[0] + n[2], n[1] + n[3]}, nil
}

// bounds is the box of a shape; ok is false for elements without
// geometry (groups, titles, descriptions).
func bounds(el xml.StartElement, view box) (b box, ok bool, err error) {
	w, h := view.x1-view.x0, view.y1-view.y0
	get := func(name string, whole float64) float64 {
		if err != nil {
			return 0
		}
		var v float64
		v, err = num(el, name, whole)
		return v
	}
	switch el.Name.Local {
	case "rect":
		x, y := get("x", w), get("y", h)
		b = box{x, y, x + get("width", w), y + get("height", h)}
	case "line":
		x1, y1, x2, y2 := get("x1", w), get("y1", h), get("x2", w), get("y2", h)
		b = box{min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)}
	case "polyline", "polygon":
		pts, _ := attr(el, "points")
		b = box{math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)}
		f := strings.Fields(strings.ReplaceAll(pts, ",", " "))
		if len(f)%2 != 0 {
			return b, false, fmt.Errorf("%s: points %q: odd count", describe(el), pts)
		}
		for i := 0; i < len(f); i += 2 {
			x, err1 := strconv.ParseFloat(f[i], 64)
			y, err2 := strconv.ParseFloat(f[i+1], 64)
			if err := errors.Join(err1, err2); err != nil {
				return b, false, fmt.Errorf("%s: points: %w", describe(el), err)
			}
			b = box{min(b.x0, x), min(b.y0, y), max(b.x1, x), max(b.y1, y)}
		}
		if len(f) == 0 {
			return b, false, nil
		}
	default:
		return b, false, nil
	}
	return b, err == nil, err
}

// textBounds estimates the box of a text element's glyphs.
func textBounds(el xml.StartElement, size float64, content string) (box, error) {
	x, err := num(el, "x", 0)
	if err != nil {
		return box{}, err
	}
	y, err := num(el, "y", 0)
	if err != nil {
		return box{}, err
	}
	if v, ok := attr(el, "font-size"); ok {
		if size, err = strconv.ParseFloat(v, 64); err != nil {
			return box{}, fmt.Errorf("font-size %q: %w", v, err)
		}
	}
	w := glyphWidth * size * float64(len([]rune(strings.TrimSpace(content))))
	b := box{x, y - 0.8*size, x + w, y + 0.25*size} // ascent and descent around the baseline
	switch v, _ := attr(el, "text-anchor"); v {
	case "middle":
		b.x0, b.x1 = x-w/2, x+w/2
	case "end":
		b.x0, b.x1 = x-w, x
	}
	if v, _ := attr(el, "dominant-baseline"); v == "middle" || v == "central" {
		b.y0, b.y1 = y-size/2, y+size/2
	}
	if v, ok := attr(el, "transform"); ok {
		return rotate(b, v)
	}
	return b, nil
}

// rotate applies a "rotate(a cx cy)" transform to b.
func rotate(b box, transform string) (box, error) {
	inner, ok := strings.CutPrefix(strings.TrimSpace(transform), "rotate(")
	inner, ok2 := strings.CutSuffix(inner, ")")
	f := strings.Fields(strings.ReplaceAll(inner, ",", " "))
	if !ok || !ok2 || len(f) != 3 {
		return box{}, fmt.Errorf("transform %q: want rotate(a cx cy)", transform)
	}
	var n [3]float64
	for i, s := range f {
		var err error
		if n[i], err = strconv.ParseFloat(s, 64); err != nil {
			return box{}, fmt.Errorf("transform %q: %w", transform, err)
		}
	}
	sin, cos := math.Sincos(n[0] * math.Pi / 180)
	out := box{math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)}
	for _, p := range [][2]float64{{b.x0, b.y0}, {b.x1, b.y0}, {b.x0, b.y1}, {b.x1, b.y1}} {
		dx, dy := p[0]-n[1], p[1]-n[2]
		x, y := n[1]+dx*cos-dy*sin, n[2]+dx*sin+dy*cos
		out = box{min(out.x0, x), min(out.y0, y), max(out.x1, x), max(out.y1, y)}
	}
	return out, nil
}

// inside reports whether b lies in view, within a hundredth of a unit
// (coordinates are printed to a tenth).
func inside(b, view box) bool {
	const e = 0.01
	return b.x0 >= view.x0-e && b.y0 >= view.y0-e && b.x1 <= view.x1+e && b.y1 <= view.y1+e
}

// describe names an element by its tag and id, class or series.
func describe(el xml.StartElement) string {
	for _, name := range []string{"id", "data-series", "class"} {
		if v, ok := attr(el, name); ok {
			return fmt.Sprintf("<%s %s=%q>", el.Name.Local, name, v)
		}
	}
	return "<" + el.Name.Local + ">"
}
