package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"lazy/api"
)

// usageKey starts a usage object in a reply: a JSON reply's top-level
// "usage", an SSE message_start's message.usage, a message_delta's usage.
// Inside a JSON string the quotes would be escaped (\"usage\"), so the raw
// key never matches text the model wrote.
var usageKey = []byte(`"usage"`)

// maxUsageObject bounds one captured usage object; a longer one is not a
// usage object and is dropped.
const maxUsageObject = 4096

// usageScanner reads a reply as it streams past and keeps the last value of
// each usage field it meets (message_delta's counts are totals so far). It
// holds back nothing: bytes are passed on as they come, and only a usage
// object's own bytes (and a tail that may start the key) are copied aside.
type usageScanner struct {
	r io.ReadCloser
	u *api.CallUsage
	// seen: the reply carried a usage object; done: it was read to its end
	seen, done *bool

	tail []byte // the last bytes of the previous read: a key split across reads
	obj  []byte // a usage object being captured
	// their first backing arrays, inside the scanner (no allocation for a
	// usual reply)
	tailBuf [8]byte
	objBuf  [256]byte
	// state of the capture: after the key, waiting for ':' then '{'; then
	// inside the object, depth and string state
	afterKey, colon  bool
	depth            int
	inString, escape bool
}

func newUsageScanner(r io.ReadCloser, u *api.CallUsage, seen, done *bool) *usageScanner {
	s := &usageScanner{}
	s.reset(r, u, seen, done)
	return s
}

// reset readies s (one that lives inside a request's plan) for a reply.
func (s *usageScanner) reset(r io.ReadCloser, u *api.CallUsage, seen, done *bool) {
	*s = usageScanner{r: r, u: u, seen: seen, done: done}
	s.tail, s.obj = s.tailBuf[:0], s.objBuf[:0]
}

func (s *usageScanner) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.scan(p[:n])
	}
	if err == io.EOF {
		*s.done = true
	}
	return n, err
}

func (s *usageScanner) Close() error { return s.r.Close() }

// scan follows the bytes of one read.
func (s *usageScanner) scan(b []byte) {
	for len(b) > 0 {
		switch {
		case s.depth > 0:
			b = s.capture(b)
		case s.afterKey:
			b = s.expectObject(b)
		default:
			b = s.findKey(b)
		}
	}
}

// findKey looks for the key, also across the boundary with the last read.
func (s *usageScanner) findKey(b []byte) []byte {
	k := len(usageKey) - 1
	if len(s.tail) > 0 {
		// the key may straddle: the tail joined with the head of b
		joined := append(append(make([]byte, 0, 2*k), s.tail...), b[:min(len(b), k)]...)
		if i := bytes.Index(joined, usageKey); i >= 0 {
			used := i + len(usageKey) - len(s.tail)
			s.tail = s.tail[:0]
			s.afterKey, s.colon = true, false
			return b[used:]
		}
	}
	if i := bytes.Index(b, usageKey); i >= 0 {
		s.tail = s.tail[:0]
		s.afterKey, s.colon = true, false
		return b[i+len(usageKey):]
	}
	// keep the last k bytes seen: a key may start in them
	if len(b) >= k {
		s.tail = append(s.tail[:0], b[len(b)-k:]...)
	} else {
		s.tail = append(s.tail, b...)
		if len(s.tail) > k {
			s.tail = append(s.tail[:0], s.tail[len(s.tail)-k:]...)
		}
	}
	return nil
}

// expectObject skips white space and one ':' to a '{'; anything else means
// the key was not an object's key ("usage" as a value): look again.
func (s *usageScanner) expectObject(b []byte) []byte {
	for i, c := range b {
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case c == ':' && !s.colon:
			s.colon = true
		case c == '{' && s.colon:
			s.afterKey = false
			s.depth, s.inString, s.escape = 1, false, false
			s.obj = append(s.obj[:0], '{')
			return b[i+1:]
		default:
			s.afterKey = false
			return b[i:]
		}
	}
	return nil
}

// capture copies the object to its closing brace, strings included.
func (s *usageScanner) capture(b []byte) []byte {
	for i, c := range b {
		s.obj = append(s.obj, c)
		switch {
		case s.escape:
			s.escape = false
		case s.inString && c == '\\':
			s.escape = true
		case c == '"':
			s.inString = !s.inString
		case s.inString:
		case c == '{':
			s.depth++
		case c == '}':
			s.depth--
			if s.depth == 0 {
				s.record()
				return b[i+1:]
			}
		}
		if len(s.obj) > maxUsageObject {
			s.depth, s.obj = 0, s.obj[:0]
			return b[i+1:]
		}
	}
	return nil
}

