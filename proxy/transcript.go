package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"lazy/api"
)

// Transcripts (CONTRACT §17): what a task's model call replied — its text
// and the tools it called — read from the reply as it streams past, after
// the scrubber, for the live view and the turn's stored transcript. A
// route's parser turns its protocol into calls on a Transcript; the proxy
// masks every real credential and the task's placeholders in what it hands
// on (a secret may be split across two text pieces, which the byte scrubber
// sees apart). Nothing of this runs for a call whose task nobody watches or
// keeps: Options.Transcript answers nil.

// Transcript receives what one model call's reply said, in order. Its
// methods are called from the goroutine copying the reply (or the route's
// usage reader, which parses a copy), never at once; they must not block.
type Transcript interface {
	OnText(text string)
	OnToolCall(name, input string)
	OnUsage(u api.CallUsage)
	// End: the reply was read to its end or cut; nothing follows.
	End()
}

// ReplyParser reads a reply's bytes as they pass and calls its Transcript.
// Feed gets each read in order; End follows the last.
type ReplyParser interface {
	Feed(b []byte)
	End()
}

// replyParsers makes the parser of a model route's reply that reads the
// bytes itself, by route: the Anthropic Messages route (the OpenAI and
// Gemini routes' are in eventParsers, fed by their usage readers).
var replyParsers = map[string]func(contentType string, t Transcript) ReplyParser{
	"anthropic": newAnthropicParser,
}

// routeOf names the protocol of a model call's path ("" for one whose
// reply carries no transcript, such as count_tokens).
func routeOf(path string) string {
	switch {
	case path == "/v1/messages":
		return "anthropic"
	case path == OpenAIRoute:
		return "openai"
	}
	if _, method, ok := ParseGeminiRoute(path); ok && method != "countTokens" {
		return "gemini"
	}
	return ""
}

// transcriptOf is the masked transcript of a task's reply when
// Options.Transcript asks for one (nil otherwise, asked nothing for a
// route with no parser), and what ends it: the usage read, then End.
func (p *Proxy) transcriptOf(status int, pl *plan, route string) (*maskedTranscript, func()) {
	if p.o.Transcript == nil || status != http.StatusOK || route == "" {
		return nil, nil
	}
	t := p.o.Transcript(pl.grant.TaskID, pl.grant.TaskRef)
	if t == nil {
		return nil, nil
	}
	return p.masked(t, pl)
}

// masked is t behind the masking of the task's secrets, and what ends it.
func (p *Proxy) masked(t Transcript, pl *plan) (*maskedTranscript, func()) {
	mt := &maskedTranscript{t: t, secrets: append(p.secrets(pl), p.placeholdersOf(pl.grant.TaskID)...)}
	return mt, func() {
		if pl.usageSeen {
			mt.OnUsage(pl.usage)
		}
		mt.End()
	}
}

// transcriptBody wraps a task's reply (after the scrubber and the usage
// scanner) when Options.Transcript asks for it; otherwise the reply's body
// stays as it was.
func (p *Proxy) transcriptBody(resp *http.Response, pl *plan) {
	route := routeOf(resp.Request.URL.Path)
	mk := replyParsers[route]
	if mk == nil {
		return
	}
	if p.o.Transcript == nil || resp.StatusCode != http.StatusOK {
		return
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if ct != "text/event-stream" {
		// one message, read whole at its end: it is copied as it passes,
		// and parsed and told by the call's bookkeeping once the reply's
		// last bytes reached the agent (not on the way to them)
		t := p.o.Transcript(pl.grant.TaskID, pl.grant.TaskRef)
		if t == nil {
			return
		}
		c := &replyCopy{r: resp.Body}
		resp.Body = c
		pl.replyEnd = func() {
			mt, end := p.masked(t, pl)
			parse := mk(ct, mt)
			parse.Feed(c.b)
			parse.End()
			end()
		}
		return
	}
	mt, end := p.transcriptOf(resp.StatusCode, pl, route)
	if mt == nil {
		return
	}
	resp.Body = &transcriptReader{r: resp.Body, parse: mk(ct, mt), end: end}
}

// replyCopy keeps a copy of what is read through it, up to one byte past
// maxReplyLine (a parser fed more skips the reply).
type replyCopy struct {
	r io.ReadCloser
	b []byte
}

func (c *replyCopy) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	if room := maxReplyLine + 1 - len(c.b); room > 0 && n > 0 {
		c.b = append(c.b, b[:min(n, room)]...)
	}
	return n, err
}

