package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/breakwater-go/breakwater"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"
)

// readTAT is the start of the limiter's scripts: the clock (Redis's, in
// microseconds), the policy (ARGV[1] the interval between tokens, ARGV[2]
// the burst) and the key's theoretical arrival time (TAT): the instant its
// bucket would be full again. A value that another client wrote and that
// is no TAT (a key of another type, not a finite number) counts as absent,
// a full bucket; one further ahead than this limiter ever sets it (more
// than the span of the bucket, a longest wait and a charge ahead) as an
// empty bucket. Either way bad is set, and the script writes the key.
const readTAT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local capacity = interval * tonumber(ARGV[2])
local v = redis.pcall('GET', KEYS[1])
local tat = nil
if type(v) == 'string' then tat = tonumber(v) end
local bad = false
if tat == nil or tat ~= tat or tat == math.huge or tat == -math.huge then
  tat = 0
  bad = v ~= false
elseif tat > now + 3 * capacity + tonumber(ARGV[3]) then
  tat = now + capacity
  bad = true
end
if tat < now then tat = now end
`

// gcraScript is the GCRA that breakwater's local limiter runs, on Redis's
// clock, in microseconds (see readTAT). ARGV[3] is the longest wait that
// reserves a turn. It returns {admitted, delay, backlog}: admitted 1 or 0;
// the wait before going (admitted) or until a token (refused); and
// TAT - now after the decision. The key expires when the bucket is full
// again. A refusal writes nothing, unless the key held no TAT.
var gcraScript = redis.NewScript(readTAT + `
local nxt = tat + interval
local delay = nxt - capacity - now
if delay > tonumber(ARGV[3]) then
  if bad then
    redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1)
  end
  return {0, delay, tat - now}
end
redis.call('SET', KEYS[1], string.format('%.0f', nxt), 'PX', math.ceil((nxt - now) / 1000) + 1)
if delay < 0 then delay = 0 end
return {1, delay, nxt - now}
`)

// chargeScript empties key's bucket down to at most what a replica's
// local share of it held (see [Limiter.Charge]): the TAT becomes at least
// now + ARGV[4] (µs, at most twice the bucket's span); a TAT already
// further ahead stays. ARGV[3] is 0. It returns TAT - now.
var chargeScript = redis.NewScript(readTAT + `
local floor = now + math.min(tonumber(ARGV[4]), 2 * capacity)
if tat < floor or bad then
  if tat < floor then tat = floor end
  redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1)
end
return tat - now
`)

// Limiter is a [breakwater.SharedLimiter] on Redis: every admission runs
// the GCRA script on Redis's clock, in one round trip. Admissions that
// arrive while 8 others are on their way share the next round trip (see
// "Batching" in the package doc). Build it with [Store.Limiter]; it is
// safe for concurrent use.
type Limiter struct {
	s      *Store
	prefix string // namespace:rl:name:
}

var _ breakwater.SharedLimiter = (*Limiter)(nil)

// Limiter returns the shared limiter named name: its keys are
// "<namespace>:rl:<name>:{<key>}". Give each limit its own name (for
// example "inbound" and "upstream"), so that their keys never meet.
func (s *Store) Limiter(name string) *Limiter {
	return &Limiter{s: s, prefix: s.cfg.ns + ":rl:" + name + ":"}
}

// Replicas returns the Store's replica count.
func (l *Limiter) Replicas() int { return l.s.Replicas() }

// params converts a policy to microseconds, rounding the interval up as
// the local limiter does (never faster than the limit).
func params(limit rate.Limit, burst int) (interval, capacity int64) {
	b := int64(max(1, burst))
	iv := math.Ceil(1e6 / float64(limit))
	interval = math.MaxInt64 / 4 / b
	if iv < float64(interval) {
		interval = max(1, int64(iv))
	}
	return interval, interval * b
}

// Key returns the Redis key that holds key's state.
func (l *Limiter) Key(key string) string {
	var b strings.Builder
	b.Grow(len(l.prefix) + len(key) + 2)
	b.WriteString(l.prefix)
	b.WriteByte('{')
	b.WriteString(key)
	b.WriteByte('}')
	return b.String()
}

// Take runs one admission of key. See [breakwater.SharedLimiter].
func (l *Limiter) Take(ctx context.Context, key string, limit rate.Limit, burst int, maxWait time.Duration) (breakwater.RateLimitSnapshot, time.Duration, error) {
	if !(limit > 0) || burst < 1 {
		return breakwater.RateLimitSnapshot{}, 0, fmt.Errorf("redisstore: invalid policy %v/s burst %d", float64(limit), burst)
	}
	interval, capacity := params(limit, burst)
	cmd, err := l.s.evalBatched(ctx, []string{l.Key(key)}, interval, burst, maxWait.Microseconds())
	if err != nil {
		return breakwater.RateLimitSnapshot{}, 0, err
	}
	res, err := cmd.Int64Slice()
	if err != nil {
		return breakwater.RateLimitSnapshot{}, 0, err
	}
	if len(res) != 3 {
		return breakwater.RateLimitSnapshot{}, 0, errors.New("redisstore: malformed GCRA reply")
	}
	st := status(limit, burst, interval, capacity, res[2])
	st.Key = key
	st.Limited = res[0] != 1
	var delay time.Duration
	if !st.Limited {
		delay = time.Duration(res[1]) * time.Microsecond
	}
	return st, delay, nil
}

// Charge tells key's bucket what this replica admitted on its own while
// the store failed: it holds at most what a bucket whose backlog is
// backlog (TAT - now, at most twice the burst's span) holds. A bucket that
// holds less keeps its state. It runs in one round trip under the
// Store's budget, on the mode of key's node. See
// [breakwater.SharedLimiter].
func (l *Limiter) Charge(ctx context.Context, key string, limit rate.Limit, burst int, backlog time.Duration) error {
	if !(limit > 0) || burst < 1 {
		return fmt.Errorf("redisstore: invalid policy %v/s burst %d", float64(limit), burst)
	}
	interval, _ := params(limit, burst)
	k := l.Key(key)
	return l.s.doKey(ctx, k, func(ctx context.Context) error {
		return chargeScript.Run(ctx, l.s.client, []string{k}, interval, burst, 0, max(0, backlog.Microseconds())).Err()
	})
}

// Shared reports whether key is in shared mode: Redis (on a ClusterClient,
// key's master) answered the last call, rather than the Store falling back
// to local shares.
func (l *Limiter) Shared(key string) bool {
	m := l.s.modeOf(context.Background(), l.Key(key))
	return m.downUntil.Load() == 0
}

// status describes a bucket whose backlog (TAT - now) is backlog µs, as
// the local limiter does.
func status(limit rate.Limit, burst int, interval, capacity, backlog int64) breakwater.RateLimitSnapshot {
	backlog = max(0, backlog)
	st := breakwater.RateLimitSnapshot{Limit: limit, Burst: burst, Reset: time.Duration(backlog) * time.Microsecond}
	if free := capacity - backlog; free >= interval {
		st.Remaining = int(free / interval)
	} else {
		st.RetryAfter = time.Duration(interval-free) * time.Microsecond
	}
	return st
}
