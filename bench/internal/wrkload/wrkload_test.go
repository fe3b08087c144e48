package wrkload

import (
	"strings"
	"testing"
	"time"
)

const wrkOut = `Running 3s test @ http://127.0.0.1:40000/v1/items/42
  2 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   310.05us  402.11us  12.58ms   94.17%
    Req/Sec    22.51k     2.10k   26.80k    70.00%
  Latency Distribution
     50%  252.00us
     75%  330.00us
     90%  451.00us
     99%    1.81ms
  134437 requests in 3.00s, 15.51MB read
Requests/sec:  44812.33
Transfer/sec:      5.17MB
`

// TestParse reads wrk's figures, and fails a run with a refused request or
// a socket error.
func TestParse(t *testing.T) {
	m, err := parse(wrkOut)
	if err != nil || m.rps != 44812.33 || m.p50 != 252*time.Microsecond {
		t.Fatalf("parse: %+v, %v", m, err)
	}
	for _, extra := range []string{"  Non-2xx or 3xx responses: 12\n", "  Socket errors: connect 0, read 3, write 0, timeout 0\n"} {
		out := strings.Replace(wrkOut, "Requests/sec:", extra+"Requests/sec:", 1)
		if _, err := parse(out); err == nil {
			t.Errorf("parse accepts %q", extra)
		}
	}
	if _, err := parse("Running 3s test\n"); err == nil {
		t.Error("parse accepts no Requests/sec")
	}
}

func TestMedian(t *testing.T) {
	if got := Median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("odd: %v", got)
	}
	if got := Median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("even: %v", got)
	}
}