func (c *replyCopy) Close() error { return c.r.Close() }

// transcriptEvents is the parser a route's usage reader hands its decoded
// events to when Options.Transcript asks for the call's transcript; nil
// (nothing asked of the reader) otherwise.
func (p *Proxy) transcriptEvents(resp *http.Response, pl *plan) EventParser {
	route := routeOf(resp.Request.URL.Path)
	mk := eventParsers[route]
	if mk == nil {
		return nil
	}
	mt, end := p.transcriptOf(resp.StatusCode, pl, route)
	if mt == nil {
		return nil
	}
	return &endingParser{EventParser: mk(mt), after: end}
}

// Mask masks in s the real credentials and the task's placeholders, as a
// model call's transcript is masked: for what an agent client reported of
// its own turn (its tool results, agent-written data), which never passes
// the proxy but joins the same transcript.
func (p *Proxy) Mask(taskID, s string) string {
	set := append(p.secrets(&plan{rt: p.routes.Load()}), p.placeholdersOf(taskID)...)
	out, _ := set.maskString(s)
	return out
}

// placeholdersOf lists the task's placeholders in the grants snapshot.
func (p *Proxy) placeholdersOf(taskID string) secretSet {
	var s secretSet
	if snap := p.o.Grants.Load(); snap != nil {
		for k, g := range *snap {
			if g.TaskID == taskID {
				s = append(s, []byte(k))
			}
		}
	}
	return s
}

// transcriptReader hands each read to the parser; at the end (EOF, an
// error or Close) it ends the transcript once.
type transcriptReader struct {
	r     io.ReadCloser
	parse ReplyParser
	end   func()
	done  bool
}

func (t *transcriptReader) Read(b []byte) (int, error) {
	n, err := t.r.Read(b)
	if n > 0 && !t.done {
		t.parse.Feed(b[:n])
	}
	if err != nil {
		t.finish()
	}
	return n, err
}

func (t *transcriptReader) Close() error {
	t.finish()
	return t.r.Close()
}

func (t *transcriptReader) finish() {
	if !t.done {
		t.done = true
		t.parse.End()
		t.end()
	}
}

// maskedTranscript masks secrets in what it hands on: text is held back
// while its tail may start a secret, so one split across pieces is masked
// whole.
type maskedTranscript struct {
	t       Transcript
	secrets secretSet
	held    []byte
}

func (m *maskedTranscript) OnText(text string) {
	m.held = append(m.held, text...)
	m.secrets.maskAll(m.held)
	keep := m.secrets.heldTail(m.held)
	if out := len(m.held) - keep; out > 0 {
		m.t.OnText(string(m.held[:out]))
		m.held = append(m.held[:0], m.held[out:]...)
	}
}

func (m *maskedTranscript) OnToolCall(name, input string) {
	m.flush()
	n, _ := m.secrets.maskString(name)
	in, _ := m.secrets.maskString(input)
	m.t.OnToolCall(n, in)
}

func (m *maskedTranscript) OnUsage(u api.CallUsage) { m.t.OnUsage(u) }

func (m *maskedTranscript) End() {
	m.flush()
	m.t.End()
}

// flush hands on what is held: a tail that may have started a secret and
// never finished is masked as the scrubber masks one at a stream's end.
func (m *maskedTranscript) flush() {
	if len(m.held) == 0 {
		return
	}
	if keep := m.secrets.heldTail(m.held); keep > 0 {
		for i := len(m.held) - keep; i < len(m.held); i++ {
			m.held[i] = '*'
		}
	}
	m.t.OnText(string(m.held))
	m.held = m.held[:0]
}

