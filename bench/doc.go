// Package bench is breakwater's comparative benchmark suite: the same work
// measured on breakwater and on the libraries users would pick instead, in
// the same run, plus a resilience-quality harness (cmd/quality) that runs
// each library against failing loopback upstreams and a tail-latency
// harness (cmd/tail) that puts hedged requests side by side, and the
// inbound middleware under a real load generator (cmd/wrkload: real
// http.Servers on loopback, driven by wrk in alternating rounds).
//
// It is a module of its own, so no peer library ever enters breakwater's
// go.mod. Run everything and write RESULTS.md with
//
//	bench/run.sh
//
// or one group by hand, for example
//
//	cd bench && go test -run '^$' -bench 'BreakerClosed' -cpu 1,2 -count 6
//	cd bench && go run ./cmd/wrkload
//
// Benchmark names are Group/run=serial|parallel/lib=name, so benchstat can
// put the libraries side by side: benchstat -col /lib results.txt.
package bench
