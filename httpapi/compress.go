package httpapi

import (
	"bufio"
	"compress/gzip"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
)

// compressMin is the size below which an answer goes out as it is: gzip's
// own header and the work of compressing cost more than they save.
const compressMin = 1 << 10

// compressLevel trades a review page's bytes against the time to compress
// it: level 5 sends a 1 MB page as ~10% of it in a few milliseconds.
const compressLevel = 5

var gzips = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, compressLevel)
	return w
}}

// compress sends pages, JSON, styles and scripts gzipped to a client that
// accepts it. What it never does: buffer a stream (an event stream is not
// compressed at all, and a Flush sends what was written, compressed or
// not), compress a raw file (text/plain: the daemon streams it with its
// own length) or a range, or touch the headers the security middleware
// set. Before the first compressMin bytes, an answer is held at most that
// long to decide (a short one goes out plain).
func compress(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if !acceptsGzip(r.Header.Get("Accept-Encoding")) {
			return next(c)
		}
		res := c.Response()
		cw := &compressWriter{ResponseWriter: res.Writer}
		res.Header().Add("Vary", "Accept-Encoding")
		res.Writer = cw
		defer func() {
			cw.close()
			res.Writer = cw.ResponseWriter
		}()
		return next(c)
	}
}

// acceptsGzip reports whether an Accept-Encoding value takes gzip (with no
// q=0 against it).
func acceptsGzip(v string) bool {
	for _, part := range strings.Split(v, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		params = strings.ReplaceAll(params, " ", "")
		return params != "q=0" && params != "q=0.0" && params != "q=0.00" && params != "q=0.000"
	}
	return false
}

// compressible reports a content type worth compressing.
func compressible(ctype string) bool {
	t, _, _ := strings.Cut(ctype, ";")
	switch strings.TrimSpace(strings.ToLower(t)) {
	case "text/html", "application/json", "text/css", "application/javascript", "text/javascript", "image/svg+xml":
		return true
	}
	return false
}

// compressWriter decides at its first compressMin bytes (or a Flush, or
// the end) whether the answer goes out gzipped.
type compressWriter struct {
	http.ResponseWriter
	status  int // set by WriteHeader, not yet sent
	held    []byte
	decided bool
	gz      *gzip.Writer
}

func (w *compressWriter) WriteHeader(code int) {
	if w.decided || w.status != 0 {
		if w.decided && w.gz == nil {
			w.ResponseWriter.WriteHeader(code)
		}
		return
	}
	if code < 200 || code == http.StatusNoContent || code == http.StatusNotModified {
		w.decide(false)
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.status = code
	if !w.eligible() {
		w.decide(false)
	}
}

// eligible: the headers allow compressing what follows.
func (w *compressWriter) eligible() bool {
	h := w.Header()
	if h.Get("Content-Encoding") != "" || h.Get("Content-Range") != "" || w.status == http.StatusPartialContent || !compressible(h.Get("Content-Type")) {
		return false
	}
	if n, err := strconv.Atoi(h.Get("Content-Length")); err == nil && n < compressMin {
		return false
	}
	return true
}

func (w *compressWriter) Write(p []byte) (int, error) {
	if !w.decided {
		if w.status == 0 {
			w.status = http.StatusOK
			if w.Header().Get("Content-Type") == "" {
				w.Header().Set("Content-Type", http.DetectContentType(p))
			}
			if !w.eligible() {
				w.decide(false)
				return w.ResponseWriter.Write(p)
			}
		}
		if len(w.held)+len(p) < compressMin {
			w.held = append(w.held, p...)
			return len(p), nil
		}
		w.decide(true)
	}
	if w.gz != nil {
		return w.gz.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

// decide sends the headers (gzipped or not) and what was held.
func (w *compressWriter) decide(gz bool) {
	if w.decided {
		return
	}
	w.decided = true
	if gz {
		h := w.Header()
		h.Del("Content-Length")
		h.Set("Content-Encoding", "gzip")
		w.gz = gzips.Get().(*gzip.Writer)
		w.gz.Reset(w.ResponseWriter)
	}
	if w.status != 0 {
		w.ResponseWriter.WriteHeader(w.status)
	}
	if len(w.held) > 0 {
		held := w.held
		w.held = nil
		if w.gz != nil {
			_, _ = w.gz.Write(held)
		} else {
			_, _ = w.ResponseWriter.Write(held)
		}
	}
}

// Flush sends everything written so far: a stream is never held.
func (w *compressWriter) Flush() {
	w.decide(false)
	if w.gz != nil {
		_ = w.gz.Flush()
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// close ends the answer: the held bytes go out plain, the gzip stream is
// finished.
func (w *compressWriter) close() {
	if !w.decided && w.status == 0 && len(w.held) == 0 {
		w.decided = true // nothing was written: the handler's error path answers
		return
	}
	w.decide(false)
	if w.gz != nil {
		_ = w.gz.Close()
		w.gz.Reset(nil)
		gzips.Put(w.gz)
		w.gz = nil
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *compressWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack is the connection's, for a handler that takes it over.
func (w *compressWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}
