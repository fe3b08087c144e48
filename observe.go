package breakwater

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/breakwater-go/breakwater/internal/keyed"
)

// EventKind says what an [Event] reports.
type EventKind uint8

// Event kinds.
const (
	// EventCallStart: a Transport call begins (Key, Method).
	EventCallStart EventKind = iota + 1
	// EventAttempt: an attempt ended (Attempt, Category, Status, Duration).
	EventAttempt
	// EventRetry: another attempt follows after Delay (Attempt is the one
	// that failed, Category why).
	EventRetry
	// EventCallEnd: a call ended (Attempts, Retries, Category, Status,
	// Duration, Err): when RoundTrip returned an error or, for a call that
	// returned a response, when its body was closed or read to EOF or an
	// error (a body never closed never ends its call); Duration covers the
	// body. For a call that returned a response, Attempt, Hedge and
	// Endpoint say which attempt gave it.
	EventCallEnd
	// EventTransition: a breaker changed state (Transition).
	EventTransition
	// EventReject: a mechanism refused work (Mechanism, Err, and Delay:
	// how long it goes on refusing, when it knows, as [RetryAfter] says).
	// The Err of a bulkhead's refusal of a request its breakwater caller's
	// deadline left no time for matches [ErrCallerDeadline].
	EventReject
	// EventWait: a call waited for a mechanism (Mechanism, Duration).
	EventWait
	// EventRequest: inbound middleware finished serving a request (Route,
	// Method, Status, Category, Duration).
	EventRequest
	// EventHealth: an endpoint of a [Failover] was ejected or came back
	// (Endpoint, Health, Reason).
	EventHealth
	// EventHedge: a hedge was sent (Attempt, its number; Delay, how long
	// after the first attempt of its round; Endpoint). It ends as any
	// attempt, in an EventAttempt with Hedge set.
	EventHedge
	// EventWarning: a component found a hazard in how it is deployed
	// (Mechanism, the component's; Err, what and what to do), reported
	// once per component, with the context of the request that showed it.
	// A [Shedder] behind an http.Server without ReadTimeout or
	// WriteTimeout reports one. A [Transport] reports its own hazards
	// while it is built, before NewTransport returns, with
	// context.Background and Reason naming the hazard:
	// [ReasonRetriesDoNotFit] (Mechanism [MechTimeout]) and
	// [ReasonStackedTransport].
	EventWarning
	// EventRetrySkipped: an attempt's outcome called for a retry (Attempt,
	// Category, Status) and a safety rule kept the call from making it
	// (Reason: [ReasonNotIdempotent], [ReasonBodyNotReplayable] or
	// [ReasonBodyTooLarge]); the call ends with that attempt's result.
	// Limits that end a call (its attempts, its deadline, the retry
	// budget) are not safety rules: they report as before.
	EventRetrySkipped
	// EventHedgeSkipped: a Transport with [WithHedging] will not hedge the
	// call that has just started ([EventCallStart]), because of a safety
	// rule (Reason, as for EventRetrySkipped).
	EventHedgeSkipped
)

var eventKindNames = [...]string{"", "call_start", "attempt", "retry", "call_end", "transition", "reject", "wait", "request", "health", "hedge", "warning", "retry_skipped", "hedge_skipped"}

// String returns the kind's lower-case name.
func (k EventKind) String() string {
	if int(k) < len(eventKindNames) && k > 0 {
		return eventKindNames[k]
	}
	return "unknown"
}