// maxReplyLine bounds one SSE line (or a JSON reply) the parser reads; a
// longer one is skipped, not kept.
const maxReplyLine = 1 << 20

// anthropicParser reads the Messages API's reply: server-sent events
// (content_block_start, content_block_delta with text_delta or
// input_json_delta, content_block_stop) or one JSON message.
type anthropicParser struct {
	t      Transcript
	sse    bool
	line   []byte
	skip   bool // the line is past maxReplyLine: dropped to its end
	blocks map[int]*toolBlock
	slow   bool // every event through encoding/json (the tests' reference)
}

type toolBlock struct {
	name  string
	input []byte
}

func newAnthropicParser(contentType string, t Transcript) ReplyParser {
	return &anthropicParser{t: t, sse: contentType == "text/event-stream", blocks: map[int]*toolBlock{}}
}

func (a *anthropicParser) Feed(b []byte) {
	if !a.sse {
		if len(a.line)+len(b) <= maxReplyLine {
			a.line = append(a.line, b...)
		} else {
			a.skip = true
		}
		return
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			a.add(b)
			return
		}
		a.add(b[:i])
		if !a.skip {
			a.event(bytes.TrimSuffix(a.line, []byte{'\r'}))
		}
		a.line, a.skip = a.line[:0], false
		b = b[i+1:]
	}
}

func (a *anthropicParser) add(b []byte) {
	if a.skip {
		return
	}
	if len(a.line)+len(b) > maxReplyLine {
		a.skip, a.line = true, a.line[:0]
		return
	}
	a.line = append(a.line, b...)
}

// anthropicEvent is the part of an SSE data line the transcript reads.
type anthropicEvent struct {
	Type         string `json:"type"`
	Index        int    `json:"index"`
	ContentBlock *struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content_block"`
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
	} `json:"delta"`
}

func (a *anthropicParser) event(line []byte) {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return
	}
	data = bytes.TrimSpace(data)
	if d, ok := fastDelta(data); ok && !a.slow {
		a.delta(d.index, d.kind, d.text, d.partialJSON)
		return
	}
	var e anthropicEvent
	if json.Unmarshal(data, &e) != nil {
		return
	}
	switch e.Type {
	case "content_block_start":
		if cb := e.ContentBlock; cb != nil {
			switch cb.Type {
			case "text":
				if cb.Text != "" {
					a.t.OnText(cb.Text)
				}
			case "tool_use", "server_tool_use":
				tb := &toolBlock{name: cb.Name}
				if len(cb.Input) > 0 && string(cb.Input) != "{}" {
					tb.input = append(tb.input, cb.Input...)
				}
				a.blocks[e.Index] = tb
			}
		}
	case "content_block_delta":
		if d := e.Delta; d != nil {
			a.delta(e.Index, d.Type, d.Text, d.PartialJSON)
		}
	case "content_block_stop":
		if tb := a.blocks[e.Index]; tb != nil {
			delete(a.blocks, e.Index)
			a.t.OnToolCall(tb.name, string(tb.input))
		}
	}
}

// A stream is mostly deltas, one event each: read through encoding/json,
// each cost the proxy more than the rest of its call did (a streamed call
// of 30 deltas spent most of its own time there). fastDelta reads a
// content_block_delta whose keys are type, index and delta (of type, text
// and partial_json), each once and spelled so, in any order and spacing,
// with strings of valid UTF-8 (a lone surrogate half is not read here) and
// a plain index; it leaves any other line to encoding/json
// (FuzzFastDelta: the same event either way).
type delta struct {
	index                   int
	kind, text, partialJSON string
}

