// Package logfile writes the daemon's log file: the lines many goroutines
// log at once are gathered into one write. A line is handed to the file by
// a goroutine that wakes as soon as the line is there (no timer): it is
// written within that wake, and the lines that come while a write is under
// way go in the next one. The logging goroutine never waits for the disk,
// nor for another goroutine's write (slog's handlers write under a lock:
// a write system call per line, every caller queued behind it), unless
// maxPending bytes wait unwritten; then it writes them itself.
//
// What a kill -9 can lose: the lines gathered but not yet handed to the
// file — those logged in the last instants (a goroutine's wake). Close
// writes every line first.
package logfile

import (
	"io"
	"sync"
)

// maxPending is how many bytes may wait for the writing goroutine before
// a caller writes them itself (the disk is slower than the log).
const maxPending = 1 << 20

// Writer gathers writes to w. It is an io.Writer for a log handler: each
// Write is one record, kept whole and in order.
type Writer struct {
	w io.Writer

	mu      sync.Mutex
	pending []byte
	spare   []byte
	closed  bool
	err     error // the last write's error, returned to the next Write

	writing sync.Mutex // held from a swap of pending to its write: order
	kick    chan struct{}
	done    chan struct{}
}

// New starts a Writer on w; Close stops it.
func New(w io.Writer) *Writer {
	l := &Writer{w: w, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go l.loop()
	return l
}

// Write queues p (a copy) for the file.
func (l *Writer) Write(p []byte) (int, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.writing.Lock()
		defer l.writing.Unlock()
		return l.w.Write(p)
	}
	err := l.err
	l.err = nil
	if len(l.pending) == 0 {
		select { // under mu: Close closes kick under it too
		case l.kick <- struct{}{}:
		default: // a wake is on its way
		}
	}
	l.pending = append(l.pending, p...)
	full := len(l.pending) >= maxPending
	l.mu.Unlock()
	if full {
		l.flush()
	}
	return len(p), err
}

func (l *Writer) loop() {
	defer close(l.done)
	for range l.kick {
		l.flush()
	}
}

// flush writes what is pending now.
func (l *Writer) flush() {
	l.writing.Lock()
	defer l.writing.Unlock()
	l.mu.Lock()
	b := l.pending
	l.pending, l.spare = l.spare[:0], nil
	l.mu.Unlock()
	if len(b) == 0 {
		l.mu.Lock()
		l.spare = b
		l.mu.Unlock()
		return
	}
	_, err := l.w.Write(b)
	l.mu.Lock()
	if err != nil {
		l.err = err
	}
	if cap(b) <= 64<<10 {
		l.spare = b[:0] // reused: no buffer per batch
	}
	l.mu.Unlock()
}

// Close writes what is pending and stops the writing goroutine; later
// writes go to w at once. It does not close w.
func (l *Writer) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.kick)
	l.mu.Unlock()
	<-l.done
	l.flush()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}
