package proxy

import "bytes"

// sseFeed parses a server-sent event stream pushed to it in the chunks the
// reply arrives in, on the reader's own goroutine: no pipe, no goroutine
// and no allocation per event (its buffers are reused). It reads the
// stream as go-sse's Read does: lines end at \n, \r or \r\n; a leading
// UTF-8 BOM is dropped; a line starting with ':' is a comment; "data"
// lines are joined with \n; an "event" or "id" line (an id without a NUL)
// makes the event non-empty; a blank line dispatches a non-empty event;
// the end of the stream never dispatches a pending one. An event (or a
// line) larger than max stops the parser for good, as go-sse's does.
type sseFeed struct {
	max     int
	line    []byte // a line not yet ended
	data    []byte // the event's data so far, each line followed by \n
	typ     []byte
	dirty   bool
	cr      bool // the last chunk ended in \r: a \n first in the next one belongs to it
	started bool
	dead    bool
	// onEvent is handed each dispatched event; typ and data are valid
	// only until it returns
	onEvent func(typ, data []byte)
}

// feed parses b.
func (f *sseFeed) feed(b []byte) {
	if f.dead {
		return
	}
	if f.cr && len(b) > 0 && b[0] == '\n' {
		b = b[1:]
	}
	f.cr = false
	for len(b) > 0 && !f.dead {
		i := lineEnd(b)
		if i < 0 {
			if len(f.line)+len(b)+len(f.data) > f.max {
				f.dead = true
				return
			}
			f.line = append(f.line, b...)
			return
		}
		ln := b[:i]
		if len(f.line) > 0 {
			if len(f.line)+len(ln)+len(f.data) > f.max {
				f.dead = true
				return
			}
			f.line = append(f.line, ln...)
			ln = f.line
		}
		f.lineDone(ln)
		f.line = f.line[:0]
		if b[i] == '\r' {
			if i+1 == len(b) {
				f.cr = true
				return
			}
			if b[i+1] == '\n' {
				i++
			}
		}
		b = b[i+1:]
	}
}

// lineDone handles one whole line.
func (f *sseFeed) lineDone(ln []byte) {
	if !f.started {
		f.started = true
		ln = bytes.TrimPrefix(ln, []byte("\xEF\xBB\xBF"))
	}
	if len(ln) == 0 {
		if f.dirty {
			d := f.data
			if len(d) > 0 {
				d = d[:len(d)-1]
			}
			f.onEvent(f.typ, d)
		}
		f.data, f.typ, f.dirty = f.data[:0], f.typ[:0], false
		return
	}
	if ln[0] == ':' {
		return
	}
	name, value := ln, []byte(nil)
	if i := bytes.IndexByte(ln, ':'); i >= 0 {
		name, value = ln[:i], ln[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		if len(f.data)+len(value)+1 > f.max {
			f.dead = true
			return
		}
		f.data = append(append(f.data, value...), '\n')
		f.dirty = true
	case "event":
		f.typ = append(f.typ[:0], value...)
		f.dirty = true
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			f.dirty = true
		}
	}
}

// lineEnd is the index of b's first \r or \n, or -1: two vectorised
// scans (bytes.IndexByte), where bytes.IndexAny walks b a byte at a time
// (a streamed reply is read through here whole: it was the most the
// OpenAI route's own reading cost).
func lineEnd(b []byte) int {
	n := bytes.IndexByte(b, '\n')
	before := b
	if n >= 0 {
		before = b[:n]
	}
	if r := bytes.IndexByte(before, '\r'); r >= 0 {
		return r
	}
	return n
}
