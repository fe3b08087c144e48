package hints

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

func TestParseQuotaReset(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	date := now.Add(-10 * time.Second).UTC().Format(http.TimeFormat) // the server's clock is 10 s behind
	for _, tc := range []struct {
		name string
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{"none", http.Header{}, 0, false},
		{"structured spent", http.Header{"Ratelimit": {`"default";r=0;t=5`}}, 5 * time.Second, true},
		{"structured left", http.Header{"Ratelimit": {`"default";r=3;t=5`}}, 0, false},
		{"token name", http.Header{"Ratelimit": {`default;r=0;t=7`}}, 7 * time.Second, true},
		{"spaces", http.Header{"Ratelimit": {` "default" ; r=0 ; t=5 `}}, 0, false},
		{"OWS around members", http.Header{"Ratelimit": {`  "a";r=1;t=1 ,  "b";r=0;t=9  `}}, 9 * time.Second, true},
		{"longest spent policy", http.Header{"Ratelimit": {`"burst";r=0;t=2, "daily";r=0;t=3600`}}, time.Hour, true},
		{"several lines", http.Header{"Ratelimit": {`"burst";r=5;t=2`, `"daily";r=0;t=30`}}, 30 * time.Second, true},
		{"window from policy", http.Header{"Ratelimit": {`"default";r=0`}, "Ratelimit-Policy": {`"other";q=1;w=9, "default";q=100;w=60`}}, time.Minute, true},
		{"no reset, no policy", http.Header{"Ratelimit": {`"default";r=0`}}, 0, false},
		{"decimal reset", http.Header{"Ratelimit": {`"default";r=0;t=1.5`}}, 1500 * time.Millisecond, true},
		{"escaped name", http.Header{"Ratelimit": {`"a\"b";r=0`}, "Ratelimit-Policy": {`"a\"b";w=4`}}, 4 * time.Second, true},
		{"comma in quoted name", http.Header{"Ratelimit": {`"a,b";r=0;t=6`}}, 6 * time.Second, true},
		{"boolean parameter", http.Header{"Ratelimit": {`"d";x;r=0;t=2`}}, 2 * time.Second, true},
		{"negative reset", http.Header{"Ratelimit": {`"d";r=0;t=-5`}}, 0, false},
		{"garbage reset", http.Header{"Ratelimit": {`"d";r=0;t=soon`}}, 0, false},
		{"unterminated", http.Header{"Ratelimit": {`"d;r=0;t=5`}}, 0, false},
		{"inner list", http.Header{"Ratelimit": {`("a" "b");r=0;t=5`}}, 0, false},
		{"overlong reset", http.Header{"Ratelimit": {`"d";r=0;t=99999999999999999999`}}, 0, false},
		{"dictionary form", http.Header{"Ratelimit": {`limit=100, remaining=0, reset=8`}}, 8 * time.Second, true},
		{"dictionary left", http.Header{"Ratelimit": {`limit=100, remaining=4, reset=8`}}, 0, false},
		{"draft fields", http.Header{"Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"12"}}, 12 * time.Second, true},
		{"x fields", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"5"}}, 5 * time.Second, true},
		{"x fields left", http.Header{"X-Ratelimit-Remaining": {"10"}, "X-Ratelimit-Reset": {"5"}}, 0, false},
		{"x fields no reset", http.Header{"X-Ratelimit-Remaining": {"0"}}, 0, false},
		{"x epoch against Date", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {strconv.FormatInt(now.Unix()+20, 10)}, "Date": {date}}, 30 * time.Second, true},
		{"x epoch against now", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {strconv.FormatInt(now.Unix()+20, 10)}}, 20 * time.Second, true},
		{"x epoch in the past", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {strconv.FormatInt(now.Unix()-20, 10)}}, 0, true},
		{"x garbage", http.Header{"X-Ratelimit-Remaining": {"zero"}, "X-Ratelimit-Reset": {"5"}}, 0, false},
		{"longest of all forms", http.Header{"Ratelimit": {`"d";r=0;t=5`}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"9"}}, 9 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := QuotaReset(tc.h, now)
			if d != tc.want || ok != tc.ok {
				t.Errorf("QuotaReset = %s, %v; want %s, %v", d, ok, tc.want, tc.ok)
			}
		})
	}
}

func FuzzParseQuotaReset(f *testing.F) {
	f.Add(`"default";r=0;t=5`, `"default";q=100;w=60`, "0", "5")
	f.Add(`limit=1, remaining=0, reset=3`, ``, "", "")
	f.Add(`"a\"b";r=0`, `"a\"b";w=4`, "0", "1700000000")
	f.Add(`("x");r=0;t=1, "y";r=0;t=-1.5;z`, `;;;`, "00", "99999999999999999999999")
	f.Fuzz(func(t *testing.T, rl, policy, remaining, reset string) {
		h := http.Header{}
		for k, v := range map[string]string{"Ratelimit": rl, "Ratelimit-Policy": policy, "X-Ratelimit-Remaining": remaining, "X-Ratelimit-Reset": reset} {
			if v != "" {
				h[k] = []string{v}
			}
		}
		d, ok := QuotaReset(h, time.Unix(1_700_000_000, 0))
		if d < 0 || (!ok && d != 0) || d > 100*365*24*time.Hour {
			t.Fatalf("QuotaReset(%q) = %s, %v", h, d, ok)
		}
	})
}
