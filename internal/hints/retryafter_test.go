package hints

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	tests := []struct {
		name   string
		values []string // Retry-After field lines; nil means absent
		date   string   // the Date field, if any
		want   time.Duration
		wantOK bool
	}{
		{name: "absent"},
		{name: "seconds", values: []string{"2"}, want: 2 * time.Second, wantOK: true},
		{name: "padded", values: []string{"  7 "}, want: 7 * time.Second, wantOK: true},
		{name: "tabs", values: []string{"\t7\t"}, want: 7 * time.Second, wantOK: true},
		{name: "zero", values: []string{"0"}, want: 0, wantOK: true},
		{name: "leading_zeros", values: []string{"000000000000000000000000000042"}, want: 42 * time.Second, wantOK: true},
		{name: "negative", values: []string{"-5"}},
		{name: "plus", values: []string{"+5"}},
		{name: "fraction", values: []string{"1.5"}},
		{name: "garbage", values: []string{"abc"}},
		{name: "digits_then_garbage", values: []string{"5s"}},
		{name: "two_numbers", values: []string{"5 6"}},
		{name: "list", values: []string{"5, 6"}},
		{name: "empty", values: []string{""}},
		{name: "whitespace", values: []string{"   "}},
		{name: "overflow", values: []string{"99999999999999999999"}},
		{name: "beyond_duration", values: []string{"9223372037"}},
		{name: "100_years", values: []string{"3153600000"}, want: 3153600000 * time.Second, wantOK: true},
		{name: "over_100_years", values: []string{"3153600001"}},
		{name: "100_years_then_a_digit", values: []string{"31536000000"}},
		{name: "first_line_wins", values: []string{"3", "600"}, want: 3 * time.Second, wantOK: true},
		{name: "first_line_garbage", values: []string{"soon", "600"}},
		{name: "imf_fixdate", values: []string{"Thu, 02 Jan 2025 03:04:15 GMT"}, want: 10 * time.Second, wantOK: true},
		{name: "rfc850", values: []string{"Thursday, 02-Jan-25 03:04:15 GMT"}, want: 10 * time.Second, wantOK: true},
		{name: "asctime", values: []string{"Thu Jan  2 03:04:15 2025"}, want: 10 * time.Second, wantOK: true},
		{name: "padded_date", values: []string{" Thu, 02 Jan 2025 03:04:15 GMT "}, want: 10 * time.Second, wantOK: true},
		{
			// The server's clock is an hour behind ours: its date is three
			// seconds after its own Date, so the wait is three seconds, not
			// zero.
			name:   "skewed_date",
			values: []string{httpDate(epoch.Add(-time.Hour + 3*time.Second))},
			date:   httpDate(epoch.Add(-time.Hour)),
			want:   3 * time.Second, wantOK: true,
		},
		{
			name:   "skewed_ahead",
			values: []string{httpDate(epoch.Add(time.Hour + 3*time.Second))},
			date:   httpDate(epoch.Add(time.Hour)),
			want:   3 * time.Second, wantOK: true,
		},
		{name: "bad_date_header_uses_now", values: []string{"Thu, 02 Jan 2025 03:04:15 GMT"}, date: "yesterday", want: 10 * time.Second, wantOK: true},
		{name: "past", values: []string{"Thu, 02 Jan 2025 03:04:00 GMT"}, want: 0, wantOK: true},
		{name: "past_against_date_header", values: []string{"Thu, 02 Jan 2025 03:04:00 GMT"}, date: "Thu, 02 Jan 2025 04:00:00 GMT", want: 0, wantOK: true},
		{name: "long_ago", values: []string{"Mon, 01 Jan 0001 00:00:00 GMT"}, want: 0, wantOK: true},
		{name: "far_future", values: []string{"Fri, 31 Dec 9999 23:59:59 GMT"}},
		{name: "date_100_years_ahead", values: []string{httpDate(epoch.Add(maxHint))}, date: httpDate(epoch), want: maxHint, wantOK: true},
		{name: "date_over_100_years_ahead", values: []string{httpDate(epoch.Add(maxHint + time.Second))}, date: httpDate(epoch)},
		{name: "date_with_zone", values: []string{"Thu, 02 Jan 2025 03:04:15 +0000"}},
		{name: "date_garbage", values: []string{"Thu, 02 Jan 2025 25:04:15 GMT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.values != nil {
				h["Retry-After"] = tt.values
			}
			if tt.date != "" {
				h.Set("Date", tt.date)
			}
			got, ok := RetryAfter(h, epoch)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("RetryAfter(%q, Date %q) = %v, %v; want %v, %v", tt.values, tt.date, got, ok, tt.want, tt.wantOK)
			}
		})
	}
	t.Run("nil_header", func(t *testing.T) {
		if d, ok := RetryAfter(nil, epoch); d != 0 || ok {
			t.Errorf("RetryAfter(nil) = %v, %v; want 0, false", d, ok)
		}
	})
}

func TestParseRetryAfterAllocs(t *testing.T) {
	h := http.Header{"Retry-After": {" 30 "}}
	allocs := testing.AllocsPerRun(100, func() {
		if _, ok := RetryAfter(h, epoch); !ok {
			t.Fatal("not ok")
		}
	})
	if allocs != 0 {
		t.Errorf("RetryAfter(delta-seconds) allocates %v times, want 0", allocs)
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, seed := range [][2]string{
		{"2", ""}, {"  7 ", ""}, {"0", ""}, {"-5", ""}, {"1.5", ""}, {"abc", ""}, {"", ""}, {"   ", ""},
		{"99999999999999999999", ""}, {"3153600000", ""}, {"3153600001", ""}, {"9223372037", ""},
		{"Thu, 02 Jan 2025 03:04:15 GMT", ""},
		{"Thursday, 02-Jan-25 03:04:15 GMT", ""},
		{"Thu Jan  2 03:04:15 2025", ""},
		{"Thu, 02 Jan 2025 02:04:08 GMT", "Thu, 02 Jan 2025 02:04:05 GMT"},
		{"Thu, 02 Jan 2025 03:04:00 GMT", ""},
		{"Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 0001 00:00:00 GMT"},
		{"Mon, 01 Jan 0001 00:00:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT"},
		{"Thu, 02 Jan 2025 03:04:15 GMT", "garbage"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, value, date string) {
		h := http.Header{"Retry-After": {value}}
		if date != "" {
			h["Date"] = []string{date}
		}
		d, ok := RetryAfter(h, epoch)
		if !ok && d != 0 {
			t.Errorf("RetryAfter(%q, %q) = %v, false; want 0 when not ok", value, date, d)
		}
		if ok && (d < 0 || d > 100*365*24*time.Hour) {
			t.Errorf("RetryAfter(%q, %q) = %v, true; want within [0, 100 years]", value, date, d)
		}
	})
}

// epoch is the local clock of the tests: 2025-01-02 03:04:05 UTC.
var epoch = time.Date(2025, time.January, 2, 3, 4, 5, 0, time.UTC)

func httpDate(t time.Time) string { return t.UTC().Format(http.TimeFormat) }
