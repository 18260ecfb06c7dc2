package canary

import (
	"errors"
	"io"
	"math/bits"
	"sort"
)

// Window is the length of the pieces a Set looks for: every Window-byte
// substring of every mark. Any Window bytes of a decoy's distinctive part
// are a hit, however the rest was cut or changed; shorter pieces are no
// more than noise (20 characters of [A-Za-z0-9] are 119 bits).
const Window = 20

// Owner is the task a decoy was made for.
type Owner struct{ TaskID, Ref string }

// Set finds the pieces of many marks in one pass: a rolling hash over the
// last Window bytes, a bitmap that rules out nearly every position with one
// memory read, and an exact comparison for what is left. It is immutable;
// With makes a new one.
type Set struct {
	marks map[Owner][]string
	bits  []uint64 // 1 << shiftBits bits
	shift uint     // 64 - log2(len(bits)*64)
	exact map[uint64][]piece
}

type piece struct {
	text  string
	owner Owner
}

// base is the rolling hash's multiplier (odd), and pow its Window-1'th power.
const base uint64 = 0x9E3779B97F4A7C15

var pow = func() uint64 {
	p := uint64(1)
	for range Window - 1 {
		p *= base
	}
	return p
}()

// Empty is a Set with no marks.
var Empty = NewSet(nil)

// NewSet builds a Set from each owner's marks (marks shorter than Window
// are skipped).
func NewSet(marks map[Owner][]string) *Set {
	s := &Set{marks: marks, exact: map[uint64][]piece{}}
	n := 0
	for _, ms := range marks {
		for _, m := range ms {
			n += max(0, len(m)-Window+1)
		}
	}
	size := 1 << 12 // bits, at least 16 per piece
	for size < 16*n {
		size <<= 1
	}
	s.bits = make([]uint64, size/64)
	s.shift = uint(64 - bits.TrailingZeros(uint(size)))
	for o, ms := range marks {
		for _, m := range ms {
			for i := 0; i+Window <= len(m); i++ {
				t := m[i : i+Window]
				h := hashOf(t)
				i, j := s.slots(h)
				s.bits[i/64] |= 1 << (i % 64)
				s.bits[j/64] |= 1 << (j % 64)
				s.exact[h] = append(s.exact[h], piece{text: t, owner: o})
			}
		}
	}
	return s
}

// slots are the two bits of hash h in the bitmap (a Bloom filter of two
// functions: the high bits, and the high bits of h times another odd
// constant).
func (s *Set) slots(h uint64) (uint64, uint64) {
	return h >> s.shift, (h * 0xBF58476D1CE4E5B9) >> s.shift
}

func hashOf(t string) uint64 {
	var h uint64
	for i := 0; i < len(t); i++ {
		h = h*base + uint64(t[i])
	}
	return h
}

// With is s with owner's marks added (s itself when they are there already).
func (s *Set) With(o Owner, marks []string) *Set {
	if _, ok := s.marks[o]; ok {
		return s
	}
	m := make(map[Owner][]string, len(s.marks)+1)
	for k, v := range s.marks {
		m[k] = v
	}
	m[o] = marks
	return NewSet(m)
}

// Owners lists the owners whose marks s holds, sorted by task id.
func (s *Set) Owners() []Owner {
	out := make([]Owner, 0, len(s.marks))
	for o := range s.marks {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TaskID < out[j].TaskID })
	return out
}

// Len is how many owners s holds marks of.
func (s *Set) Len() int { return len(s.marks) }

// FindString reports the owner of the first piece of a mark in v.
func (s *Set) FindString(v string) (Owner, bool) {
	if s == nil || len(s.exact) == 0 || len(v) < Window {
		return Owner{}, false
	}
	sc := Scanner{set: s}
	return sc.scan([]byte(v))
}

// Find reports the owner of the first piece of a mark in b.
func (s *Set) Find(b []byte) (Owner, bool) {
	if s == nil || len(s.exact) == 0 || len(b) < Window {
		return Owner{}, false
	}
	sc := Scanner{set: s}
	return sc.scan(b)
}

// Scanner looks for marks across the chunks of one stream: a piece split
// between two chunks at any offset is found.
type Scanner struct {
	set  *Set
	h    uint64
	last [Window]byte // the last Window bytes seen, a ring
	pos  int          // next slot of last
	n    int          // bytes seen, up to Window
}

// NewScanner starts a stream.
func (s *Set) NewScanner() *Scanner { return &Scanner{set: s} }

