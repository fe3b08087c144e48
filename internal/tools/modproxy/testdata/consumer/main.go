// Command consumer is a program outside the repository that imports
// breakwater, redisstore and otelbw as a user's program would: its go.mod
// (written by scripts/consumer.sh) requires them at the version being
// released, with no replace, so they come from a module proxy. It makes
// one call through each and fails when any of them does not do its job.
//
//	consumer -redis 127.0.0.1:PORT
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/breakwater-go/breakwater"
	"github.com/breakwater-go/breakwater/otelbw"
	"github.com/breakwater-go/breakwater/redisstore"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func main() {
	addr := flag.String("redis", "", "a redis-server's host:port")
	flag.Parse()
	if err := run(*addr); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

func run(addr string) error {
	if addr == "" {
		return errors.New("-redis is required")
	}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer upstream.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// The root module: a Transport in front of the upstream.
	tr, err := breakwater.NewTransport(breakwater.WithBase(upstream.Client().Transport))
	if err != nil {
		return err
	}
	if err := call(ctx, tr, upstream.URL); err != nil {
		return fmt.Errorf("breakwater: %w", err)
	}
	fmt.Println("breakwater: one call, 200")

	// redisstore: the call's rate limit admitted on Redis.
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	defer client.Close()
	// A budget long enough for a first dial on a loaded machine: the check
	// is that the admission runs on Redis, not how fast.
	store, err := redisstore.New(client, redisstore.WithNamespace("consumer"), redisstore.WithBudget(5*time.Second))
	if err != nil {
		return err
	}
	defer store.Close()
	tr, err = breakwater.NewTransport(breakwater.WithBase(upstream.Client().Transport),
		breakwater.WithRateLimit(100, 10, breakwater.WithSharedLimiter(store.Limiter("upstream"))))
	if err != nil {
		return err
	}
	if err := call(ctx, tr, upstream.URL); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	keys, err := client.Keys(ctx, "consumer:rl:upstream:*").Result()
	if err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	if len(keys) == 0 || !store.Shared() {
		return fmt.Errorf("redisstore: the admission did not reach Redis (keys %q, shared %v)", keys, store.Shared())
	}
	fmt.Printf("redisstore: one call, 200, admitted on Redis (%s)\n", keys[0])

	// otelbw: the call's metrics on an OpenTelemetry meter provider.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	obs, err := otelbw.New(otelbw.WithMeterProvider(mp))
	if err != nil {
		return err
	}
	tr, err = breakwater.NewTransport(breakwater.WithBase(upstream.Client().Transport), breakwater.WithObserver(obs))
	if err != nil {
		return err
	}
	if err := call(ctx, tr, upstream.URL); err != nil {
		return fmt.Errorf("otelbw: %w", err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		return fmt.Errorf("otelbw: %w", err)
	}
	found := false
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			found = found || m.Name == otelbw.MetricCallDuration
		}
	}
	if !found {
		return fmt.Errorf("otelbw: no %s metric after a call", otelbw.MetricCallDuration)
	}
	fmt.Printf("otelbw: one call, 200, recorded in %s\n", otelbw.MetricCallDuration)
	return nil
}

func call(ctx context.Context, tr http.RoundTripper, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		return fmt.Errorf("status %d, body %q", resp.StatusCode, body)
	}
	return nil
}