// Event is one observation. Which fields are set depends on Kind (see the
// kinds' documentation). Key is the upstream's key for outbound events and
// the route pattern for inbound ones, never a client's address, so that it
// can serve as a (capped) metric label.
type Event struct {
	Kind     EventKind
	Key      string
	Method   string
	Route    string // inbound: the chi route pattern, never the raw path
	Attempt  int
	Attempts int
	// Retries counts the retries among a call's attempts (EventCallEnd);
	// hedges are attempts but not retries: a call that returned a response
	// sent Attempts − Retries − 1 hedges.
	Retries   int
	Category  Category
	Status    int
	Duration  time.Duration
	Delay     time.Duration
	Mechanism Mechanism
	Err       error
	// Transition is set for EventTransition, nil otherwise.
	Transition *Transition
	// Hedge marks an attempt (EventHedge, EventAttempt, EventReject) that
	// was a hedge of another, and a call (EventCallEnd) that a hedge
	// answered.
	Hedge bool
	// Endpoint is the [Failover] endpoint an attempt went to, or the one
	// that answered a call; empty without failover.
	Endpoint string
	// Health is set for EventHealth: the endpoint's new tier.
	Health Health
	// Reason says why: an endpoint's health changed (EventHealth), the
	// safety rule of an EventRetrySkipped or EventHedgeSkipped (a
	// breakwater server's Breakwater-Pushback: [ReasonPushback]), a
	// Transport's hazard (EventWarning). On an EventRequest,
	// [ReasonPushback] says that the answer carried Breakwater-Pushback:
	// elsewhere when a middleware rejected the request (Category
	// [Rejected]), none when the handler's 5xx followed a failed call of
	// its own ([WithPropagation]).
	Reason Reason
	// Criticality is the request's ([ContextWithCriticality], or its
	// breakwater caller's, read by [CallerHeaders]) on inbound events
	// (EventReject, EventRequest); the default (0) on others.
	Criticality Criticality
}

// An Observer receives events. Observe is called synchronously on the
// request's goroutine, outside every lock, with the request's context
// (context.Background for breaker transitions); it must be safe for
// concurrent use, should return quickly and must not retain ctx. A
// panicking observer is recovered and ignored.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to [Observer].
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f(ctx, e).
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }

// observers composes observers; nil ones are dropped. It returns nil when
// none is left, so that an unobserved component pays nothing.
func observers(obs ...Observer) Observer {
	var out multiObserver
	for _, o := range obs {
		switch o := o.(type) {
		case nil:
		case multiObserver:
			out = append(out, o...)
		default:
			out = append(out, o)
		}
	}
	switch len(out) {
	case 0:
		return nil
	case 1:
		return out[0]
	}
	return out
}

type multiObserver []Observer

func (m multiObserver) Observe(ctx context.Context, e Event) {
	for _, o := range m {
		notify(o, ctx, &e)
	}
}

// notify delivers e to o, recovering a panic.
func notify(o Observer, ctx context.Context, e *Event) {
	defer func() { _ = recover() }()
	o.Observe(ctx, *e)
}

// transitionReporter returns a transition listener that reports to o.
func transitionReporter(o Observer) func(Transition) {
	return func(tr Transition) {
		notify(o, context.Background(), &Event{Kind: EventTransition, Key: tr.Key, Transition: &tr})
	}
}

// LogObserver returns an [Observer] that logs to l: breaker transitions,
// endpoint ejections and warnings ([EventWarning]) at Warn, endpoints
// coming back at Info, rejections at Info (at most one per key and
// mechanism per interval, default 10 s, with the number suppressed),
// retries and hedges sent, and retries and hedges a safety rule skipped,
// at Debug.
// A nil l returns nil (silent).
func LogObserver(l *slog.Logger, interval time.Duration) Observer {
	if l == nil {
		return nil
	}
	if interval <= 0 {
		interval = 10 * time.Second
	}
	lo := &logObserver{l: l, interval: int64(interval), start: time.Now()}
	lo.last = keyed.New(logGateKeys, 10*interval, func(string) *logGate { return &logGate{} }, func(*logGate, time.Time) keyed.Keep { return keyed.None })
	return lo
}

// logGateKeys bounds the keys a LogObserver rate-limits rejections of.
const logGateKeys = 10_000

type logObserver struct {
	l        *slog.Logger
	interval int64
	start    time.Time
	last     *keyed.Map[*logGate]
}

