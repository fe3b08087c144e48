package svgcheck

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	head := `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 50" font-size="10">`
	for _, c := range []struct {
		name, body string
		want       string // in the error; "" for none
	}{
		{"inside", `<rect width="100%" height="100%"/><rect x="1" y="1" width="98" height="48"/><line x1="0" x2="100" y1="50" y2="50"/>` +
			`<polyline points="0,0 50,25 100,50"/><g font-size="8"><text x="2" y="40">abc</text></g><text x="98" y="25" text-anchor="end" dominant-baseline="middle">right</text>`, ""},
		{"rect below", `<rect x="0" y="40" width="10" height="11"/>`, "<rect>: x 0.0..10.0, y 40.0..51.0"},
		{"line right", `<line class="tick" x1="101" x2="101" y1="0" y2="1"/>`, `<line class="tick">`},
		{"polyline above", `<polyline id="sent" points="0,0 10,-1"/>`, `<polyline id="sent">`},
		{"text baseline low", `<text x="0" y="50">label</text>`, `<text> "label"`},
		{"text too wide", `<text x="60" y="20">a long label</text>`, `"a long label"`},
		{"text centred off the left", `<text x="2" y="20" text-anchor="middle">wide</text>`, `"wide"`},
		{"rotated text off the top", `<text x="10" y="10" text-anchor="end" transform="rotate(-90 10 10)">tall</text>`, ""},
		{"rotated text off the bottom", `<text x="10" y="40" transform="rotate(-90 10 40)">far</text>`, ""},
		{"rotated into the top", `<text x="10" y="5" transform="rotate(-90 10 5)">upward text</text>`, `"upward text"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Check(strings.NewReader(head + c.body + `</svg>`))
			switch {
			case c.want == "" && err != nil:
				t.Errorf("error %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("error %v, want one with %q", err, c.want)
			}
		})
	}
}

func TestCheckMalformed(t *testing.T) {
	for _, doc := range []string{
		``,
		`<svg xmlns="http://www.w3.org/2000/svg">`,
		`<svg viewBox="0 0 10">`,
		`<html/>`,
		`<svg viewBox="0 0 10 10"><rect x="a"/></svg>`,
		`<svg viewBox="0 0 10 10"><text transform="scale(2)">x</text></svg>`,
	} {
		if err := Check(strings.NewReader(doc)); err == nil {
			t.Errorf("%q: no error", doc)
		}
	}
}
