package breakwater

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/breakwater-go/breakwater/internal/forwarded"
)

// maxCallerTimeout bounds the deadline a caller may give (a day): a longer
// one is no deadline at all, and is ignored like a malformed one.
const maxCallerTimeout = 24 * time.Hour

// CallerHeaders returns middleware that reads what a breakwater caller
// ([WithPropagation]) sends with a request, when, and only when, the
// immediate peer (RemoteAddr) is trusted: its address is inside one of
// trustedPeers, CIDR prefixes or single addresses as [ForwardedForKey]
// takes them (at least one; a malformed one is an error). A header from
// any other peer, or one that does not parse, is ignored.
//
//   - Breakwater-Timeout-Ms (whole milliseconds, at most a day) sets the
//     request context's deadline that far from its arrival, or keeps the
//     existing one if earlier; when it passes, the context's cause is
//     [ErrCallerDeadline]. A [HandlerTimeout] after it, and the handler's own
//     outbound calls, work within the earlier of the two; a [Shedder] after
//     it refuses at once a request that its queue would hold past that
//     deadline.
//   - Breakwater-Attempt ("2;max=3") is given to handlers by
//     [CallerAttempt], and limits the retries of the handler's outbound
//     calls through a propagating [Transport] (see [WithPropagation]), whose
//     failure marks a 5xx answer with Breakwater-Pushback: none.
//   - Breakwater-Criticality (critical, sheddable) becomes the request's
//     [Criticality] ([ContextWithCriticality]): the queues it meets serve
//     it accordingly, and the handler's propagating calls pass it on.
//
// Put it first, outside the other middleware. It is safe for concurrent
// use; a request from an untrusted peer costs an address parse.
func CallerHeaders(trustedPeers ...string) (func(http.Handler) http.Handler, error) {
	var errs []error
	if len(trustedPeers) == 0 {
		errs = append(errs, errors.New("breakwater: CallerHeaders needs at least one trusted peer prefix"))
	}
	prefixes := make([]netip.Prefix, 0, len(trustedPeers))
	for _, s := range trustedPeers {
		p, err := parseTrusted(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("breakwater: CallerHeaders: trusted peer %q: %w", s, err))
			continue
		}
		prefixes = append(prefixes, p)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	ch := &callerHeaders{trusted: prefixes}
	return ch.wrap, nil
}

// callerHeaders is a CallerHeaders' state.
type callerHeaders struct {
	trusted []netip.Prefix
}

func (ch *callerHeaders) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer, err := netip.ParseAddr(forwarded.SplitHost(r.RemoteAddr))
		if err != nil || !trusted(ch.trusted, peer) {
			next.ServeHTTP(w, r)
			return
		}
		c := &caller{}
		c.attempt, c.max, _ = parseAttempt(r.Header.Get(headerAttempt))
		d, timed := parseCallerTimeout(r.Header.Get(headerTimeout))
		crit, critical := parseCriticality(r.Header.Get(headerCriticality))
		if c.attempt == 0 && !timed && !critical {
			next.ServeHTTP(w, r)
			return
		}
		ctx := context.WithValue(r.Context(), callerKey{}, c)
		if critical {
			ctx = ContextWithCriticality(ctx, crit)
		}
		if timed {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeoutCause(ctx, d, ErrCallerDeadline)
			defer cancel()
		}
		rw, ok := w.(*responseWriter)
		if !ok {
			rw = &responseWriter{w: w}
		}
		rw.caller = c
		next.ServeHTTP(rw, r.WithContext(ctx))
	})
}

// parseCallerTimeout parses a Breakwater-Timeout-Ms value: digits only, at
// most maxCallerTimeout.
func parseCallerTimeout(v string) (time.Duration, bool) {
	if v == "" || len(v) > 9 || strings.TrimLeft(v, "0123456789") != "" {
		return 0, false
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || time.Duration(ms)*time.Millisecond > maxCallerTimeout {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// parseAttempt parses a Breakwater-Attempt value, "n;max=m" with
// 1 <= n <= m <= maxAttemptsLimit.
func parseAttempt(v string) (n, most int, ok bool) {
	num, param, _ := strings.Cut(v, ";")
	m, found := strings.CutPrefix(strings.TrimSpace(param), "max=")
	if !found {
		return 0, 0, false
	}
	n, ok1 := smallInt(strings.TrimSpace(num))
	most, ok2 := smallInt(m)
	if !ok1 || !ok2 || n < 1 || n > most || most > maxAttemptsLimit {
		return 0, 0, false
	}
	return n, most, true
}

// smallInt parses up to 4 decimal digits.
func smallInt(s string) (int, bool) {
	if s == "" || len(s) > 4 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, _ := strconv.Atoi(s)
	return n, true
}