// record keeps the fields the object has (absent ones keep their value).
func (s *usageScanner) record() {
	if s.recordFlat() {
		return
	}
	var f struct {
		InputTokens              *int64 `json:"input_tokens"`
		OutputTokens             *int64 `json:"output_tokens"`
		CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
		CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	}
	if json.Unmarshal(s.obj, &f) != nil {
		return
	}
	set := func(dst *int64, v *int64) {
		if v != nil && *v >= 0 {
			*dst = *v
			*s.seen = true
		}
	}
	set(&s.u.InputTokens, f.InputTokens)
	set(&s.u.OutputTokens, f.OutputTokens)
	set(&s.u.CacheReadInputTokens, f.CacheReadInputTokens)
	set(&s.u.CacheCreationInputTokens, f.CacheCreationInputTokens)
}

// recordFlat reads a usage object of "key": integer pairs (nested objects
// and other values skipped) without encoding/json, which cost a tenth of the
// proxy's CPU per call. Anything it does not expect (an escaped key, a
// fraction) makes it give up, and record parses the object with
// encoding/json instead.
func (s *usageScanner) recordFlat() bool {
	b := s.obj
	var vals [4]int64
	var have [4]bool
	i := 1 // after '{'
	ws := func() {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
			i++
		}
	}
	for {
		ws()
		if i >= len(b) {
			return false
		}
		if b[i] == '}' {
			break
		}
		if b[i] == ',' {
			i++
			continue
		}
		if b[i] != '"' {
			return false
		}
		end := bytes.IndexByte(b[i+1:], '"')
		if end < 0 {
			return false
		}
		key := b[i+1 : i+1+end]
		if bytes.IndexByte(key, '\\') >= 0 {
			return false
		}
		i += end + 2
		ws()
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i++
		ws()
		if i >= len(b) {
			return false
		}
		field := -1
		switch string(key) {
		case "input_tokens":
			field = 0
		case "output_tokens":
			field = 1
		case "cache_read_input_tokens":
			field = 2
		case "cache_creation_input_tokens":
			field = 3
		}
		switch c := b[i]; {
		case c >= '0' && c <= '9':
			var n int64
			for i < len(b) && b[i] >= '0' && b[i] <= '9' {
				if n > (1<<62)/10 {
					return false
				}
				n = n*10 + int64(b[i]-'0')
				i++
			}
			if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
				return false
			}
			if field >= 0 {
				vals[field], have[field] = n, true
			}
		case field >= 0 && c == 'n' && bytes.HasPrefix(b[i:], []byte("null")):
			i += 4 // a null count keeps the value it had
		case field >= 0:
			return false // a count that is no integer: let encoding/json judge
		default:
			j, ok := skipValue(b, i)
			if !ok {
				return false
			}
			i = j
		}
	}
	dst := [4]*int64{&s.u.InputTokens, &s.u.OutputTokens, &s.u.CacheReadInputTokens, &s.u.CacheCreationInputTokens}
	for k := range vals {
		if have[k] {
			*dst[k] = vals[k]
			*s.seen = true
		}
	}
	return true
}

// skipValue skips one JSON value of another key (a string, a number, a
// literal, an object or an array) from b[i]; false when b is not JSON there.
func skipValue(b []byte, i int) (int, bool) {
	depth, inString, escape := 0, false, false
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case escape:
			escape = false
		case inString && c == '\\':
			escape = true
		case c == '"':
			inString = !inString
			if !inString && depth == 0 {
				return i + 1, true
			}
		case inString:
			// on to the next quote or backslash (a model call's body is
			// mostly the text of its messages, skipped here)
			rest := b[i+1:]
			next := bytes.IndexByte(rest, '"')
			if next < 0 {
				return len(b), false
			}
			if bs := bytes.IndexByte(rest[:next], '\\'); bs >= 0 {
				next = bs
			}
			i += next // the loop's i++ lands on it
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth == 0 {
				return i, true // the end of the usage object: no value
			}
			depth--
			if depth == 0 {
				return i + 1, true
			}
		case depth == 0 && (c == ',' || c == ' ' || c == '\n' || c == '\r' || c == '\t'):
			return i, true // the end of a number or a literal
		}
	}
	return i, false
}
