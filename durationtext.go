package breakwater

import (
	"strconv"
	"time"
)

// formatDuration prints whole milliseconds below a second ("250ms") and
// seconds with at most one decimal above ("1.5s", "60s").
func formatDuration(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	}
	return strconv.FormatFloat(float64(d.Round(100*time.Millisecond))/float64(time.Second), 'f', -1, 64) + "s"
}
