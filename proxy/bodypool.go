package proxy

// Request bodies the proxy reads before it forwards them (to size a
// budget's hold, to replay to a fallback, to scan for decoys before the
// upstream hears of the call) are read into buffers taken from a pool and
// given back once no reader can reach them again: a ~3 KB prompt was a
// quarter of the bytes a task's call allocated, and so of the collector's
// work. A buffer goes back only when it is proven unreachable:
//
//   - the handler has returned (nothing of the proxy's reads it after), and
//   - every attempt whose request carried the body has reported, through
//     httptrace's WroteRequest, that its request was written without error
//     (the trace is put on each attempt's own request, in chainTransport,
//     so no other request can report in its place).
//
// After such a report net/http reads that body no more: HTTP/1 has read it
// to its end (or, refused a 100-continue, closed it), and neither HTTP/1
// nor HTTP/2 retries a request whose body has no GetBody once its headers
// were written. The readers stay *bytes.Reader (in io.NopCloser), which
// net/http knows is in memory and sends with the headers in one write; a
// reader of our own with a Close hook would cost that write. An attempt
// that fails, or never reports, keeps its buffers out of the pool for
// good: the collector frees them as before.

import (
	"math/bits"
	"net/http"
	"net/http/httptrace"
	"sync"
)

// Buffer sizes pooled: powers of two from 4 KB to 64 KB (chunkSize); a
// larger read-ahead is allocated as before.
const (
	minPooledShift = 12
	maxPooledShift = 16
)

var bodyPools [maxPooledShift - minPooledShift + 1]sync.Pool

// poolClass is the pool of buffers that hold n bytes, or -1.
func poolClass(n int64) int {
	if n <= 0 || n > 1<<maxPooledShift {
		return -1
	}
	shift := bits.Len64(uint64(n - 1))
	return max(shift, minPooledShift) - minPooledShift
}

// bodyHold is a request's pooled buffers and what keeps them from the
// pool.
type bodyHold struct {
	mu   sync.Mutex
	bufs []*[]byte // taken from bodyPools; nil once given back
	// handed: attempts sent with the body; wrote: those whose request was
	// written without error (httptrace); done: the handler has returned
	handed, wrote int
	done          bool
	trace         httptrace.ClientTrace
	first         [2]*[]byte // bufs' room
}

// take returns a buffer of n bytes, pooled when n is a pooled size.
func (h *bodyHold) take(n int64) []byte {
	c := poolClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	bp, _ := bodyPools[c].Get().(*[]byte)
	if bp == nil {
		b := make([]byte, 1<<(c+minPooledShift))
		bp = &b
	}
	h.mu.Lock()
	if h.bufs == nil {
		h.bufs = h.first[:0]
	}
	h.bufs = append(h.bufs, bp)
	h.mu.Unlock()
	return (*bp)[:n]
}

// pooled reports whether the request holds pooled buffers.
func (h *bodyHold) pooled() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.bufs) > 0
}

// wroteRequest is httptrace's report of one attempt's write.
func (h *bodyHold) wroteRequest(info httptrace.WroteRequestInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if info.Err == nil {
		h.wrote++
	}
	h.release()
}

// finish: the handler has returned.
func (h *bodyHold) finish() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done = true
	h.release()
}

// release gives the buffers back once nothing can read them (h.mu held).
func (h *bodyHold) release() {
	if !h.done || h.wrote < h.handed || len(h.bufs) == 0 {
		return
	}
	for i, bp := range h.bufs {
		bodyPools[poolClass(int64(cap(*bp)))].Put(bp)
		h.bufs[i] = nil
	}
	h.bufs = nil
}

// attempt counts an attempt about to be sent with the body, and returns
// it with the trace that reports its write (the attempt's own context).
func (h *bodyHold) attempt(out *http.Request) *http.Request {
	h.mu.Lock()
	h.handed++
	if h.trace.WroteRequest == nil {
		h.trace.WroteRequest = h.wroteRequest
	}
	h.mu.Unlock()
	return out.WithContext(httptrace.WithClientTrace(out.Context(), &h.trace))
}
