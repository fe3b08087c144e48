// Package stacks builds the outbound stacks that the comparative suite puts
// side by side: breakwater and each peer library, configured the way its
// documentation shows, over a base transport the caller supplies. The
// benchmarks and the resilience-quality harness build from the same
// functions, so both measure the same configurations.
package stacks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/afex/hystrix-go/hystrix"
	bw "github.com/breakwater-go/breakwater"
	"github.com/cenkalti/backoff/v5"
	"github.com/eapache/go-resiliency/breaker"
	"github.com/eapache/go-resiliency/retrier"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/sony/gobreaker/v2"
)

// Options are the settings every stack gets the same way. A zero field
// keeps the library's own default.
type Options struct {
	// AttemptTimeout bounds one attempt. Zero keeps the library's default:
	// 10 s for breakwater, none for the others (hystrix-go: 1 s).
	AttemptTimeout time.Duration
	// BackoffBase and BackoffMax set the exponential backoff between
	// attempts. Zero keeps the library's default.
	BackoffBase, BackoffMax time.Duration
}

// A Stack is one library's outbound stack as an http.RoundTripper.
type Stack struct {
	// Name is the row label, for example "failsafe-go".
	Name string
	// Config says how the stack is configured, for RESULTS.md.
	Config string
	http.RoundTripper
}

