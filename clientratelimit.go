package breakwater

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/breakwater-go/breakwater/internal/gcra"
	"github.com/breakwater-go/breakwater/internal/hints"
)

// defaultRateLimitPolicy is the policy name in a ClientRateLimit's
// RateLimit-Policy and RateLimit fields.
const defaultRateLimitPolicy = "default"

// WithRateLimitPolicyName sets the policy name in the RateLimit-Policy and
// RateLimit fields of a [ClientRateLimit]; several limits on one route
// need different names: each adds its policy to the fields (the
// X-RateLimit-* fields, which hold one limit, are the innermost's). It must be 1 to 64 printable ASCII characters other
// than '"' and '\'. It configures [ClientRateLimit]. Default: "default".
func WithRateLimitPolicyName(name string) Option {
	return option(func(s *settings) {
		if c := s.forInbound("WithRateLimitPolicyName", "ClientRateLimit"); c != nil {
			c.policy = name
		}
	})
}

// WithXRateLimitHeaders, when on, adds the older, unstandardised
// X-RateLimit-Limit (the burst), X-RateLimit-Remaining and
// X-RateLimit-Reset (the Unix time, in seconds, at which the bucket is
// full again) fields to every response, for clients that read those. It
// configures [ClientRateLimit]. Default: off.
func WithXRateLimitHeaders(on bool) Option {
	return option(func(s *settings) {
		if c := s.forInbound("WithXRateLimitHeaders", "ClientRateLimit"); c != nil {
			c.xHeaders = on
		}
	})
}

// maxKeyLen bounds the keys a ClientRateLimit stores; longer keys (a
// client-chosen header value) are stored as a digest (storeKey).
const maxKeyLen = 128

// digestLen is how many bytes of a long key's SHA-256 digest name it.
const digestLen = 16

// rateTableMax bounds the precomputed RateLimit field values.
const rateTableMax = 2048

// ClientRateLimit limits each client (or whatever its [KeyFunc] names) to
// a token bucket of a [RateLimiters] registry: a request takes a token or
// is answered 429 Too Many Requests with a Retry-After of the time until
// the client's next token, rounded up to whole seconds and never 0, without
// calling the handler. It never waits for a token (the registry's wait
// setting does not apply).
//
// Every response it sees, admitted or not, carries the IETF RateLimit
// fields (draft-ietf-httpapi-ratelimit-headers): RateLimit-Policy
// describes the bucket as a quota of burst requests per window of
// burst/limit seconds (rounded up), `"default";q=10;w=1` for 10/s with
// a burst of 10; RateLimit gives the client's remaining whole tokens and
// the seconds until its next token, `"default";r=3;t=1` (the draft's
// "seconds until additional quota is made available", rounded up): on a
// 429, t is the Retry-After value, never more.
// [WithXRateLimitHeaders] adds the X-RateLimit-* fields.
//
// Per-key state lives in the registry and is bounded by it
// ([WithKeyLimits]: a cap on keys, eviction of idle buckets, room made
// for a new client at once, so that a client's first request is never
// refused for what other clients did); keys longer than 128 bytes are
// stored as "#" and the first 128 bits of their SHA-256 digest, in hex, so
// a client cannot grow memory through a long header value, and replicas
// sharing a store ([WithSharedLimiter]) name a long key alike (a key of
// up to 128 bytes that starts with "#" is stored as a digest too, so that
// no key is taken for another's digest). A request whose key is "" uses
// the bucket of "", shared by every such request.
//
// Retries go last: a request that a breakwater caller says is a retry
// ([CallerHeaders] mounted before it, with no other library's writer
// wrapper between them; [CallerAttempt] of 2 or more) is admitted only
// while the client's bucket keeps half its burst (rounded down) after it, so
// that a client over its limit has its retries refused before its first
// attempts. A bucket in a shared store ([WithSharedLimiter]) serves
// retries like first attempts.
//
// rl must not be nil, and key is required: every call site states what it
// limits by (for example [RemoteAddrKey], or [ForwardedForKey] behind a
// proxy). Other opts are [WithRateLimitPolicyName],
// [WithXRateLimitHeaders], [WithObserver], [WithDenyHandler] and
// [WithExempt].
//
// The middleware is safe for concurrent use. An admitted request costs a
// map lookup, a token bucket update and, for buckets whose header values
// fit a precomputed table (burst+1 times window+1 up to 2048), no
// allocation.
func ClientRateLimit(rl *RateLimiters, key KeyFunc, opts ...Option) (func(http.Handler) http.Handler, error) {
	crl, err := newClientRateLimit(rl, key, opts)
	if err != nil {
		return nil, err
	}
	return crl.wrap, nil
}

