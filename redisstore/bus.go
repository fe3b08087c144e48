package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/breakwater-go/breakwater"
	"github.com/redis/go-redis/v9"
)

// publishScript records one replica's event in the bus's state hash and
// publishes it when it applies cluster-wide. The hash has one field per
// mechanism, key and origin, "<mechanism>:<len(key)>:<key>:<replica>"
// ("...:*" for a manual trip), whose value is when it ends, in ms on
// Redis's clock; expired fields are dropped on the way. The key's length
// makes the encoding unambiguous whatever bytes the key holds: a field of
// one key never starts with the prefix of another. A reset or resume
// (duration 0) deletes every field of its mechanism and key and is always
// published; a trip is published when it is manual or when at least
// quorum replicas have the key open (a pause is sent with quorum 1).
//
// KEYS[1]: the state hash. ARGV: channel, replica, mechanism, key,
// duration in ms, manual (1 or 0), quorum. Returns 1 when published.
var publishScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h, ch, origin, mech, key = KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local dur, manual, quorum = tonumber(ARGV[5]), ARGV[6] == '1', tonumber(ARGV[7])
local prefix = mech .. ':' .. #key .. ':' .. key .. ':'
local mine = prefix .. origin
local count = 0
local all = redis.call('HGETALL', h)
for i = 1, #all, 2 do
  local f = all[i]
  local ours = string.sub(f, 1, #prefix) == prefix
  if (tonumber(all[i + 1]) or 0) <= now or (dur == 0 and ours) then
    redis.call('HDEL', h, f)
  elseif ours and f ~= mine and f ~= prefix .. '*' then
    count = count + 1
  end
end
if dur > 0 then
  local field = mine
  if manual then field = prefix .. '*' end
  redis.call('HSET', h, field, now + dur)
  if redis.call('PTTL', h) < dur then redis.call('PEXPIRE', h, dur + 1000) end
  if not manual then count = count + 1 end
end
if dur == 0 or manual or count >= quorum then
  redis.call('PUBLISH', ch, origin .. '\n' .. (manual and '1' or '0') .. '\n' .. mech .. ':' .. dur .. '\n' .. key)
  return 1
end
return 0
`)

// stateScript returns the live fields of the state hash with the time
// each has left, in ms: {field, remaining, field, remaining, ...}.
var stateScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do
  local rem = tonumber(all[i + 1]) - now
  if rem > 0 then
    out[#out + 1] = all[i]
    out[#out + 1] = rem
  end
end
return out
`)

// A BusOption configures [Store.Bus].
type BusOption func(*busConfig)

type busConfig struct {
	quorum    int
	reconcile time.Duration
	queue     int
}

// WithQuorum makes a trip apply on every replica only once at least q
// replicas have tripped the key themselves, so that one sick replica (a
// bad network path of its own) cannot open the others' breakers. Manual
// trips and resets apply at once, and so do pauses and resumes: a 429's
// Retry-After is the upstream's word, not one replica's view. Default: 1.
func WithQuorum(q int) BusOption { return func(c *busConfig) { c.quorum = q } }

// WithReconcile sets how often a subscribed bus reads the shared state
// and applies what is still in force: how a replica that started late, or
// missed a message while Redis was away, catches up. Default:
// [DefaultReconcile].
func WithReconcile(d time.Duration) BusOption { return func(c *busConfig) { c.reconcile = d } }

// Bus is a [breakwater.ClusterBus] on Redis: events are recorded in one
// hash and sent on one pub/sub channel, both named after the bus
// ("<namespace>:bus:{<name>}" and "<namespace>:bus:<name>"). Build it
// with [Store.Bus]; it is safe for concurrent use.
//
// One bus carries a Transport's trips and pauses together: every event
// travels with its [breakwater.ClusterEvent.Mechanism], in its message and
// in its field of the hash, and each is applied only by the registry of
// its mechanism. An event without a mechanism is not sent, and a message
// or field without one (from a version that sent none) is ignored, so
// replicas of an older version and this one never act on each other's
// events: each keeps its own state until all run one version.
//
// Publish never blocks: events go through a queue of 256 to one goroutine,
// and are dropped when it is full or Redis is down ([Bus.Dropped] counts
// them). Each subscription holds one pub/sub connection and reads the
// shared state at once and then every reconcile interval.
type Bus struct {
	s       *Store
	cfg     busConfig
	hash    string
	channel string
	queue   chan breakwater.ClusterEvent
	dropped atomic.Int64
}

