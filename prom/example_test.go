package prom_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"

	"github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/prom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// okUpstream stands for the network in the examples: it answers 200 to
// every request.
type okUpstream struct{}

func (okUpstream) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req, ProtoMajor: 1, ProtoMinor: 1}, nil
}

func get(client *http.Client, url string) {
	resp, err := client.Get(url)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
}

// Register the collector on your registry, observe a transport with it,
// and serve the registry with promhttp.
func Example() {
	reg := prometheus.NewRegistry()
	metrics, err := prom.New(reg)
	if err != nil {
		log.Fatal(err)
	}
	tr, err := breakwater.NewTransport(
		breakwater.WithBase(okUpstream{}), // leave it out to use the network
		breakwater.WithObserver(metrics),
	)
	if err != nil {
		log.Fatal(err)
	}
	client := &http.Client{Transport: tr}
	for range 3 {
		get(client, "https://api.example.com/v1/items")
	}

	// What Prometheus reads from /metrics:
	scrape := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(scrape, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for line := range strings.Lines(scrape.Body.String()) {
		if strings.HasPrefix(line, "breakwater_calls_total{") {
			fmt.Print(line)
		}
	}
	// Output:
	// breakwater_calls_total{category="success",key="api.example.com"} 3
}

// Report keys under a label of your own, here the service behind each
// regional host name.
func ExampleWithKeyLabel() {
	reg := prometheus.NewRegistry()
	metrics, err := prom.New(reg, prom.WithKeyLabel(func(key string) string {
		// eu.payments.example.com → payments
		if parts := strings.Split(key, "."); len(parts) > 2 {
			return parts[1]
		}
		return key
	}))
	if err != nil {
		log.Fatal(err)
	}
	tr, err := breakwater.NewTransport(breakwater.WithBase(okUpstream{}), breakwater.WithObserver(metrics))
	if err != nil {
		log.Fatal(err)
	}
	client := &http.Client{Transport: tr}
	for _, region := range []string{"eu", "us", "ap"} {
		get(client, "https://"+region+".payments.example.com/charge")
	}
	fmt.Println(testutil.CollectAndCount(metrics, prom.MetricCalls), "series")
	fmt.Println(keyLabels(reg))
	// Output:
	// 1 series
	// [payments]
}

// Past the cap, new keys are counted under "other".
func ExampleWithMaxKeys() {
	reg := prometheus.NewRegistry()
	metrics, err := prom.New(reg, prom.WithMaxKeys(2))
	if err != nil {
		log.Fatal(err)
	}
	tr, err := breakwater.NewTransport(breakwater.WithBase(okUpstream{}), breakwater.WithObserver(metrics))
	if err != nil {
		log.Fatal(err)
	}
	client := &http.Client{Transport: tr}
	for _, host := range []string{"a.example", "b.example", "c.example", "d.example"} {
		get(client, "https://"+host+"/")
	}
	fmt.Println(keyLabels(reg))
	// Output:
	// [a.example b.example other]
}

// keyLabels lists the values of the key label of breakwater_calls_total.
func keyLabels(g prometheus.Gatherer) []string {
	mfs, err := g.Gather()
	if err != nil {
		log.Fatal(err)
	}
	var keys []string
	for _, mf := range mfs {
		if mf.GetName() != prom.MetricCalls {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "key" {
					keys = append(keys, lp.GetValue())
				}
			}
		}
	}
	slices.Sort(keys)
	return keys
}
