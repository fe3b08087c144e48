package sat

import (
	"math"
	"testing"
	"time"
)

func TestSaturates(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want int64
	}{
		{"add", Add(1, 2), 3},
		{"add past the end", Add(math.MaxInt64-1, 2), math.MaxInt64},
		{"add past the start", Add(math.MinInt64+1, -2), math.MinInt64},
		{"mul", int64(Mul(time.Second, 3)), int64(3 * time.Second)},
		{"mul past the end", int64(Mul(math.MaxInt64/2, 3)), math.MaxInt64},
		{"mul of nothing", int64(Mul(time.Second, 0)), 0},
		{"frac", int64(Frac(time.Second, 0.25)), int64(250 * time.Millisecond)},
		{"frac past the end", int64(Frac(math.MaxInt64, 2)), math.MaxInt64},
		{"seconds rounded up", int64(SecondsCeil(1.0000000001)), int64(time.Second + 1)},
		{"seconds past the end", int64(SecondsCeil(1e300)), math.MaxInt64},
		{"negative seconds", int64(SecondsCeil(-1)), 0},
		{"NaN seconds", int64(SecondsCeil(math.NaN())), math.MaxInt64},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}
