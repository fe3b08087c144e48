package tail

import (
	"fmt"
	"io"
	"time"
)

// Markdown writes the tail-latency table of r and the stacks'
// configurations.
func Markdown(w io.Writer, r Report) {
	cfg := r.Config
	fmt.Fprintf(w, "A loopback `httptest` upstream answers in %s, but in %s for a random %.0f %% of its requests (each request drawn anew, hedges included; a cancelled request stops waiting). "+
		"%d goroutines make %d calls per stack after %d warm-up calls, %d rounds with the stacks in turn; the percentiles are the median of the rounds', the requests their sum. "+
		"*Extra requests* is the upstream's requests beyond one per call. *Connections left*: server connections still open after the calls, idle ones closed.\n\n",
		cfg.Fast, cfg.Slow, cfg.SlowShare*100, cfg.Workers, cfg.Calls, cfg.Warmup, cfg.Rounds)
	fmt.Fprint(w, "| stack | p50 | p99 | p99.9 | p99 vs no hedging | extra requests | failed calls | connections left |\n|---|--:|--:|--:|--:|--:|--:|--:|\n")
	ref, hasRef := r.Find("breakwater-nohedge")
	for _, res := range r.Results {
		name := res.Library
		if len(name) >= 10 && name[:10] == "breakwater" {
			name = "**" + name + "**"
		}
		vs := "–"
		if hasRef && ref.P99 > 0 {
			vs = fmt.Sprintf("%.2f", float64(res.P99)/float64(ref.P99))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %.1f %% | %d | %d |\n", name, ms(res.P50), ms(res.P99), ms(res.P999), vs, 100*res.Extra(), res.Failed, res.Conns)
	}
	fmt.Fprint(w, "\nConfigurations:\n\n| stack | configuration |\n|---|---|\n")
	for _, st := range r.Stacks {
		fmt.Fprintf(w, "| %s | %s |\n", st.Name, st.Config)
	}
	fmt.Fprintln(w)
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}
