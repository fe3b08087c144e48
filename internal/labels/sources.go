package labels

import "sync/atomic"

// Sources is a list that collectors read on every collection and that
// callers append to at any time: lock-free for both, the zero value empty.
type Sources[T comparable] struct {
	p atomic.Pointer[[]T]
}

// Add appends srcs, leaving out zero values.
func (s *Sources[T]) Add(srcs ...T) {
	var zero T
	for {
		old := s.p.Load()
		var next []T
		if old != nil {
			next = append(next, *old...)
		}
		for _, src := range srcs {
			if src != zero {
				next = append(next, src)
			}
		}
		if s.p.CompareAndSwap(old, &next) {
			return
		}
	}
}

// Load returns the sources added so far; nil when none was.
func (s *Sources[T]) Load() []T {
	if l := s.p.Load(); l != nil {
		return *l
	}
	return nil
}
