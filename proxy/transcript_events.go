package proxy

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"lazy/api"
)

// Transcripts of the routes whose reply is decoded already to read its
// usage (the OpenAI Responses and Gemini routes, parsed by sseFeed as the
// reply passes): their parsers are handed each decoded event rather than
// parse the bytes a second time. The usage reader calls the parser from
// the goroutine reading the reply, one call at a time, and ends it (after
// the call's usage is recorded) before the reply's EOF or Close returns.

// EventParser reads a reply its route decodes: each server-sent event's
// data, or a JSON (not streamed) reply whole; End follows the last.
type EventParser interface {
	Event(data []byte)
	Whole(body []byte)
	End()
}

// eventParsers makes the parser of a route whose usage reader decodes the
// reply (see replyParsers for the ones that read the bytes themselves).
var eventParsers = map[string]func(t Transcript) EventParser{
	"openai": newResponsesParser,
	"gemini": newGeminiParser,
}

// endingParser ends the call's transcript after its parser: the usage the
// reply reported, then End.
type endingParser struct {
	EventParser
	after func()
}

func (e *endingParser) End() {
	e.EventParser.End()
	e.after()
}

// responsesParser reads an OpenAI Responses reply: output_text deltas as
// text; a function_call (or custom_tool_call) item as a tool call, its
// arguments gathered from the deltas and taken whole from .done (or from
// the item's own output_item.done); another *_call item (a shell, a web
// search) at its output_item.done, named by its type.
type responsesParser struct {
	t     Transcript
	tools map[int]*toolBlock // by output_index, until the call is handed on
	slow  bool               // every event through encoding/json (the tests' reference)
}

func newResponsesParser(t Transcript) EventParser {
	return &responsesParser{t: t, tools: map[int]*toolBlock{}}
}

