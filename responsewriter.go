package breakwater

import (
	"bufio"
	"io"
	"net"
	"net/http"
)

// responseWriter is the http.ResponseWriter the inbound middleware hand to
// the next handler when they need to know what the handler did: the final
// status (recorded once), whether anything reached the client (a header, a
// body byte or a flush), and whether the connection was hijacked.
//
// It is transparent: Unwrap lets [http.ResponseController] reach the
// writer below (deadlines, full duplex), and Flush, FlushError, Hijack and
// ReadFrom delegate through a ResponseController, so they work whenever the
// writer below supports them and fail with [http.ErrNotSupported] when it
// does not. A second WriteHeader from the handler is passed through, so
// net/http still reports the handler's own mistake; the middleware never
// write after the handler did.
//
// Stacked breakwater middleware share one responseWriter: an inner one
// finds the outer's wrapper as its writer and reuses it instead of
// wrapping again, which keeps the cost to one allocation
// per request and lets the outermost observer see an inner rejection.
//
// A responseWriter is used by the handler's goroutine only, like the writer
// it wraps; it holds no lock.
type responseWriter struct {
	w      http.ResponseWriter
	status int // the final status written; 0 until then
	// wrote: a final header, a body byte or a flush reached w.
	wrote    bool
	hijacked bool
	// observed: an outer middleware reports the request's EventRequest.
	observed bool
	// rejectedBy names the mechanism that answered the request instead of
	// the handler.
	rejectedBy Mechanism
	// caller is what a trusted breakwater caller said of the request
	// (CallerHeaders): a 5xx answer to it after a call serving it failed
	// says not to retry.
	caller *caller
	// slots are the Shedders' slots (stacked Shedders nest), held here so
	// that a hijack frees them, and so that holding one costs no
	// allocation of its own.
	slots  [2]Slot
	nSlots uint8
}

var (
	_ http.ResponseWriter = (*responseWriter)(nil)
	_ http.Flusher        = (*responseWriter)(nil)
	_ http.Hijacker       = (*responseWriter)(nil)
	_ io.ReaderFrom       = (*responseWriter)(nil)
)

// Header returns the header map of the writer below.
func (rw *responseWriter) Header() http.Header { return rw.w.Header() }

// WriteHeader records the first final status and passes every call
// through. Informational statuses (1xx other than 101) are passed through
// without being recorded: a final status may still follow them.
func (rw *responseWriter) WriteHeader(code int) {
	if !rw.wrote && !rw.hijacked {
		if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
			rw.w.WriteHeader(code)
			return
		}
		rw.status = code
		rw.wrote = true
		if code >= 500 && rw.caller != nil && rw.caller.failed.Load() {
			if h := rw.w.Header(); h.Get(headerPushback) == "" {
				h.Set(headerPushback, pushbackNone)
			}
		}
	}
	rw.w.WriteHeader(code)
}

func (rw *responseWriter) markWritten() {
	if !rw.wrote && !rw.hijacked {
		rw.status = http.StatusOK
		rw.wrote = true
	}
}

// Write writes to the writer below; the first write records 200 when no
// status was written.
func (rw *responseWriter) Write(p []byte) (int, error) {
	rw.markWritten()
	return rw.w.Write(p)
}

// ReadFrom copies src to the writer below, through its own ReadFrom when it
// has one (net/http's uses sendfile for files).
func (rw *responseWriter) ReadFrom(src io.Reader) (int64, error) {
	rw.markWritten()
	if rf, ok := rw.w.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(writerOnly{rw.w}, src)
}

// writerOnly hides every method but Write, so io.Copy cannot loop back into
// ReadFrom.
type writerOnly struct{ io.Writer }

// Flush flushes the writer below, if it can flush.
func (rw *responseWriter) Flush() { _ = rw.FlushError() }

// FlushError flushes the writer below and returns its error;
// [http.ErrNotSupported] when it cannot flush.
func (rw *responseWriter) FlushError() error {
	err := http.NewResponseController(rw.w).Flush()
	if err == nil {
		rw.markWritten() // a flush sends the header
	}
	return err
}

// Hijack hijacks the connection below; [http.ErrNotSupported] when it
// cannot be hijacked (HTTP/2, a recorder). After a successful hijack the
// middleware write nothing more and free what the request held.
func (rw *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(rw.w).Hijack()
	if err == nil && !rw.hijacked {
		rw.hijacked = true
		for i := range rw.nSlots {
			rw.slots[i].Ignore()
		}
	}
	return c, brw, err
}

// Unwrap returns the writer below, for [http.ResponseController].
func (rw *responseWriter) Unwrap() http.ResponseWriter { return rw.w }

// holdSlot keeps slot until the handler returns, so that a hijack can
// give it back (Ignore), and returns where it is kept; nil when no room is
// left: the caller then keeps it until the handler returns.
func (rw *responseWriter) holdSlot(slot Slot) *Slot {
	if int(rw.nSlots) == len(rw.slots) {
		return nil
	}
	rw.slots[rw.nSlots] = slot
	rw.nSlots++
	return &rw.slots[rw.nSlots-1]
}

// dropSlot forgets the most recent slot holdSlot kept, once given back:
// its owner is done. Slots nest like the middleware that hold them.
func (rw *responseWriter) dropSlot() {
	rw.nSlots--
	rw.slots[rw.nSlots] = Slot{}
}

// canHijack reports whether w or a writer below it (through Unwrap) can
// hijack the connection, so that a middleware wraps only when a hijack
// could happen.
func canHijack(w http.ResponseWriter) bool {
	for range 16 { // a bound against Unwrap cycles
		switch x := w.(type) {
		case *responseWriter:
			return true
		case http.Hijacker:
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return false
		}
	}
	return false
}
