package breakwater

import (
	"context"
	"slices"
)

// The queue of a bulkhead: waiters in arrival order, granted most critical
// first (see [Criticality]) and, among equals, oldest first. All of it is
// guarded by bulkhead.mu.

// defaultRank is the rank of a first attempt of default criticality
// (rankOf): while every waiter has it, the queue is plain FIFO.
// criticalRank is the least rank of a Critical request, a retry's.
const (
	defaultRank  = 1
	criticalRank = 2 * int8(Critical)
)

// push queues w, or reports false when the queue is full and w ranks no
// higher than any waiter in it. A full queue makes room for a higher rank
// by turning away the newest of its lowest-ranked waiters.
func (b *bulkhead) push(w *bulkheadWaiter) bool {
	if b.cfg.maxQueue > 0 && len(b.queue) >= b.cfg.maxQueue {
		i := b.lowest()
		v := b.queue[i]
		if v.rank >= w.rank {
			return false
		}
		b.remove(i)
		v.turnedAway = true
		b.nwait.Add(-1)
		v.ch <- struct{}{}
	}
	if len(b.queue) == 0 {
		b.busySince = b.now()
	}
	if w.rank != defaultRank {
		b.ranked++
	}
	b.queue = append(b.queue, w)
	return true
}

// pop takes the next waiter to grant out of the queue, which is not empty:
// the oldest of the highest rank.
func (b *bulkhead) pop() *bulkheadWaiter {
	i := 0
	if b.ranked > 0 {
		for j, w := range b.queue {
			if w.rank > b.queue[i].rank {
				i = j
			}
		}
	}
	w := b.queue[i]
	if i == 0 {
		b.queue[0] = nil
		b.queue = b.queue[1:]
		if w.rank != defaultRank {
			b.ranked--
		}
		return w
	}
	b.remove(i)
	return w
}

// lowest returns the index of the newest of the lowest-ranked waiters.
func (b *bulkhead) lowest() int {
	i := len(b.queue) - 1
	if b.ranked > 0 {
		for j := i - 1; j >= 0; j-- {
			if b.queue[j].rank < b.queue[i].rank {
				i = j
			}
		}
	}
	return i
}

// ahead returns how many waiters would be granted before one of rank r
// that queued now.
func (b *bulkhead) ahead(r int8) int {
	if b.ranked == 0 && r == defaultRank {
		return len(b.queue)
	}
	n := 0
	for _, w := range b.queue {
		if w.rank >= r {
			n++
		}
	}
	return n
}

// remove takes the waiter at i out of the queue.
func (b *bulkhead) remove(i int) {
	if b.queue[i].rank != defaultRank {
		b.ranked--
	}
	b.queue = slices.Delete(b.queue, i, i+1)
}

// overloaded reports whether the queue has not been empty for its
// interval ([WithQueueTarget]): the waits of requests less than Critical
// are then bounded by the target.
func (b *bulkhead) overloaded() bool {
	return b.cfg.queueTarget > 0 && len(b.queue) > 0 && b.now()-b.busySince > int64(b.cfg.queueInterval)
}

// rankOf returns where a request with context ctx stands in a bulkhead's
// queue: by criticality, then first attempts before retries.
func rankOf(ctx context.Context) int8 {
	r := 2 * int8(criticalityOf(ctx))
	if c := callerOf(ctx); c == nil || c.attempt <= 1 {
		r++
	}
	return r
}
