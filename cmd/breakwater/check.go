package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/breakwater-go/breakwater"
)

// assertion is one -assert: a measure of the simulation compared to a
// value.
type assertion struct {
	text, name, op string
	want           float64 // nanoseconds for durations; +Inf for "never"
}

type assertions []assertion

// measures are what an assertion can name: how to read it from a result,
// whether it is a duration, and how to print it.
var measures = map[string]struct {
	duration bool
	get      func(breakwater.SimResult) float64
}{
	"opens": {false, func(r breakwater.SimResult) float64 {
		if r.OpensAfter == 0 {
			return math.Inf(1)
		}
		return float64(r.OpensAfter)
	}},
	"opened-at": {true, func(r breakwater.SimResult) float64 {
		if r.OpensAfter == 0 {
			return math.Inf(1)
		}
		return float64(r.OpenedAt)
	}},
	"worst-call": {true, func(r breakwater.SimResult) float64 { return float64(r.WorstCall) }},
	"elapsed":    {true, func(r breakwater.SimResult) float64 { return float64(r.Elapsed) }},
	"attempts":   {false, func(r breakwater.SimResult) float64 { return float64(r.Attempts) }},
	"calls":      {false, func(r breakwater.SimResult) float64 { return float64(r.Calls) }},
	"succeeded":  {false, func(r breakwater.SimResult) float64 { return float64(r.Succeeded) }},
	"failed":     {false, func(r breakwater.SimResult) float64 { return float64(r.Failed) }},
	"rejected":   {false, func(r breakwater.SimResult) float64 { return float64(r.Rejected) }},
	"unfinished": {false, func(r breakwater.SimResult) float64 { return float64(r.Unfinished) }},
}

// String lists the assertions, for flag's help.
func (as *assertions) String() string {
	var parts []string
	for _, a := range *as {
		parts = append(parts, a.text)
	}
	return strings.Join(parts, " ")
}

// Set parses one assertion, such as "opens<=15" or "worst-call < 5s".
func (as *assertions) Set(text string) error {
	s := strings.ReplaceAll(text, " ", "")
	i := strings.IndexAny(s, "<>=!")
	if i <= 0 {
		return fmt.Errorf("%q: want NAME OP VALUE, such as opens<=15", text)
	}
	name, rest := s[:i], s[i:]
	var op string
	for _, o := range []string{"<=", ">=", "==", "!=", "<", ">"} {
		if strings.HasPrefix(rest, o) {
			op = o
			break
		}
	}
	m, ok := measures[name]
	if op == "" || !ok {
		names := make([]string, 0, len(measures))
		for n := range measures {
			names = append(names, n)
		}
		return fmt.Errorf("%q: want NAME OP VALUE with NAME one of %s and OP one of <= < >= > == !=", text, strings.Join(slices.Sorted(slices.Values(names)), ", "))
	}
	v := rest[len(op):]
	a := assertion{text: text, name: name, op: op}
	switch {
	case v == "never" && (name == "opens" || name == "opened-at"):
		a.want = math.Inf(1)
	case m.duration:
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%q: %s is a duration, such as 5s", text, name)
		}
		a.want = float64(d)
	default:
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%q: %s is a number", text, name)
		}
		a.want = n
	}
	*as = append(*as, a)
	return nil
}

func (a assertion) holds(got float64) bool {
	switch a.op {
	case "<=":
		return got <= a.want
	case "<":
		return got < a.want
	case ">=":
		return got >= a.want
	case ">":
		return got > a.want
	case "==":
		return got == a.want
	}
	return got != a.want
}

// check prints every assertion's verdict and fails when one does not hold.
func (as assertions) check(w io.Writer, r breakwater.SimResult) error {
	failed := 0
	for _, a := range as {
		m := measures[a.name]
		got := m.get(r)
		verdict := "ok  "
		if !a.holds(got) {
			verdict = "FAIL"
			failed++
		}
		fmt.Fprintf(w, "%s %s (%s is %s)\n", verdict, a.text, a.name, format(got, m.duration))
	}
	if failed > 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("%d of %d checks failed", failed, len(as))}
	}
	return nil
}

func format(v float64, duration bool) string {
	switch {
	case math.IsInf(v, 1):
		return "never"
	case duration:
		return seconds(time.Duration(v))
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