// CloseIdleConnections closes the base transport's idle connections.
func (s Stack) CloseIdleConnections() {
	if c, ok := s.RoundTripper.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// closer keeps the base transport reachable for CloseIdleConnections when a
// stack is a plain function.
type closer struct {
	rt   func(*http.Request) (*http.Response, error)
	base http.RoundTripper
}

func (c closer) RoundTrip(req *http.Request) (*http.Response, error) { return c.rt(req) }

func (c closer) CloseIdleConnections() {
	if ci, ok := c.base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// Breakwater is breakwater's default Transport: call timeout 30 s, 3
// attempts with exponential full-jitter backoff, a retry budget per host,
// a breaker per host asked before every attempt, attempt timeout 10 s.
func Breakwater(base http.RoundTripper, o Options) (Stack, error) {
	opts := []bw.Option{bw.WithBase(base)}
	cfg := "NewTransport defaults: call timeout 30 s; 3 attempts, exponential full jitter"
	if o.BackoffBase > 0 {
		opts = append(opts, bw.WithBackoff(bw.ExponentialJitter(o.BackoffBase, o.BackoffMax)))
		cfg += fmt.Sprintf(" %s–%s", o.BackoffBase, o.BackoffMax)
	} else {
		cfg += " 100ms–5s"
	}
	cfg += ", Retry-After honoured, retry budget 20 % + 3/s; breaker per host Window(10, auto), 5 s open; everything else as NewTransport sets it; attempt timeout "
	if o.AttemptTimeout > 0 {
		opts = append(opts, bw.WithAttemptTimeout(o.AttemptTimeout))
		cfg += o.AttemptTimeout.String()
	} else {
		cfg += "10s"
	}
	t, err := bw.NewTransport(opts...)
	if err != nil {
		return Stack{}, err
	}
	return Stack{Name: "breakwater", Config: cfg, RoundTripper: t}, nil
}

// FailsafeBreaker is the circuit breaker of failsafe-go's documentation
// ("opens after 5 failures, half-opens after 1 minute, closes after 2
// successes"), handling what failsafehttp's retry policy retries (errors,
// 429 and 5xx but 501) and taking its delay from Retry-After as the
// failsafehttp circuit-breaker example does.
func FailsafeBreaker() circuitbreaker.CircuitBreaker[*http.Response] {
	return circuitbreaker.NewBuilder[*http.Response]().
		HandleIf(func(resp *http.Response, err error) bool {
			return err != nil || resp.StatusCode == http.StatusTooManyRequests ||
				resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented
		}).
		WithFailureThreshold(5).
		WithDelay(time.Minute).
		WithDelayFunc(failsafehttp.DelayFunc).
		WithSuccessThreshold(2).
		Build()
}

// FailsafeRetry is failsafehttp's retry policy: 3 attempts (its default of 2
// retries), Retry-After honoured, with the backoff of o when set.
func FailsafeRetry(o Options) failsafe.Policy[*http.Response] {
	b := failsafehttp.NewRetryPolicyBuilder()
	if o.BackoffBase > 0 {
		b = b.WithBackoff(o.BackoffBase, o.BackoffMax)
	}
	return b.Build()
}

// Failsafe is failsafehttp's RoundTripper with, outer to inner, its retry
// policy, a circuit breaker and (when o sets one) a timeout per attempt:
// RetryPolicy(CircuitBreaker(Timeout(fn))), the order failsafe-go's
// documentation recommends.
func Failsafe(base http.RoundTripper, o Options) Stack {
	policies := []failsafe.Policy[*http.Response]{FailsafeRetry(o), FailsafeBreaker()}
	cfg := "failsafehttp.NewRoundTripper(retry, breaker"
	if o.AttemptTimeout > 0 {
		policies = append(policies, timeout.New[*http.Response](o.AttemptTimeout))
		cfg += ", timeout"
	}
	cfg += "): NewRetryPolicyBuilder() (3 attempts, Retry-After honoured"
	if o.BackoffBase > 0 {
		cfg += fmt.Sprintf(", WithBackoff(%s, %s)", o.BackoffBase, o.BackoffMax)
	}
	cfg += "); breaker WithFailureThreshold(5), WithDelay(1m) or Retry-After, WithSuccessThreshold(2), failures = errors, 429, 5xx"
	if o.AttemptTimeout > 0 {
		cfg += "; timeout.New(" + o.AttemptTimeout.String() + ") per attempt"
	}
	return Stack{Name: "failsafe-go", Config: cfg, RoundTripper: closer{
		rt:   failsafehttp.NewRoundTripper(base, policies...).RoundTrip,
		base: base,
	}}
}

// errStatus marks a response a breaker or retrier should count as a failure.
type errStatus struct{ code int }

func (e errStatus) Error() string { return "status " + strconv.Itoa(e.code) }

// failing reports whether a response is a failure for the breakers that only
// see errors: 5xx, as every library here counts them.
func failing(resp *http.Response) bool { return resp.StatusCode >= 500 }

// Gobreaker wraps base's RoundTrip in a sony/gobreaker v2 breaker with its
// default settings (opens after more than 5 consecutive failures, 60 s
// open, 1 half-open request). Transport errors and 5xx responses are
// failures; the response itself is returned unchanged.
func Gobreaker(base http.RoundTripper) Stack {
	cb := gobreaker.NewCircuitBreaker[*http.Response](gobreaker.Settings{Name: "upstream"})
	rt := func(req *http.Request) (*http.Response, error) {
		resp, err := cb.Execute(func() (*http.Response, error) {
			resp, err := base.RoundTrip(req)
			if err == nil && failing(resp) {
				return resp, errStatus{resp.StatusCode}
			}
			return resp, err
		})
		if errors.As(err, new(errStatus)) {
			return resp, nil
		}
		return resp, err
	}
	return Stack{
		Name:         "gobreaker",
		Config:       "gobreaker.NewCircuitBreaker(Settings{}) defaults around RoundTrip: opens after > 5 consecutive failures (errors and 5xx), 60 s open",
		RoundTripper: closer{rt: rt, base: base},
	}
}

// Retryablehttp is a go-retryablehttp RoundTripper with a nil logger and,
// when breaker is set, a gobreaker around its HTTP client's transport: the
// usual way to add a breaker to it, as it has none. RetryMax 2 makes 3
// attempts; DefaultRetryPolicy and DefaultBackoff (which honours
// Retry-After on 429 and 503) as they come.
func Retryablehttp(base http.RoundTripper, o Options, withBreaker bool) Stack {
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.RetryMax = 2
	cfg := "retryablehttp.RoundTripper, Logger nil, RetryMax 2 (3 attempts), DefaultRetryPolicy, DefaultBackoff (Retry-After honoured)"
	if o.BackoffBase > 0 {
		c.RetryWaitMin, c.RetryWaitMax = o.BackoffBase, o.BackoffMax
		cfg += fmt.Sprintf(" %s–%s", o.BackoffBase, o.BackoffMax)
	}
	inner := base
	name := "go-retryablehttp"
	if withBreaker {
		inner = Gobreaker(base)
		name += "+gobreaker"
		cfg += "; gobreaker defaults (> 5 consecutive failures, 60 s open) around the base transport"
	}
	c.HTTPClient = &http.Client{Transport: inner, Timeout: o.AttemptTimeout}
	if o.AttemptTimeout > 0 {
		cfg += "; http.Client.Timeout " + o.AttemptTimeout.String() + " per attempt"
	}
	return Stack{Name: name, Config: cfg, RoundTripper: closer{rt: (&retryablehttp.RoundTripper{Client: c}).RoundTrip, base: base}}
}

// BackoffHystrix retries with cenkalti/backoff v5 (3 tries, exponential
// backoff, RetryAfter errors for 429 as its example shows) around a
// hystrix-go command (its circuit breaker and timeout, defaults otherwise:
// opens at 50 % errors over at least 20 requests in 10 s, 5 s sleep
// window). The command's name must be unique per stack: hystrix-go keeps
// its circuits in a process-wide registry.
func BackoffHystrix(base http.RoundTripper, o Options, command string) Stack {
	hc := hystrix.CommandConfig{Timeout: hystrix.DefaultTimeout}
	if o.AttemptTimeout > 0 {
		hc.Timeout = int(o.AttemptTimeout / time.Millisecond)
	}
	hystrix.ConfigureCommand(command, hc)
	_, _, _ = hystrix.GetCircuit(command) // start its metrics goroutine now, not during a measurement
	newBackoff := func() backoff.BackOff {
		b := backoff.NewExponentialBackOff()
		if o.BackoffBase > 0 {
			b.InitialInterval, b.Multiplier, b.MaxInterval = o.BackoffBase, 2, o.BackoffMax
		}
		return b
	}
	rt := func(req *http.Request) (*http.Response, error) {
		ctx := req.Context()
		return backoff.Retry(ctx, func() (*http.Response, error) {
			got := make(chan *http.Response, 1)
			err := hystrix.DoC(ctx, command, func(ctx context.Context) error {
				resp, err := base.RoundTrip(req.WithContext(ctx))
				if err != nil {
					return err
				}
				if resp.StatusCode == http.StatusTooManyRequests {
					s, perr := strconv.Atoi(resp.Header.Get("Retry-After"))
					drain(resp)
					if perr == nil {
						return backoff.RetryAfter(s)
					}
					return errStatus{resp.StatusCode}
				}
				if failing(resp) {
					drain(resp)
					return errStatus{resp.StatusCode}
				}
				got <- resp
				return nil
			}, nil)
			if err != nil {
				return nil, err
			}
			return <-got, nil
		}, backoff.WithBackOff(newBackoff()), backoff.WithMaxTries(3))
	}
	cfg := fmt.Sprintf("backoff.Retry(WithMaxTries(3), ExponentialBackOff %s, RetryAfter on 429) around hystrix.DoC (Timeout %d ms, defaults: 50 %% errors over ≥ 20 requests / 10 s, 5 s sleep window); 5xx and 429 are errors",
		backoffDesc(o), hc.Timeout)
	return Stack{Name: "backoff+hystrix-go", Config: cfg, RoundTripper: closer{rt: rt, base: base}}
}

func backoffDesc(o Options) string {
	if o.BackoffBase > 0 {
		return fmt.Sprintf("%s–%s ×2", o.BackoffBase, o.BackoffMax)
	}
	return "defaults"
}

// Resiliency is eapache/go-resiliency: a retrier (2 retries, limited
// exponential backoff, default classifier: retry every error) around a
// breaker as its README builds it (opens after 3 errors, closes after 1
// success, 5 s timeout), with a per-attempt context timeout when o sets
// one. 5xx and 429 responses are errors (it has no notion of Retry-After).
func Resiliency(base http.RoundTripper, o Options) Stack {
	bo := retrier.ExponentialBackoff(2, 100*time.Millisecond)
	if o.BackoffBase > 0 {
		bo = retrier.LimitedExponentialBackoff(2, o.BackoffBase, o.BackoffMax)
	}
	r := retrier.New(bo, nil)
	b := breaker.New(3, 1, 5*time.Second)
	rt := func(req *http.Request) (*http.Response, error) {
		var resp *http.Response
		err := r.RunCtx(req.Context(), func(ctx context.Context) error {
			return b.Run(func() error {
				var err error
				resp, err = attempt(base, req.WithContext(ctx), o.AttemptTimeout)
				if err == nil && (failing(resp) || resp.StatusCode == http.StatusTooManyRequests) {
					drain(resp)
					code := resp.StatusCode
					resp = nil
					return errStatus{code}
				}
				return err
			})
		})
		if err != nil {
			return nil, err
		}
		return resp, nil
	}
	cfg := fmt.Sprintf("retrier.New(%s, nil) around breaker.New(3, 1, 5s)", backoffDesc(o))
	if o.AttemptTimeout > 0 {
		cfg += "; context timeout " + o.AttemptTimeout.String() + " per attempt"
	}
	cfg += "; 5xx and 429 are errors (no Retry-After support)"
	return Stack{Name: "go-resiliency", Config: cfg, RoundTripper: closer{rt: rt, base: base}}
}

// attempt makes one request under a timeout that ends when the response
// body is closed, so the body stays readable after it returns.
func attempt(base http.RoundTripper, req *http.Request, d time.Duration) (*http.Response, error) {
	if d <= 0 {
		return base.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), d)
	resp, err := base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// drain reads a discarded response's body (bounded) and closes it, so its
// connection can be reused.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

// BareTimeout is base alone with what a bare client's timeout costs: each
// request goes under context.WithTimeout(d), and the context is cancelled
// when the response body is closed or read to its end, as http.Client
// does for a Client.Timeout (without the rest of Client.Do). net/http then
// does for it what it does for any request whose context can end: a child
// context of its own registered in the request's, and a timer.
func BareTimeout(base http.RoundTripper, d time.Duration) http.RoundTripper {
	return closer{base: base, rt: func(req *http.Request) (*http.Response, error) {
		ctx, cancel := context.WithTimeout(req.Context(), d)
		resp, err := base.RoundTrip(req.WithContext(ctx))
		if err != nil {
			cancel()
			return nil, err
		}
		resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
		return resp, nil
	}}
}

// cancelBody cancels its request's context when it ends.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.cancel()
	}
	return n, err
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