func fastDelta(data []byte) (d delta, ok bool) {
	l := lite{b: data}
	var typ string
	var seen [3]bool // type, index, delta
	ok = l.object(func(key []byte) bool {
		switch string(key) {
		case "type":
			return once(&seen[0]) && l.str(&typ)
		case "index":
			return once(&seen[1]) && l.index(&d.index)
		case "delta":
			var dseen [3]bool
			return once(&seen[2]) && l.object(func(key []byte) bool {
				switch string(key) {
				case "type":
					return once(&dseen[0]) && l.str(&d.kind)
				case "text":
					return once(&dseen[1]) && l.str(&d.text)
				case "partial_json":
					return once(&dseen[2]) && l.str(&d.partialJSON)
				}
				return false
			})
		}
		return false
	})
	return d, ok && l.atEnd() && typ == "content_block_delta" && seen[1] && seen[2]
}

// once marks a key seen, and says no to its second time (encoding/json
// keeps the last: left to it).
func once(seen *bool) bool {
	if *seen {
		return false
	}
	*seen = true
	return true
}

// lite reads the little JSON fastDelta takes.
type lite struct {
	b     []byte
	i     int
	depth int // objects and arrays open (encoding/json refuses past 10,000; here past maxLiteDepth is left to it)
}

const maxLiteDepth = 64

func (l *lite) space() {
	for l.i < len(l.b) && (l.b[l.i] == ' ' || l.b[l.i] == '\t' || l.b[l.i] == '\n' || l.b[l.i] == '\r') {
		l.i++
	}
}

// byte1 takes c, after any space.
func (l *lite) byte1(c byte) bool {
	l.space()
	if l.i < len(l.b) && l.b[l.i] == c {
		l.i++
		return true
	}
	return false
}

// key reads an object's key: its bytes as written when it has no escape
// (no copy), else as str reads it.
func (l *lite) key() ([]byte, bool) {
	l.space()
	if l.i >= len(l.b) || l.b[l.i] != '"' {
		return nil, false
	}
	rest := l.b[l.i+1:]
	end := bytes.IndexByte(rest, '"')
	if k := rest[:max(end, 0)]; end >= 0 && bytes.IndexByte(k, '\\') < 0 {
		for _, c := range k {
			if c < ' ' {
				return nil, false
			}
		}
		if !utf8.Valid(k) {
			return nil, false
		}
		l.i += end + 2
		return k, true
	}
	var s string
	if !l.str(&s) {
		return nil, false
	}
	return []byte(s), true
}

// object reads {"key": value, ...}, each value by member.
func (l *lite) object(member func(key []byte) bool) bool {
	return l.seq('{', '}', func() bool {
		key, ok := l.key()
		return ok && l.byte1(':') && member(key)
	})
}

// array reads [value, ...], each value by elem.
func (l *lite) array(elem func() bool) bool { return l.seq('[', ']', elem) }

// seq reads open, elements separated by commas, and end: an object's or
// an array's, one level deeper.
func (l *lite) seq(open, end byte, elem func() bool) bool {
	if !l.byte1(open) || l.depth == maxLiteDepth {
		return false
	}
	l.depth++
	defer func() { l.depth-- }()
	if l.byte1(end) {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if l.byte1(end) {
			return true
		}
		if !l.byte1(',') {
			return false
		}
	}
}

// atEnd reports that nothing but space is left.
func (l *lite) atEnd() bool {
	l.space()
	return l.i == len(l.b)
}

// skip passes over any one JSON value, as strictly as encoding/json reads
// it (its strings as str reads them).
func (l *lite) skip() bool {
	l.space()
	if l.i >= len(l.b) {
		return false
	}
	switch c := l.b[l.i]; {
	case c == '"':
		var s string
		return l.str(&s)
	case c == '{':
		return l.object(func([]byte) bool { return l.skip() })
	case c == '[':
		return l.array(l.skip)
	case c == '-' || c >= '0' && c <= '9':
		return l.number()
	}
	var b bool
	return l.boolean(&b) || l.null()
}

// boolean reads true or false.
func (l *lite) boolean(v *bool) bool {
	l.space()
	for _, w := range []string{"true", "false"} {
		if bytes.HasPrefix(l.b[l.i:], []byte(w)) {
			*v, l.i = w == "true", l.i+len(w)
			return true
		}
	}
	return false
}

