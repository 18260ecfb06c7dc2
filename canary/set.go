package canary

import (
	"encoding/binary"
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

// Set finds the pieces of many marks in one pass. Every Window bytes of a
// piece hold a gram (gramLen bytes) starting at a multiple of step of the
// text, so the text is looked at only there: one 8-byte load, two
// multiplications and a bitmap (a Bloom filter of every gram of every
// mark) rule out nearly every such position; at a position it does not,
// the Window-byte windows that hold the gram are hashed and compared
// exactly. About 1/step of the work of a rolling hash at every byte.
// It is immutable; With makes a new one.
type Set struct {
	marks map[Owner][]string
	bits  []uint64 // of the grams: 1 << (64-shift) bits
	shift uint     // 64 - log2(len(bits)*64)
	exact map[uint64][]piece
}

type piece struct {
	text  string
	owner Owner
}

// gramLen is the length of the grams the bitmap holds, and step the
// distance between the positions of the text looked at: every window of
// Window bytes holds step positions, so one of them is a multiple of step.
const (
	gramLen = 8
	step    = Window - gramLen + 1
)

// base is the multiplier (odd) of the pieces' hash.
const base uint64 = 0x9E3779B97F4A7C15

// Empty is a Set with no marks.
var Empty = NewSet(nil)

// NewSet builds a Set from each owner's marks (marks shorter than Window
// are skipped).
func NewSet(marks map[Owner][]string) *Set {
	s := &Set{marks: marks, exact: map[uint64][]piece{}}
	n := 0
	for _, ms := range marks {
		for _, m := range ms {
			if len(m) >= Window {
				n += len(m) - gramLen + 1
			}
		}
	}
	size := 1 << 12 // bits, at least 32 per gram
	for size < 32*n {
		size <<= 1
	}
	s.bits = make([]uint64, size/64)
	s.shift = uint(64 - bits.TrailingZeros(uint(size)))
	for o, ms := range marks {
		for _, m := range ms {
			if len(m) < Window {
				continue
			}
			for i := 0; i+gramLen <= len(m); i++ {
				i, j := s.slots(gram([]byte(m[i : i+gramLen])))
				s.bits[i/64] |= 1 << (i % 64)
				s.bits[j/64] |= 1 << (j % 64)
			}
			for i := 0; i+Window <= len(m); i++ {
				t := m[i : i+Window]
				h := hashOf(t)
				s.exact[h] = append(s.exact[h], piece{text: t, owner: o})
			}
		}
	}
	return s
}

// gram reads gramLen bytes as a number.
func gram(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// slots are the two bits of gram g in the bitmap.
func (s *Set) slots(g uint64) (uint64, uint64) {
	return (g * 0x9E3779B97F4A7C15) >> s.shift, (g * 0xBF58476D1CE4E5B9) >> s.shift
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
	return s.find([]byte(v))
}

// Find reports the owner of the first piece of a mark in b.
func (s *Set) Find(b []byte) (Owner, bool) {
	if s == nil || len(s.exact) == 0 || len(b) < Window {
		return Owner{}, false
	}
	return s.find(b)
}

// Scanner looks for marks across the chunks of one stream: a piece split
// between two chunks at any offset is found.
type Scanner struct {
	set  *Set
	tail [Window - 1]byte // the last bytes seen (nt of them)
	nt   int
}

// NewScanner starts a stream.
func (s *Set) NewScanner() *Scanner { return &Scanner{set: s} }

// scan feeds b and reports the first piece (by where it starts) that ends
// in b: one that begins in the bytes before b lies in the last Window-1 of
// them and the first Window-1 of b, scanned together first.
func (sc *Scanner) scan(b []byte) (Owner, bool) {
	if len(b) == 0 {
		return Owner{}, false
	}
	if sc.nt > 0 {
		var j [2 * (Window - 1)]byte
		k := copy(j[:], sc.tail[:sc.nt])
		k += copy(j[k:], b[:min(len(b), Window-1)])
		if o, ok := sc.set.find(j[:k]); ok {
			return o, true
		}
	}
	if o, ok := sc.set.find(b); ok {
		return o, true
	}
	if len(b) >= Window-1 {
		sc.nt = copy(sc.tail[:], b[len(b)-(Window-1):])
	} else {
		keep := min(sc.nt, Window-1-len(b))
		copy(sc.tail[:], sc.tail[sc.nt-keep:sc.nt])
		sc.nt = keep + copy(sc.tail[keep:], b)
	}
	return Owner{}, false
}

// find reports the owner of the first piece in b (by where it starts).
func (s *Set) find(b []byte) (Owner, bool) {
	if len(b) < Window {
		return Owner{}, false
	}
	bits, shift := s.bits, s.shift
	best, at := Owner{}, -1
	for p := 0; p+gramLen <= len(b); p += step {
		if at >= 0 && p-(step-1) > at {
			break // no window holding this gram starts before the hit
		}
		g := gram(b[p:])
		if x := (g * 0x9E3779B97F4A7C15) >> shift; bits[x/64]&(1<<(x%64)) == 0 {
			continue
		}
		if y := (g * 0xBF58476D1CE4E5B9) >> shift; bits[y/64]&(1<<(y%64)) == 0 {
			continue
		}
		// the windows that hold the gram at p
		for a := max(0, p-(step-1)); a <= p && a+Window <= len(b); a++ {
			if at >= 0 && a >= at {
				break
			}
			w := b[a : a+Window]
			for _, pc := range s.exact[hashOf(string(w))] {
				if pc.text == string(w) {
					best, at = pc.owner, a
					break
				}
			}
			if at == a {
				break
			}
		}
	}
	return best, at >= 0
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
