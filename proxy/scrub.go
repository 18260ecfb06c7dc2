package proxy

import (
	"bytes"
	"io"
	"net/http"
	"strings"
)

// Scrubbing: the real credential never travels back to a client. Every
// response header and body passes a scanner that masks each occurrence of a
// real secret with '*' of the same length (so Content-Length stays true) and
// reports the hit. The body is scanned as it streams: only a tail that could
// be the start of a secret is held back until the next chunk shows whether it
// is one, so an SSE event (which ends in "\n\n") is never delayed, and a
// secret split across chunk boundaries at any offset is still caught.

// minPartial is the shortest start of a secret that is masked when a stream
// ends on it: shorter ones are no more than a public prefix.
const minPartial = 16

// secretSet is the byte strings that must never reach a client.
type secretSet [][]byte

func (s secretSet) maxLen() int {
	n := 0
	for _, x := range s {
		n = max(n, len(x))
	}
	return n
}

// maskAll masks every full occurrence of a secret in b, in place, and reports
// whether there was one.
func (s secretSet) maskAll(b []byte) bool {
	hit := false
	for _, x := range s {
		if len(x) == 0 {
			continue
		}
		off, k := 0, rarest(x)
		for {
			i := indexSecret(b[off:], x, k)
			if i < 0 {
				break
			}
			for j := off + i; j < off+i+len(x); j++ {
				b[j] = '*'
			}
			off += i + len(x)
			hit = true
		}
	}
	return hit
}

// indexSecret is bytes.Index(b, x), found by x's byte at k (rarest's):
// a vectorised scan for that byte, then a compare at each place it puts
// x. bytes.Index scans for x's first byte, the 's' of "sk-",
// which a reply's words hold every few bytes, and past a few misses falls
// back to hashing every byte; credentials are past its vectorised length.
func indexSecret(b, x []byte, k int) int {
	c := x[k]
	for p := k; p < len(b); p++ {
		j := bytes.IndexByte(b[p:], c)
		if j < 0 {
			return -1
		}
		p += j
		start := p - k
		if start+len(x) > len(b) {
			return -1
		}
		if bytes.Equal(b[start:start+len(x)], x) {
			return start
		}
	}
	return -1
}

// rarest is the index of x's byte least likely in a model's reply: an
// uncommon capital, a capital, a digit or '_', an uncommon small letter,
// anything else, a common small letter or a space (the first of the
// rarest kind).
func rarest(x []byte) int {
	best, k := 256, 0
	for i, c := range x {
		if r := byteRarity[c]; r < best {
			best, k = r, i
		}
	}
	return k
}

// byteRarity ranks bytes by how common they are in a model's reply (JSON
// and prose): lower is rarer.
var byteRarity = func() (r [256]int) {
	for c := range r {
		switch {
		case bytes.IndexByte([]byte("QZXJKVWYUGBFPHMOD"), byte(c)) >= 0:
			r[c] = 0
		case c >= 'A' && c <= 'Z':
			r[c] = 1
		case c >= '0' && c <= '9' || c == '_':
			r[c] = 2
		case bytes.IndexByte([]byte("qzxjkvwy"), byte(c)) >= 0:
			r[c] = 3
		case c >= 'a' && c <= 'z' || c == ' ' || c == '"':
			r[c] = 5
		default:
			r[c] = 4
		}
	}
	return r
}()

// heldTail is the length of the longest suffix of b that is a proper prefix
// of some secret: those bytes may yet become a secret with the next chunk.
func (s secretSet) heldTail(b []byte) int {
	hold := 0
	for _, x := range s {
		if len(x) < 2 {
			continue
		}
		start := max(0, len(b)-(len(x)-1))
		for i := start; i < len(b)-hold; {
			j := bytes.IndexByte(b[i:len(b)-hold], x[0])
			if j < 0 {
				break
			}
			i += j
			if bytes.HasPrefix(x, b[i:]) {
				hold = len(b) - i
				break
			}
			i++
		}
	}
	return hold
}