// null reads null.
func (l *lite) null() bool {
	l.space()
	if bytes.HasPrefix(l.b[l.i:], []byte("null")) {
		l.i += len("null")
		return true
	}
	return false
}

// number passes over a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (l *lite) number() bool {
	digits := func() int {
		n := 0
		for l.i < len(l.b) && l.b[l.i] >= '0' && l.b[l.i] <= '9' {
			l.i++
			n++
		}
		return n
	}
	if l.i < len(l.b) && l.b[l.i] == '-' {
		l.i++
	}
	start := l.i
	if n := digits(); n == 0 || n > 1 && l.b[start] == '0' {
		return false
	}
	if l.i < len(l.b) && l.b[l.i] == '.' {
		l.i++
		if digits() == 0 {
			return false
		}
	}
	if l.i < len(l.b) && (l.b[l.i] == 'e' || l.b[l.i] == 'E') {
		l.i++
		if l.i < len(l.b) && (l.b[l.i] == '+' || l.b[l.i] == '-') {
			l.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}

// index reads a non-negative integer of at most 9 digits, no leading zero.
func (l *lite) index(v *int) bool {
	l.space()
	n := 0
	for l.i+n < len(l.b) && n <= 9 && l.b[l.i+n] >= '0' && l.b[l.i+n] <= '9' {
		*v = *v*10 + int(l.b[l.i+n]-'0')
		n++
	}
	if n == 0 || n > 9 || n > 1 && l.b[l.i] == '0' {
		return false
	}
	l.i += n
	return true
}

// str reads a string: valid UTF-8, no control byte, JSON's escapes; it is
// copied from its first escape on.
func (l *lite) str(v *string) bool {
	if !l.byte1('"') {
		return false
	}
	b := l.b[l.i:]
	var out []byte
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c == '"' {
			if !utf8.Valid(b[:i]) {
				return false // encoding/json's: each bad byte is U+FFFD
			}
			if out == nil {
				*v = string(b[:i])
			} else {
				*v = string(out)
			}
			l.i += i + 1
			return true
		}
		if c < ' ' {
			return false
		}
		if c != '\\' {
			if out != nil {
				out = append(out, c)
			}
			continue
		}
		if out == nil {
			out = append(make([]byte, 0, len(b)), b[:i]...)
		}
		if i++; i == len(b) {
			return false
		}
		switch b[i] {
		case '"', '\\', '/':
			out = append(out, b[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(b[i+1:])
			if !ok {
				return false
			}
			i += 4
			if utf16.IsSurrogate(r) {
				// a pair, or encoding/json's own way with a lone half
				lo, ok := hex4(b[min(i+3, len(b)):])
				if !ok || b[i+1] != '\\' || b[i+2] != 'u' {
					return false
				}
				if r = utf16.DecodeRune(r, lo); r == utf8.RuneError {
					return false
				}
				i += 6
			}
			out = utf8.AppendRune(out, r)
		default:
			return false // not JSON
		}
	}
	return false // no closing quote
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// delta tells a content_block_delta: its text, or a part of its tool
// call's input.
func (a *anthropicParser) delta(index int, kind, text, partialJSON string) {
	switch kind {
	case "text_delta":
		a.t.OnText(text)
	case "input_json_delta":
		if tb := a.blocks[index]; tb != nil && len(tb.input) <= api.MaxToolInput {
			tb.input = append(tb.input, partialJSON...)
		}
	}
}

func (a *anthropicParser) End() {
	if a.sse || a.skip {
		return
	}
	var m struct {
		Content []struct {
			Type  string          `json:"type"`
			Text  string          `json:"text"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
	}
	if json.Unmarshal(a.line, &m) != nil {
		return
	}
	for _, c := range m.Content {
		switch c.Type {
		case "text":
			a.t.OnText(c.Text)
		case "tool_use", "server_tool_use":
			a.t.OnToolCall(c.Name, strings.TrimSpace(string(c.Input)))
		}
	}
}