var _ breakwater.ClusterBus = (*Bus)(nil)

// Bus returns the bus named name, or an error describing every invalid
// option. Breakers and pause gates may share it.
func (s *Store) Bus(name string, opts ...BusOption) (*Bus, error) {
	c := busConfig{quorum: 1, reconcile: DefaultReconcile, queue: 256}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	var errs []error
	if name == "" || strings.ContainsAny(name, "{}") {
		errs = append(errs, fmt.Errorf("redisstore: bus name must be non-empty and without braces, got %q", name))
	}
	if c.quorum < 1 {
		errs = append(errs, fmt.Errorf("redisstore: quorum must be >= 1, got %d", c.quorum))
	}
	if c.reconcile <= 0 {
		errs = append(errs, fmt.Errorf("redisstore: reconcile interval must be > 0, got %s", c.reconcile))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	b := &Bus{
		s:       s,
		cfg:     c,
		hash:    s.cfg.ns + ":bus:{" + name + "}",
		channel: s.cfg.ns + ":bus:" + name,
		queue:   make(chan breakwater.ClusterEvent, c.queue),
	}
	s.wg.Go(b.publishLoop)
	return b, nil
}

// Publish queues e for the other replicas. See [breakwater.ClusterBus].
func (b *Bus) Publish(e breakwater.ClusterEvent) {
	select {
	case b.queue <- e:
	default:
		b.dropped.Add(1)
	}
}

// Dropped counts events that were never sent: the queue was full, or
// Redis failed or was down.
func (b *Bus) Dropped() int64 { return b.dropped.Load() }

func (b *Bus) publishLoop() {
	for {
		select {
		case <-b.s.ctx.Done():
			return
		case e := <-b.queue:
			if b.send(e) != nil {
				b.dropped.Add(1)
			}
		}
	}
}

func (b *Bus) send(e breakwater.ClusterEvent) error {
	if !validMechanism(e.Mechanism) {
		return fmt.Errorf("redisstore: event of key %q has no valid mechanism (%q)", e.Key, e.Mechanism)
	}
	quorum := b.cfg.quorum
	if e.Mechanism != breakwater.MechBreaker {
		quorum = 1
	}
	ms := int64(0)
	if e.For > 0 {
		ms = max(1, (e.For + time.Millisecond - 1).Milliseconds())
	}
	manual := "0"
	if e.Manual {
		manual = "1"
	}
	return b.s.do(b.s.ctx, func(ctx context.Context) error {
		return publishScript.Run(ctx, b.s.client, []string{b.hash}, b.channel, b.s.cfg.id, string(e.Mechanism), e.Key, ms, manual, quorum).Err()
	})
}

// Subscribe delivers the other replicas' events to fn until the Store is
// closed. See [breakwater.ClusterBus].
func (b *Bus) Subscribe(fn func(breakwater.ClusterEvent)) {
	if fn == nil {
		return
	}
	b.s.wg.Go(func() { b.listen(fn) })
}

func (b *Bus) listen(fn func(breakwater.ClusterEvent)) {
	ps := b.s.client.Subscribe(b.s.ctx, b.channel)
	defer ps.Close()
	msgs := ps.Channel()
	tick := time.NewTicker(b.cfg.reconcile)
	defer tick.Stop()
	b.reconcile(fn)
	for {
		select {
		case <-b.s.ctx.Done():
			return
		case m, ok := <-msgs:
			if !ok {
				return
			}
			if e, origin, ok := parseMessage(m.Payload); ok && origin != b.s.cfg.id {
				fn(e)
			}
		case <-tick.C:
			b.reconcile(fn)
		}
	}
}

// validMechanism reports whether m can travel on the bus: non-empty,
// without ':' (which ends it in a field and a message) or control bytes.
func validMechanism(m breakwater.Mechanism) bool {
	if m == "" {
		return false
	}
	for i := 0; i < len(m); i++ {
		if c := m[i]; c < 0x20 || c == 0x7f || c == ':' {
			return false
		}
	}
	return true
}

// parseMessage reads "<replica>\n<manual>\n<mechanism>:<ms>\n<key>". A
// message of the earlier form, "<replica>\n<manual>\n<ms>\n<key>", says
// nothing of its mechanism and is not ok (nor is this form to the earlier
// parser, which reads "<mechanism>:<ms>" as a malformed duration).
func parseMessage(p string) (e breakwater.ClusterEvent, origin string, ok bool) {
	parts := strings.SplitN(p, "\n", 4)
	if len(parts) != 4 {
		return e, "", false
	}
	i := strings.LastIndexByte(parts[2], ':')
	if i < 0 {
		return e, "", false
	}
	mech := breakwater.Mechanism(parts[2][:i])
	ms, err := strconv.ParseInt(parts[2][i+1:], 10, 64)
	if err != nil || ms < 0 || !validMechanism(mech) {
		return e, "", false
	}
	return breakwater.ClusterEvent{Key: parts[3], For: time.Duration(ms) * time.Millisecond, Manual: parts[1] == "1", Mechanism: mech}, parts[0], true
}

// parseField reads a field of the state hash,
// "<mechanism>:<len(key)>:<key>:<replica>". A field of the earlier form,
// "<key>\0<replica>", is not ok: its replica part would hold the NUL.
func parseField(f string) (mech breakwater.Mechanism, key, origin string, ok bool) {
	m, rest, found := strings.Cut(f, ":")
	if !found || !validMechanism(breakwater.Mechanism(m)) {
		return "", "", "", false
	}
	digits, rest, found := strings.Cut(rest, ":")
	n, err := strconv.Atoi(digits)
	if !found || err != nil || n < 0 || n >= len(rest) || rest[n] != ':' {
		return "", "", "", false
	}
	origin = rest[n+1:]
	if origin != "*" && !validReplicaID(origin) {
		return "", "", "", false
	}
	return breakwater.Mechanism(m), rest[:n], origin, true
}

// validReplicaID reports whether id can name a replica on the bus:
// non-empty, not "*" (a manual trip's origin), without a newline (which
// ends it in a message) or a NUL.
func validReplicaID(id string) bool {
	return id != "" && id != "*" && !strings.ContainsAny(id, "\n\x00")
}

// reconcile reads the shared state and delivers what applies: each key
// with a live manual trip, or open on at least quorum replicas, for the
// longest time another replica has it open; and each key another replica
// has paused, for the longest time it has left.
func (b *Bus) reconcile(fn func(breakwater.ClusterEvent)) {
	var res []any
	err := b.s.do(b.s.ctx, func(ctx context.Context) error {
		var err error
		res, err = stateScript.Run(ctx, b.s.client, []string{b.hash}).Slice()
		return err
	})
	if err != nil {
		return
	}
	type id struct {
		mech breakwater.Mechanism
		key  string
	}
	type open struct {
		count  int
		manual time.Duration
		others time.Duration
	}
	keys := map[id]*open{}
	for i := 0; i+1 < len(res); i += 2 {
		field, _ := res[i].(string)
		ms, _ := res[i+1].(int64)
		mech, key, origin, found := parseField(field)
		if !found || ms <= 0 {
			continue
		}
		o := keys[id{mech, key}]
		if o == nil {
			o = &open{}
			keys[id{mech, key}] = o
		}
		d := time.Duration(ms) * time.Millisecond
		switch origin {
		case "*":
			o.manual = max(o.manual, d)
		case b.s.cfg.id:
			o.count++
		default:
			o.count++
			o.others = max(o.others, d)
		}
	}
	for k, o := range keys {
		quorum := b.cfg.quorum
		if k.mech != breakwater.MechBreaker {
			quorum = 1
		}
		switch {
		case o.manual > 0:
			fn(breakwater.ClusterEvent{Key: k.key, For: o.manual, Manual: true, Mechanism: k.mech})
		case o.others > 0 && o.count >= quorum:
			fn(breakwater.ClusterEvent{Key: k.key, For: o.others, Mechanism: k.mech})
		}
	}
}
