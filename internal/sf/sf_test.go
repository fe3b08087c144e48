package sf

import (
	"math"
	"reflect"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// member builds the Member a test expects; params holds R, T, Q, W values
// by parameter.
func member(name string, params map[int]float64) Member {
	m := Member{Name: name}
	for p, v := range params {
		m.Num[p] = v
		m.present |= 1 << p
	}
	return m
}

func TestEach(t *testing.T) {
	dict := func(name string, v float64) Member { return Member{Name: name, Value: v, HasValue: true} }
	for _, tc := range []struct {
		name  string
		lines []string
		want  []Member
	}{
		{"list of strings", []string{`"default";r=0;t=5, "burst";r=3;t=1`},
			[]Member{member("default", map[int]float64{R: 0, T: 5}), member("burst", map[int]float64{R: 3, T: 1})}},
		{"policy", []string{`"default";q=100;w=60`}, []Member{member("default", map[int]float64{Q: 100, W: 60})}},
		{"several lines", []string{`a;r=1`, ` b;t=2 `}, []Member{member("a", map[int]float64{R: 1}), member("b", map[int]float64{T: 2})}},
		{"dictionary", []string{"limit=100, remaining=0, reset=5"}, []Member{dict("limit", 100), dict("remaining", 0), dict("reset", 5)}},
		{"comma inside a quoted name", []string{`"a,b";r=1`}, []Member{member("a,b", map[int]float64{R: 1})}},
		{"escaped quote and backslash", []string{`"a\"b\\c";t=1`}, []Member{member(`a"b\c`, map[int]float64{T: 1})}},
		{"decimal and negative", []string{`p;t=1.25;r=-2`}, []Member{member("p", map[int]float64{T: 1.25, R: -2})}},
		{"other and boolean parameters are skipped", []string{`p;x=1;y;t=2`}, []Member{member("p", map[int]float64{T: 2})}},
		{"malformed members are skipped", []string{`"open, ok;t=1`, `(inner list);t=1, good;r=1, bad;t=x, ;t=1, b;t=1.`},
			[]Member{member("good", map[int]float64{R: 1})}},
		{"bad escape", []string{`"a\x";t=1, b;t=2`}, []Member{member("b", map[int]float64{T: 2})}},
		{"control character in a string", []string{"\"a\x01\";t=1"}, nil},
		{"junk after an item", []string{`a b;t=1`}, nil},
		{"empty", []string{"", " , "}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []Member
			Each(tc.lines, func(m Member) { got = append(got, m) })
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Each(%q) =\n  %+v\nwant\n  %+v", tc.lines, got, tc.want)
			}
		})
	}
}

func TestHas(t *testing.T) {
	var got Member
	Each([]string{"p;t=0"}, func(m Member) { got = m })
	if !got.Has(T) || got.Has(R) || got.Has(Q) || got.Has(W) {
		t.Errorf("Has: t=%v r=%v q=%v w=%v, want only t", got.Has(T), got.Has(R), got.Has(Q), got.Has(W))
	}
}

func TestLongNumbersSaturate(t *testing.T) {
	var got Member
	Each([]string{"p;t=99999999999999999999999999999999999999"}, func(m Member) { got = m })
	if v := got.Num[T]; !got.Has(T) || v < 1e18 || v > 1e20 {
		t.Errorf("t = %v, want a saturated value near 1e18", v)
	}
}

func TestTrimOWS(t *testing.T) {
	for in, want := range map[string]string{"": "", " \t a b\t ": "a b", "x": "x", "\t\t": ""} {
		if got := TrimOWS(in); got != want {
			t.Errorf("TrimOWS(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzEach(f *testing.F) {
	for _, s := range []string{`"default";r=0;t=5`, "limit=1, remaining=0, reset=2", `"a\"";q=1;w=2.5`, `;;,"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		Each([]string{s}, func(m Member) {
			for _, v := range append(m.Num[:], m.Value) {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("Each(%q) gave a member with a number %v", s, v)
				}
			}
		})
	})
}