// responsesItem is an output item of a Responses reply.
type responsesItem struct {
	Type      string          `json:"type"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"` // function_call
	Input     string          `json:"input"`     // custom_tool_call
	Action    json.RawMessage `json:"action"`    // local_shell_call, web_search_call
	Content   []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// responsesEvent is the part of a Responses stream event the transcript
// reads.
type responsesEvent struct {
	Type        string         `json:"type"`
	OutputIndex int            `json:"output_index"`
	Delta       string         `json:"delta"`
	Arguments   *string        `json:"arguments"`
	Input       *string        `json:"input"`
	Item        *responsesItem `json:"item"`
}

func (r *responsesParser) Event(data []byte) {
	if !r.slow {
		if typ, index, delta, ok := fastResponsesDelta(data); ok {
			r.delta(typ, index, delta)
			return
		}
	}
	var e responsesEvent
	if json.Unmarshal(data, &e) != nil {
		return
	}
	switch e.Type {
	case "response.output_text.delta", "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
		r.delta(e.Type, e.OutputIndex, e.Delta)
	case "response.output_item.added":
		if it := e.Item; it != nil && isToolItem(it.Type) {
			r.tools[e.OutputIndex] = &toolBlock{name: it.Name}
		}
	case "response.function_call_arguments.done", "response.custom_tool_call_input.done":
		if tb := r.tools[e.OutputIndex]; tb != nil {
			delete(r.tools, e.OutputIndex)
			in := string(tb.input)
			if e.Arguments != nil {
				in = *e.Arguments
			} else if e.Input != nil {
				in = *e.Input
			}
			r.t.OnToolCall(tb.name, in)
		}
	case "response.output_item.done":
		it := e.Item
		if it == nil {
			return
		}
		if isToolItem(it.Type) {
			if _, open := r.tools[e.OutputIndex]; !open {
				return // handed on at its .done, or never announced: the item
				// of a call announced is handed on once
			}
			delete(r.tools, e.OutputIndex)
		}
		r.item(it, false)
	}
}

// delta tells a delta event: text, or a part of a tool call's input.
func (r *responsesParser) delta(typ string, index int, delta string) {
	switch typ {
	case "response.output_text.delta":
		if delta != "" {
			r.t.OnText(delta)
		}
	case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
		if tb := r.tools[index]; tb != nil && len(tb.input) <= api.MaxToolInput {
			tb.input = append(tb.input, delta...)
		}
	}
}

// fastResponsesDelta reads a Responses delta event (most of a stream, as
// content_block_delta is of Anthropic's: fastDelta) without encoding/json:
// its type, output_index and delta, the other keys skipped. It takes only
// valid JSON whose keys of responsesEvent are each written once, in their
// case, with values of their type (encoding/json would fail the whole
// event on a wrong one); anything else is left to encoding/json
// (FuzzFastResponsesDelta: the same event either way).
func fastResponsesDelta(data []byte) (typ string, index int, delta string, ok bool) {
	l := lite{b: data}
	var seen [3]bool // type, output_index, delta
	ok = l.object(func(key []byte) bool {
		switch string(key) {
		case "type":
			return once(&seen[0]) && l.str(&typ)
		case "output_index":
			return once(&seen[1]) && l.index(&index)
		case "delta":
			return once(&seen[2]) && l.str(&delta)
		}
		for _, name := range responsesEventKeys {
			if bytes.EqualFold(key, name) {
				return false // another case of a key, or a typed field: encoding/json's
			}
		}
		return l.skip()
	})
	return typ, index, delta, ok && l.atEnd() && seen[0] && seen[2] && strings.HasSuffix(typ, ".delta")
}

// responsesEventKeys are the keys encoding/json reads into responsesEvent.
var responsesEventKeys = [][]byte{[]byte("type"), []byte("output_index"), []byte("delta"), []byte("arguments"), []byte("input"), []byte("item")}

// isToolItem reports an item whose arguments stream in deltas.
func isToolItem(typ string) bool { return typ == "function_call" || typ == "custom_tool_call" }

// item hands on one whole output item; text only in a whole reply (a
// stream's text came in its deltas).
func (r *responsesParser) item(it *responsesItem, whole bool) {
	switch {
	case it.Type == "message":
		if whole {
			for _, c := range it.Content {
				if c.Type == "output_text" && c.Text != "" {
					r.t.OnText(c.Text)
				}
			}
		}
	case it.Type == "function_call":
		r.t.OnToolCall(it.Name, it.Arguments)
	case it.Type == "custom_tool_call":
		r.t.OnToolCall(it.Name, it.Input)
	case strings.HasSuffix(it.Type, "_call"):
		r.t.OnToolCall(it.Type, strings.TrimSpace(string(it.Action)))
	}
}

func (r *responsesParser) Whole(body []byte) {
	var m struct {
		Output []responsesItem `json:"output"`
	}
	if json.Unmarshal(body, &m) != nil {
		return
	}
	for i := range m.Output {
		r.item(&m.Output[i], true)
	}
}

// End hands on a call whose arguments never finished, as far as they came.
func (r *responsesParser) End() {
	for _, i := range slices.Sorted(maps.Keys(r.tools)) {
		r.t.OnToolCall(r.tools[i].name, string(r.tools[i].input))
	}
	clear(r.tools)
}

// geminiParser reads a Gemini reply: each GenerateContentResponse (an SSE
// chunk, an element of a JSON array, or the JSON reply) hands on its first
// candidate's text parts (a thought is not the answer) and functionCalls.
type geminiParser struct {
	t    Transcript
	slow bool // every response through encoding/json (the tests' reference)
}

func newGeminiParser(t Transcript) EventParser { return &geminiParser{t: t} }

// geminiPart is what the transcript reads of a part of a response.
type geminiPart struct {
	Text         string      `json:"text"`
	Thought      bool        `json:"thought"`
	FunctionCall *geminiCall `json:"functionCall"`
}

type geminiCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

func (g *geminiParser) Event(data []byte) {
	if !g.slow {
		if parts, ok := fastGeminiParts(data); ok {
			g.tell(parts)
			return
		}
	}
	var m struct {
		Candidates []struct {
			Content struct {
				Parts []geminiPart `json:"parts"`
			} `json:"content"`
		} `json:"candidates"`
	}
	if json.Unmarshal(data, &m) != nil || len(m.Candidates) == 0 {
		return
	}
	g.tell(m.Candidates[0].Content.Parts)
}

// tell hands on the parts of a response's first candidate.
func (g *geminiParser) tell(parts []geminiPart) {
	for _, p := range parts {
		switch {
		case p.FunctionCall != nil:
			g.t.OnToolCall(p.FunctionCall.Name, strings.TrimSpace(string(p.FunctionCall.Args)))
		case p.Text != "" && !p.Thought:
			g.t.OnText(p.Text)
		}
	}
}

// fastGeminiParts is the parts of a response's first candidate, read
// without encoding/json (as fastDelta and fastResponsesDelta are): every
// candidate is read, its typed keys each once, in their case, of their
// type, the other keys skipped as strictly as encoding/json reads them.
// ok is false for a response to leave to encoding/json, or one with no
// candidate (FuzzFastGeminiParts: the same parts either way).
func fastGeminiParts(data []byte) (first []geminiPart, ok bool) {
	l := lite{b: data}
	candidates := 0
	var seenTop bool
	ok = l.object(func(key []byte) bool {
		if string(key) != "candidates" {
			return !bytes.EqualFold(key, []byte("candidates")) && l.skip()
		}
		if !once(&seenTop) {
			return false
		}
		return l.array(func() bool {
			candidates++
			var seenContent bool
			return l.object(func(key []byte) bool {
				if string(key) != "content" {
					return !bytes.EqualFold(key, []byte("content")) && l.skip()
				}
				var seenParts bool
				return once(&seenContent) && l.object(func(key []byte) bool {
					if string(key) != "parts" {
						return !bytes.EqualFold(key, []byte("parts")) && l.skip()
					}
					return once(&seenParts) && l.array(func() bool {
						var p geminiPart
						if !l.part(&p) {
							return false
						}
						if candidates == 1 {
							first = append(first, p)
						}
						return true
					})
				})
			})
		})
	})
	return first, ok && l.atEnd() && candidates > 0
}

// part reads a part: text (a string), thought (true or false), functionCall
// ({name, args}; args kept as written), each once and in its case.
func (l *lite) part(p *geminiPart) bool {
	var seen [3]bool
	return l.object(func(key []byte) bool {
		switch string(key) {
		case "text":
			return once(&seen[0]) && l.str(&p.Text)
		case "thought":
			return once(&seen[1]) && l.boolean(&p.Thought)
		case "functionCall":
			if !once(&seen[2]) {
				return false
			}
			p.FunctionCall = &geminiCall{}
			var fseen [2]bool
			return l.object(func(key []byte) bool {
				switch string(key) {
				case "name":
					return once(&fseen[0]) && l.str(&p.FunctionCall.Name)
				case "args":
					l.space()
					start := l.i
					if !once(&fseen[1]) || bytes.HasPrefix(l.b[l.i:], []byte("null")) || !l.skip() {
						return false
					}
					p.FunctionCall.Args = l.b[start:l.i]
					return true
				}
				return !bytes.EqualFold(key, []byte("name")) && !bytes.EqualFold(key, []byte("args")) && l.skip()
			})
		}
		for _, name := range []string{"text", "thought", "functionCall"} {
			if bytes.EqualFold(key, []byte(name)) {
				return false
			}
		}
		return l.skip()
	})
}

// Whole: a reply is one response; the route splits a JSON array of them.
func (g *geminiParser) Whole(body []byte) { g.Event(body) }

func (g *geminiParser) End() {}