// logGate rate-limits one key's rejection logs.
type logGate struct {
	next       atomic.Int64
	suppressed atomic.Int64
}

func (lo *logObserver) Observe(ctx context.Context, e Event) {
	switch e.Kind {
	case EventTransition:
		if e.Transition == nil {
			return
		}
		t := e.Transition
		attrs := []slog.Attr{slog.String("key", t.Key), slog.String("from", t.From.String()), slog.String("to", t.To.String()), slog.String("reason", string(t.Reason))}
		if t.To == StateOpen {
			attrs = append(attrs, slog.Duration("open_for", t.OpenFor), slog.Int("opens", t.Opens))
			if t.Failures > 0 {
				attrs = append(attrs, slog.Int("failures", t.Failures), slog.String("category", t.Category.String()))
			}
		}
		lo.l.LogAttrs(ctx, slog.LevelWarn, "breakwater: breaker "+t.To.String(), attrs...)
	case EventReject:
		g := lo.last.Get(e.Key + "|" + string(e.Mechanism))
		now := int64(time.Since(lo.start))
		next := g.next.Load()
		if now < next || !g.next.CompareAndSwap(next, now+lo.interval) {
			g.suppressed.Add(1)
			return
		}
		attrs := []slog.Attr{slog.String("key", e.Key), slog.String("mechanism", string(e.Mechanism))}
		if e.Err != nil {
			attrs = append(attrs, slog.String("error", e.Err.Error()))
		}
		if n := g.suppressed.Swap(0); n > 0 {
			attrs = append(attrs, slog.Int64("suppressed", n))
		}
		lo.l.LogAttrs(ctx, slog.LevelInfo, "breakwater: rejected", attrs...)
	case EventWarning:
		attrs := []slog.Attr{slog.String("mechanism", string(e.Mechanism))}
		if e.Reason != "" {
			attrs = append(attrs, slog.String("reason", string(e.Reason)))
		}
		if e.Err != nil {
			attrs = append(attrs, slog.String("warning", e.Err.Error()))
		}
		lo.l.LogAttrs(ctx, slog.LevelWarn, "breakwater: warning", attrs...)
	case EventHealth:
		level, msg := slog.LevelInfo, "breakwater: endpoint back"
		if e.Health == HealthEjected {
			level, msg = slog.LevelWarn, "breakwater: endpoint ejected"
		}
		lo.l.LogAttrs(ctx, level, msg, slog.String("key", e.Key), slog.String("endpoint", e.Endpoint), slog.String("reason", string(e.Reason)))
	case EventRetry:
		if lo.l.Enabled(ctx, slog.LevelDebug) {
			lo.l.LogAttrs(ctx, slog.LevelDebug, "breakwater: retrying", slog.String("key", e.Key), slog.Int("attempt", e.Attempt),
				slog.String("category", e.Category.String()), slog.Int("status", e.Status), slog.Duration("delay", e.Delay))
		}
	case EventRetrySkipped:
		if lo.l.Enabled(ctx, slog.LevelDebug) {
			lo.l.LogAttrs(ctx, slog.LevelDebug, "breakwater: not retried", slog.String("key", e.Key), slog.Int("attempt", e.Attempt),
				slog.String("category", e.Category.String()), slog.Int("status", e.Status), slog.String("reason", string(e.Reason)))
		}
	case EventHedgeSkipped:
		if lo.l.Enabled(ctx, slog.LevelDebug) {
			lo.l.LogAttrs(ctx, slog.LevelDebug, "breakwater: not hedged", slog.String("key", e.Key), slog.String("reason", string(e.Reason)))
		}
	case EventHedge:
		if lo.l.Enabled(ctx, slog.LevelDebug) {
			lo.l.LogAttrs(ctx, slog.LevelDebug, "breakwater: hedging", slog.String("key", e.Key), slog.Int("attempt", e.Attempt), slog.Duration("after", e.Delay))
		}
	}
}
