package redisstore

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sizes of a Store's admission queue.
const (
	// queueSize bounds the admissions waiting for the sender; one more
	// falls back at once with [ErrQueueFull].
	queueSize = 1024
	// maxBatch bounds the admissions one round trip carries.
	maxBatch = 256
	// maxDirect bounds the admissions that go to Redis on their own, each
	// in its own round trip on its caller's goroutine, at once.
	maxDirect = 8
)

// ErrQueueFull is returned by an admission that found the Store's queue
// full: 1024 admissions already wait for the sender's round trip.
// The caller falls back to its local share at once; the Store does not
// count it as a failure of Redis.
var ErrQueueFull = errors.New("redisstore: admission queue full")

// A pending is one admission waiting for its answer. The sender writes
// cmd and then sends on done (buffered): a caller that left does not hold
// it up, and the answer is dropped with the pending.
type pending struct {
	ctx  context.Context // ends at the caller's budget
	keys []string
	args []any
	cmd  *redis.Cmd
	done chan struct{}
}

// batcher sends the admissions that wait for Redis together. An
// admission that finds the queue empty and fewer than maxDirect others
// sending themselves sends itself, on its caller's goroutine: it waits
// for nothing, and a few callers at once pay what they would pay one
// round trip each. The others queue; one sender goroutine takes
// everything queued and sends it in one pipeline, one round trip, and so
// on while the queue fills again.
//
// busy is held by the sender goroutine while it sends, and taken for it
// by whoever wakes it through kick.
type batcher struct {
	s       *Store
	direct  bool // the client honours deadlines: a caller may send itself
	queue   chan *pending
	sending atomic.Int32 // callers sending themselves
	busy    atomic.Bool
	kick    chan struct{}
	trips   atomic.Int64 // round trips sent
	batch   []*pending
	retry   []*pending
}

func newBatcher(s *Store, size int) *batcher {
	return &batcher{s: s, direct: s.ctxOK, queue: make(chan *pending, size), kick: make(chan struct{}, 1)}
}

// eval runs script on keys and args, at once when the queue is empty and
// fewer than maxDirect admissions send themselves, else in the sender's
// next round trip, and waits for its answer until ctx ends or the Store
// closes. It returns ErrQueueFull at once when the queue is full.
func (b *batcher) eval(ctx context.Context, keys []string, args ...any) (*redis.Cmd, error) {
	if b.direct && len(b.queue) == 0 {
		if b.sending.Add(1) <= maxDirect {
			b.trips.Add(1)
			cmd := gcraScript.Run(ctx, b.s.client, keys, args...)
			b.sending.Add(-1)
			return cmd, cmd.Err()
		}
		b.sending.Add(-1)
	}
	p := &pending{ctx: ctx, keys: keys, args: args, done: make(chan struct{}, 1)}
	select {
	case b.queue <- p:
	default:
		return nil, ErrQueueFull
	}
	if b.busy.CompareAndSwap(false, true) {
		b.wake()
	}
	select {
	case <-p.done:
		return p.cmd, p.cmd.Err()
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.s.ctx.Done():
		return nil, ErrUnavailable
	}
}

func (b *batcher) wake() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// run is the sender goroutine: woken with busy held for it, it takes
// every admission queued (up to maxBatch) and sends them in one pipeline,
// until the queue is empty; until the Store closes.
func (b *batcher) run() {
	for {
		select {
		case <-b.s.ctx.Done():
			return
		case <-b.kick:
		}
		for b.s.ctx.Err() == nil {
			b.batch = b.batch[:0]
		take:
			for len(b.batch) < maxBatch {
				select {
				case p := <-b.queue:
					b.batch = append(b.batch, p)
				default:
					break take
				}
			}
			if len(b.batch) == 0 {
				b.busy.Store(false)
				if len(b.queue) > 0 && b.busy.CompareAndSwap(false, true) {
					continue
				}
				break
			}
			b.send()
			clear(b.batch)
		}
	}
}

// send runs the batch in one pipeline, under the latest deadline among
// its callers (they leave on their own at theirs), skipping those that
// left already. EVALSHA answered NOSCRIPT (a restarted or flushed Redis)
// is sent again as EVAL, which loads the script, in a second round trip.
func (b *batcher) send() {
	var deadline time.Time
	n := 0
	for _, p := range b.batch {
		if p.ctx.Err() != nil {
			continue // fallen back already: don't charge the key
		}
		if d, ok := p.ctx.Deadline(); ok && d.After(deadline) {
			deadline = d
		}
		b.batch[n] = p
		n++
	}
	clear(b.batch[n:])
	b.batch = b.batch[:n]
	if n == 0 {
		return
	}
	if deadline.IsZero() {
		deadline = time.Now().Add(b.s.cfg.budget)
	}
	ctx, cancel := context.WithDeadline(b.s.ctx, deadline)
	defer cancel()
	b.exec(ctx, b.batch, false)
	b.retry = b.retry[:0]
	for _, p := range b.batch {
		if redis.HasErrorPrefix(p.cmd.Err(), "NOSCRIPT") {
			b.retry = append(b.retry, p)
		} else {
			p.done <- struct{}{}
		}
	}
	if len(b.retry) > 0 {
		b.exec(ctx, b.retry, true)
		for _, p := range b.retry {
			p.done <- struct{}{}
		}
		clear(b.retry)
	}
}

// exec sends one pipeline of gcraScript calls, by hash or, with load, by
// source. go-redis's ClusterClient splits a pipeline by node, so the keys
// of one batch may live on different nodes.
func (b *batcher) exec(ctx context.Context, ps []*pending, load bool) {
	b.trips.Add(1)
	pipe := b.s.client.Pipeline()
	for _, p := range ps {
		if load {
			p.cmd = gcraScript.Eval(ctx, pipe, p.keys, p.args...)
		} else {
			p.cmd = gcraScript.EvalSha(ctx, pipe, p.keys, p.args...)
		}
	}
	_, err := pipe.Exec(ctx)
	for _, p := range ps {
		if p.cmd.Err() == nil && p.cmd.Val() == nil {
			if err == nil {
				err = errors.New("redisstore: no reply in pipeline")
			}
			p.cmd.SetErr(err)
		}
	}
}
