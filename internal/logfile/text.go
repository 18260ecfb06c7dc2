package logfile

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// NewText is slog.NewTextHandler(w, opts) that writes a record of a
// message alone (the proxy's traffic line of every call, CONTRACT §6)
// without slog's general path: the same bytes, built in one pooled buffer,
// the message quoted a byte at a time instead of a rune at a time. Any
// other record, and every handler made from it by WithAttrs or WithGroup,
// is slog's own. FuzzTextAsSlog holds the output to slog's.
func NewText(w io.Writer, opts *slog.HandlerOptions) slog.Handler {
	if opts == nil {
		opts = &slog.HandlerOptions{}
	}
	h := slog.NewTextHandler(w, opts)
	if opts.AddSource || opts.ReplaceAttr != nil {
		return h // each record goes through them: no short way
	}
	return &textHandler{Handler: h, w: w}
}

type textHandler struct {
	slog.Handler // slog's TextHandler on the same writer and options
	w            io.Writer
}

var textBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

func (h *textHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.NumAttrs() > 0 || !plainASCII(r.Message) {
		return h.Handler.Handle(ctx, r)
	}
	bp := textBufs.Get().(*[]byte)
	b := (*bp)[:0]
	if !r.Time.IsZero() {
		b = append(b, "time="...)
		b = appendStamp(b, r.Time)
		b = append(b, ' ')
	}
	b = append(b, "level="...)
	b = append(b, r.Level.String()...)
	b = append(b, " msg="...)
	b = appendTextValue(b, r.Message)
	b = append(b, '\n')
	_, err := h.w.Write(b)
	if cap(b) <= 4<<10 {
		*bp = b
		textBufs.Put(bp)
	}
	return err
}

// plainASCII reports a string of printable ASCII only, the strings whose
// quoting appendTextValue does itself.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// appendTextValue appends s (printable ASCII) as slog's text handler
// writes a value: bare, or quoted as strconv.Quote does when it holds a
// space, an '=' or a '"', or is empty.
func appendTextValue(b []byte, s string) []byte {
	quote := s == ""
	for i := 0; i < len(s) && !quote; i++ {
		quote = s[i] == ' ' || s[i] == '=' || s[i] == '"'
	}
	if !quote {
		return append(b, s...)
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

// stampLayout is how slog's text handler writes a record's time.
const stampLayout = "2006-01-02T15:04:05.000Z07:00"

// stamp is one second of stampLayout, formatted: the date and time before
// the milliseconds, and the zone after them.
type stamp struct {
	sec        int64
	loc        *time.Location
	head, zone string
}

// lastStamp is the second most recently written (a log's records come
// many to a second).
var lastStamp atomic.Pointer[stamp]

// appendStamp appends t in stampLayout: the second's date, time and zone
// formatted once and kept, the milliseconds written each time. A year
// outside 0–9999 is formatted whole each time (its date is not 19 bytes).
func appendStamp(b []byte, t time.Time) []byte {
	t = t.Truncate(time.Millisecond)
	sec, loc := t.Unix(), t.Location()
	c := lastStamp.Load()
	if c == nil || c.sec != sec || c.loc != loc {
		if y := t.Year(); y < 0 || y > 9999 {
			return t.AppendFormat(b, stampLayout)
		}
		f := t.AppendFormat(nil, stampLayout)
		c = &stamp{sec: sec, loc: loc, head: string(f[:len("2006-01-02T15:04:05")]), zone: string(f[len("2006-01-02T15:04:05.000"):])}
		lastStamp.Store(c)
	}
	ms := t.Nanosecond() / int(time.Millisecond)
	b = append(b, c.head...)
	b = append(b, '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	return append(b, c.zone...)
}
