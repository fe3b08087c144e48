package redisstore

import "context"

// WithQueueSize sets how many admissions may wait for the sender.
func WithQueueSize(n int) Option { return func(c *config) { c.queue = n } }

// MaxDirect is how many admissions may send themselves at once.
const MaxDirect = maxDirect

// QueueLen returns how many admissions wait for the sender.
func QueueLen(s *Store) int { return len(s.batch.queue) }

// SendAllQueued makes every admission go through the sender goroutine,
// as it does on a client that ignores deadlines. Call it before the first.
func SendAllQueued(s *Store) { s.batch.direct = false }

// Batches returns how many round trips the Store's admissions took.
func Batches(s *Store) int64 { return s.batch.trips.Load() }

// DoKey runs fn as a call on key alone, under the Store's guard.
func DoKey(s *Store, ctx context.Context, key string, fn func(ctx context.Context) error) error {
	return s.doKey(ctx, key, fn)
}