// maskString masks secrets in a header value.
func (s secretSet) maskString(v string) (string, bool) {
	for _, x := range s {
		if len(x) > 0 && containsBytes(v, x) {
			b := []byte(v)
			s.maskAll(b)
			return string(b), true
		}
	}
	return v, false
}

// containsBytes is strings.Contains(v, string(x)) without making the
// string (a secret is longer than what the compiler converts on the stack:
// six allocations a call, one per header value).
func containsBytes(v string, x []byte) bool {
	for i := 0; i+len(x) <= len(v); i++ {
		j := strings.IndexByte(v[i:len(v)-len(x)+1], x[0])
		if j < 0 {
			return false
		}
		i += j
		if v[i:i+len(x)] == string(x) {
			return true
		}
	}
	return false
}

// maskHeader masks secrets in every value of h, and drops a header whose
// name holds one.
func (s secretSet) maskHeader(h http.Header) bool {
	hit := false
	for k, vs := range h {
		for i, v := range vs {
			if m, ok := s.maskString(v); ok {
				h[k][i] = m
				hit = true
			}
		}
		if s.inName(k) {
			delete(h, k) // a secret in a header name: drop the header
			hit = true
		}
	}
	return hit
}

// inName reports a secret in a header name, in any case: a name comes
// through canonicalised (Sk-Ant-Api03-...), which only changes its case.
func (s secretSet) inName(k string) bool {
	for _, x := range s {
		if len(x) == 0 || len(k) < len(x) {
			continue
		}
		for i := 0; i+len(x) <= len(k); i++ {
			if strings.EqualFold(k[i:i+len(x)], string(x)) {
				return true
			}
		}
	}
	return false
}

// scrubber wraps a response body. It reads into the caller's buffer, masks
// what is whole there, and keeps back only a tail that may be the start of a
// secret. At EOF it also masks the response's trailers: the transport fills
// them then, into the map the upstream announced or, for trailers it never
// announced, into a map it puts in resp.Trailer only then; so the scrubber
// holds the response, not its map. The reverse proxy copies trailers to the
// client only after the body reached EOF through this reader.
type scrubber struct {
	src     io.ReadCloser
	secrets secretSet
	carry   []byte         // held back: a possible start of a secret
	resp    *http.Response // its Trailer is read at EOF (nil: none)
	onHit   func()
	eof     error
}

func newScrubber(src io.ReadCloser, secrets secretSet, resp *http.Response, onHit func()) *scrubber {
	return &scrubber{src: src, secrets: secrets, resp: resp, onHit: onHit, carry: make([]byte, 0, secrets.maxLen())}
}

func (s *scrubber) Read(p []byte) (int, error) {
	if s.eof != nil {
		if len(s.carry) == 0 {
			return 0, s.eof
		}
		n := copy(p, s.carry)
		s.carry = s.carry[:copy(s.carry, s.carry[n:])]
		return n, nil
	}
	if len(p) <= len(s.carry) {
		// a caller buffer smaller than a secret: read through our own
		tmp := make([]byte, len(s.carry)+512)
		n, err := s.Read(tmp)
		m := copy(p, tmp[:n])
		if m < n {
			s.carry = append(append([]byte{}, tmp[m:n]...), s.carry...)
		}
		return m, err
	}
	n0 := copy(p, s.carry)
	n, err := s.src.Read(p[n0:])
	data := p[:n0+n]
	if s.secrets.maskAll(data) {
		s.onHit()
	}
	if err != nil {
		// the stream ends: a held tail is the start of a secret that never
		// completed; one long enough to hold more than the public prefix
		// ("sk-ant-api03-") is masked, not sent
		if hold := s.secrets.heldTail(data); hold >= minPartial {
			for i := len(data) - hold; i < len(data); i++ {
				data[i] = '*'
			}
			s.onHit()
		}
		s.eof = err
		s.carry = s.carry[:0]
		if err == io.EOF && s.resp != nil && s.secrets.maskHeader(s.resp.Trailer) {
			s.onHit()
		}
		return len(data), err
	}
	hold := s.secrets.heldTail(data)
	s.carry = append(s.carry[:0], data[len(data)-hold:]...)
	return len(data) - hold, nil
}

func (s *scrubber) Close() error { return s.src.Close() }
