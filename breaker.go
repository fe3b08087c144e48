package breakwater

// State is a circuit breaker's state. Its numeric values are the ones the
// breaker state gauge exports: 0 closed, 1 half-open, 2 open.
type State uint8

// Breaker states.
const (
	StateClosed State = iota
	StateHalfOpen
	StateOpen
)

// String returns "closed", "half_open" or "open".
func (s State) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateHalfOpen:
		return "half_open"
	case StateOpen:
		return "open"
	}
	return "unknown"
}