// scan feeds b and reports the first hit. The window's first Window bytes
// of b may begin in earlier chunks (the ring last); after them it lies in
// b, and the byte leaving it is read from b itself.
func (sc *Scanner) scan(b []byte) (Owner, bool) {
	s := sc.set
	h, pos, n := sc.h, sc.pos, sc.n
	head := min(len(b), Window)
	for _, c := range b[:head] {
		if n == Window {
			h -= uint64(sc.last[pos]) * pow
		} else {
			n++
		}
		h = h*base + uint64(c)
		sc.last[pos] = c
		if pos++; pos == Window {
			pos = 0
		}
		if n < Window {
			continue
		}
		if i, j := s.slots(h); s.bits[i/64]&(1<<(i%64)) != 0 && s.bits[j/64]&(1<<(j%64)) != 0 {
			if o, ok := sc.verify(h, pos); ok {
				sc.h, sc.pos, sc.n = h, pos, n
				return o, true
			}
		}
	}
	if len(b) > Window {
		bits, shift := s.bits, s.shift
		for i := Window; i < len(b); i++ {
			h = (h-uint64(b[i-Window])*pow)*base + uint64(b[i])
			if x := h >> shift; bits[x/64]&(1<<(x%64)) == 0 {
				continue
			}
			if y := (h * 0xBF58476D1CE4E5B9) >> shift; bits[y/64]&(1<<(y%64)) == 0 {
				continue
			}
			w := b[i+1-Window : i+1]
			for _, p := range s.exact[h] {
				if p.text == string(w) {
					copy(sc.last[:], w)
					sc.h, sc.pos, sc.n = h, 0, Window
					return p.owner, true
				}
			}
		}
		copy(sc.last[:], b[len(b)-Window:])
		pos = 0
	}
	sc.h, sc.pos, sc.n = h, pos, n
	return Owner{}, false
}

// verify compares the window (oldest byte at pos) with the pieces of hash h.
func (sc *Scanner) verify(h uint64, pos int) (Owner, bool) {
	for _, p := range sc.set.exact[h] {
		ok := true
		for i := 0; i < Window; i++ {
			if p.text[i] != sc.last[(pos+i)%Window] {
				ok = false
				break
			}
		}
		if ok {
			return p.owner, true
		}
	}
	return Owner{}, false
}

// Write scans p (for io.Writer users: a hit is ErrFound).
func (sc *Scanner) Write(p []byte) (int, error) {
	if sc.set == nil || len(sc.set.exact) == 0 {
		return len(p), nil
	}
	if _, ok := sc.scan(p); ok {
		return 0, ErrFound
	}
	return len(p), nil
}

// ErrFound is what a Reader returns once it saw a decoy.
var ErrFound = errors.New("a decoy secret of a sandbox home is in this request: refused before it left")

// Reader passes src on, scanned: no byte of a chunk that completes a piece
// of a mark is handed on (the read fails with ErrFound and onHit is called
// once with the owner), and the last Window-1 bytes read are held back until
// the next read shows they start no piece. At the end of src what is held is
// handed on.
//
// The scan runs in the caller's buffer: a read of p reads src into p behind
// the bytes held back, scans what came, and keeps only the new Window-1
// bytes aside (p of fewer than Window bytes goes through a small buffer in
// the reader). A model call's body read whole costs no copy of it and
// no buffer of its size.
func (s *Set) Reader(src io.Reader, onHit func(Owner)) io.Reader {
	if s == nil || len(s.exact) == 0 {
		return src
	}
	return &reader{src: src, sc: Scanner{set: s}, onHit: onHit}
}

type reader struct {
	src   io.Reader
	sc    Scanner
	onHit func(Owner)
	held  [Window - 1]byte // read and scanned, not yet handed on
	nh    int
	small [8 * Window]byte // for reads of fewer than Window bytes
	ready []byte           // of small: scanned, clean, to hand on
	err   error
	hit   bool
}

func (r *reader) Read(p []byte) (int, error) {
	if len(r.ready) > 0 {
		n := copy(p, r.ready)
		r.ready = r.ready[n:]
		return n, nil
	}
	if r.hit {
		return 0, ErrFound
	}
	if r.err != nil {
		return 0, r.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	buf := p
	if len(p) < Window {
		buf = r.small[:]
	}
	for {
		k := copy(buf, r.held[:r.nh]) // len(buf) >= Window > r.nh
		m, err := r.src.Read(buf[k:])
		if m > 0 {
			if o, ok := r.sc.scan(buf[k : k+m]); ok {
				r.hit = true
				if r.onHit != nil {
					r.onHit(o)
				}
				return 0, ErrFound
			}
		}
		total, hand := k+m, k+m-(Window-1)
		if err != nil {
			r.err, r.nh = err, 0
			hand = total // the end: nothing more can complete a piece
		} else {
			r.nh = copy(r.held[:], buf[max(hand, 0):total])
		}
		if hand <= 0 {
			if err != nil {
				return 0, err
			}
			continue // all of it held back: read on
		}
		if len(p) < Window {
			r.ready = buf[:hand]
			n := copy(p, r.ready)
			r.ready = r.ready[n:]
			return n, nil
		}
		return hand, nil
	}
}

// ReadCloser is Reader for a body that must be closed.
func (s *Set) ReadCloser(src io.ReadCloser, onHit func(Owner)) io.ReadCloser {
	if s == nil || len(s.exact) == 0 {
		return src
	}
	return struct {
		io.Reader
		io.Closer
	}{s.Reader(src, onHit), src}
}