// newClientRateLimit is ClientRateLimit's state.
func newClientRateLimit(rl *RateLimiters, key KeyFunc, opts []Option) (*clientRateLimit, error) {
	c := inboundConfig{policy: defaultRateLimitPolicy}
	s := inboundSettings("ClientRateLimit", &c)
	s.applyOptions(opts)
	errs := s.errs
	if rl == nil {
		errs = append(errs, errors.New("breakwater: ClientRateLimit needs a RateLimiters registry"))
	}
	if key == nil {
		errs = append(errs, errors.New("breakwater: ClientRateLimit needs a KeyFunc"))
	}
	if !validPolicyName(c.policy) {
		errs = append(errs, fmt.Errorf("breakwater: invalid rate limit policy name %q", c.policy))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	crl := &clientRateLimit{
		in:         newInbound(c, MechRateLimit, 0),
		rl:         rl,
		key:        key,
		xHeaders:   c.xHeaders,
		policyName: c.policy,
	}
	burst := rl.cfg.burst
	crl.window = max(1, int64(min(math.Ceil(float64(burst)/float64(rl.cfg.limit)), float64(hints.MaxSeconds))))
	crl.p, crl.start = gcra.NewParams(rl.cfg.limit, burst), rl.cfg.start
	crl.policyHdr = []string{`"` + c.policy + `";q=` + strconv.Itoa(burst) + ";w=" + strconv.FormatInt(crl.window, 10)}
	crl.limitHdr = []string{strconv.Itoa(burst)}
	if n := (int64(burst) + 1) * (crl.window + 1); n <= rateTableMax {
		crl.table = crl.rateTable(n)
	}
	return crl, nil
}

// clientRateLimit is a ClientRateLimit's state.
type clientRateLimit struct {
	in       inbound
	rl       *RateLimiters
	key      KeyFunc
	xHeaders bool

	policyName string
	window     int64       // seconds
	p          gcra.Params // every local bucket's policy
	start      time.Time   // every bucket's clock origin
	policyHdr  []string    // the RateLimit-Policy value, shared, never modified
	limitHdr   []string    // X-RateLimit-Limit
	table      []string    // RateLimit values (rateTable); nil if too many
}

func validPolicyName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// rateValue formats a RateLimit field value.
func (crl *clientRateLimit) rateValue(remaining, reset int64) string {
	var b [96]byte
	out := append(b[:0], '"')
	out = append(out, crl.policyName...)
	out = append(out, `";r=`...)
	out = strconv.AppendInt(out, remaining, 10)
	out = append(out, ";t="...)
	out = strconv.AppendInt(out, reset, 10)
	return string(out)
}

// rateTable returns the n RateLimit values of r = 0..burst tokens and
// t = 0..window seconds, value r*(window+1)+t at that index: the strings
// cut from one string and held in one array, so that the table is two
// objects for the garbage collector to mark, not two per value.
func (crl *clientRateLimit) rateTable(n int64) []string {
	var all []byte
	ends := make([]int, 0, n)
	for r := range n / (crl.window + 1) {
		for t := range crl.window + 1 {
			all = append(all, crl.rateValue(r, t)...)
			ends = append(ends, len(all))
		}
	}
	text := string(all)
	table := make([]string, n)
	start := 0
	for i, end := range ends {
		table[i] = text[start:end]
		start = end
	}
	return table
}

// storeKey bounds a key's length: a key longer than maxKeyLen, or one
// that starts with the digests' "#", is stored as its digest, the same in
// every process.
func storeKey(k string) string {
	if len(k) <= maxKeyLen && (k == "" || k[0] != '#') {
		return k
	}
	return digestKey(k)
}

// digestKey is storeKey's key for k: "#" and the first digestLen bytes of
// its SHA-256 digest, in hex. A stable hash, not a seeded one, so that
// replicas agree; collision-resistant, so that a client cannot choose a
// key that shares another's bucket.
func digestKey(k string) string {
	sum := sha256.Sum256([]byte(k))
	var b [1 + 2*digestLen]byte
	b[0] = '#'
	hex.Encode(b[1:], sum[:digestLen])
	return string(b[:])
}

// setHeaders writes the RateLimit fields: r tokens remaining, the next in
// t seconds, the bucket full again after reset. The one-element value
// slices of the precomputed table are windows on one array shared by every
// response: net/http only reads header values, Set and Del replace them,
// and Add appends to a slice of capacity 1, which copies it.
func (crl *clientRateLimit) setHeaders(h http.Header, r, t int64, reset time.Duration) {
	h["Ratelimit-Policy"] = appendField(h["Ratelimit-Policy"], crl.policyHdr)
	if i := r*(crl.window+1) + t; i < int64(len(crl.table)) {
		h["Ratelimit"] = appendField(h["Ratelimit"], crl.table[i:i+1:i+1])
	} else {
		h["Ratelimit"] = appendField(h["Ratelimit"], []string{crl.rateValue(r, t)})
	}
	if crl.xHeaders {
		h["X-Ratelimit-Limit"] = crl.limitHdr
		h["X-Ratelimit-Remaining"] = []string{itoa(r)}
		h["X-Ratelimit-Reset"] = []string{strconv.FormatInt(time.Now().Add(reset).Add(time.Second-1).Unix(), 10)}
	}
}

// appendField returns the field lines old followed by add: add itself,
// never copied, when there are none (a single limit on the route), and a
// new slice when another ClientRateLimit wrote its policy first, so that
// the client sees every limit it is under.
func appendField(old, add []string) []string {
	if len(old) == 0 {
		return add
	}
	return append(old[:len(old):len(old)], add...)
}

// admit takes a token of key's bucket and writes the RateLimit fields to
// w's header; a retry, as CallerHeaders marked the shared writer w, leaves
// half the burst. It returns zero when the request is admitted, else how long until
// the next token (never zero). A local bucket is read straight from its
// GCRA: no snapshot, no division for r when at most one token is missing,
// and none for t when a token takes at most a second (t is then 1 unless
// the bucket is full).
func (crl *clientRateLimit) admit(r *http.Request, w http.ResponseWriter, key string) time.Duration {
	h := w.Header()
	l := crl.rl.get(key)
	if l.shared != nil {
		st := l.take(r.Context())
		t := min(retryAfterCeil(nextQuota(st, crl.p.Interval)), crl.window)
		crl.setHeaders(h, int64(st.Remaining), t, st.Reset)
		if st.Limited {
			return max(st.RetryAfter, time.Nanosecond)
		}
		return 0
	}
	// The registry's policy and clock, the limiter's own (initLimiter):
	// read here, they cost no cache line of the limiter's.
	p := &crl.p
	var reserve int64 // a retry leaves half the burst to first attempts
	if rw, ok := w.(*responseWriter); ok && rw.caller != nil && rw.caller.attempt >= 2 {
		reserve = -(p.Burst / 2) * p.Interval
	}
	ok, _, tat, now := l.cell.Take(*p, func() int64 { return int64(time.Since(crl.start)) }, reserve)
	backlog := max(0, tat-now)
	free := p.Capacity - backlog
	var rem, t int64
	switch {
	case backlog <= p.Interval:
		rem = p.Burst - min(backlog, 1) // the usual case, without a division
	case free >= p.Interval:
		rem = free / p.Interval
	}
	switch {
	case backlog == 0:
	case p.Interval <= int64(time.Second):
		t = 1 // the next token is at most a second away
	default:
		t = min(retryAfterCeil(p.NextToken(tat, now)), crl.window)
	}
	crl.setHeaders(h, rem, t, time.Duration(backlog))
	if ok {
		return 0
	}
	return time.Duration(max(1, p.Interval-free))
}

// nextQuota is how long until st's bucket, which gains a token every
// interval, gains its next whole token: the RateLimit field's t, "the
// number of seconds until additional quota is made available"
// (draft-ietf-httpapi-ratelimit-headers). With no token left it is
// RetryAfter, so t and Retry-After say the same; for a full bucket it is
// 0.
func nextQuota(st RateLimitSnapshot, interval int64) time.Duration {
	if st.Remaining == 0 {
		return st.RetryAfter
	}
	if st.Reset <= 0 || interval <= 0 {
		return 0
	}
	if r := st.Reset % time.Duration(interval); r != 0 {
		return r
	}
	return time.Duration(interval)
}

// retryAfterCeil is d in whole seconds, rounded up (0 for d <= 0).
func retryAfterCeil(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return retryAfterSeconds(d)
}

// wrap is the middleware. Without an observer begin would neither wrap
// w nor report: the path without one skips it, and its defer.
func (crl *clientRateLimit) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if crl.in.exempt != nil && crl.in.exempt(r) {
			next.ServeHTTP(w, r)
			return
		}
		if crl.in.obs != nil {
			crl.serveObserved(next, w, r)
			return
		}
		key := storeKey(crl.key(r))
		if retry := crl.admit(r, w, key); retry > 0 {
			crl.refuse(w, r, &served{}, key, retry)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// serveObserved is wrap's path for a middleware with an observer.
func (crl *clientRateLimit) serveObserved(next http.Handler, w http.ResponseWriter, r *http.Request) {
	s := crl.in.begin(w, false)
	key := storeKey(crl.key(r))
	if retry := crl.admit(r, w, key); retry > 0 {
		crl.refuse(w, r, &s, key, retry)
		return
	}
	if !s.report {
		next.ServeHTTP(w, r)
		return
	}
	panicked := true
	defer func() {
		if panicked {
			crl.in.finish(r, &s, true)
		}
	}()
	next.ServeHTTP(s.rw, r)
	panicked = false
	crl.in.finish(r, &s, false)
}

// refuse answers a request admit refused, retry before its next token.
func (crl *clientRateLimit) refuse(w http.ResponseWriter, r *http.Request, s *served, key string, retry time.Duration) {
	crl.in.reject(s.writer(w), r, Rejection{
		Mechanism:  MechRateLimit,
		Status:     crl.in.status,
		RetryAfter: retry,
		Key:        key,
		Err:        rejected(ErrRateLimited, key, time.Now().Add(retry)),
	})
	crl.in.finish(r, s, false)
}
