// Package stubmodel is the project's stand-in model upstream for tests and
// `lazy demo`: it answers the routes the real clients use (Anthropic's POST
// /v1/messages as JSON or as an SSE stream, POST /v1/messages/count_tokens,
// HEAD /api/hello; OpenAI's POST /v1/responses, openai.go; Gemini's
// /v1beta/models/<model>:generateContent and :streamGenerateContent,
// gemini.go) on loopback, and records every request it received so tests can
// see exactly what reached the upstream.
//
// One directive in the last user message makes an Anthropic reply a tool
// call rather than text (a Gemini reply: a write_file functionCall after
// its text), so a real client runs a tool:
//
//	@stub-write PATH TEXT   a Write tool_use of TEXT (\n for newlines) to
//	                        PATH, relative to the client's working directory
//	                        (the "Primary working directory" its system
//	                        prompt names) unless absolute
//
// The client's next call carries the tool's result, not the directive: the
// stub answers it with text and the turn ends.
package stubmodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Request is one recorded request.
type Request struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte
	At                     time.Time
}

// Server is the stub upstream. The zero value is not usable; call New.
type Server struct {
	mu   sync.Mutex
	reqs []Request
	// Reply computes the assistant text from the last user message.
	Reply func(lastUser string) string
	// EventDelay is slept between SSE events (to test streaming).
	EventDelay time.Duration
	// Status, when non-zero, is returned instead of a normal answer.
	Status int
	// Record turns request recording off when false (benchmarks).
	Record bool
	// calls, in, out: the usage reported in replies (Reported); cached:
	// the cached input tokens among in (OpenAI Responses only)
	calls, in, out, cached int64
}

// New returns a recording stub.
func New() *Server {
	return &Server{Record: true, Reply: func(u string) string {
		u = strings.TrimSpace(u)
		if len(u) > 120 {
			u = u[:120]
		}
		return "stub answer to: " + u
	}}
}

// Requests returns a copy of what was received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Reported is the usage the stub has reported in its replies so far:
// calls answered with a usage, input and output tokens.
func (s *Server) Reported() (calls, in, out int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, s.in, s.out
}

// ReportedCached is the cached input tokens the stub has reported (OpenAI
// Responses counts them inside input_tokens).
func (s *Server) ReportedCached() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cached
}

func (s *Server) reportCached(in, cached, out int64) {
	s.mu.Lock()
	s.calls, s.in, s.out, s.cached = s.calls+1, s.in+in, s.out+out, s.cached+cached
	s.mu.Unlock()
}

func (s *Server) report(in, out int64) {
	s.mu.Lock()
	s.calls, s.in, s.out = s.calls+1, s.in+in, s.out+out
	s.mu.Unlock()
}

// Reset forgets recorded requests.
func (s *Server) Reset() {
	s.mu.Lock()
	s.reqs = nil
	s.mu.Unlock()
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type request struct {
	Model    string    `json:"model"`
	Messages []message `json:"messages"`
	Stream   bool      `json:"stream"`
}

func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) == nil {
		// the real client puts reminders first and the prompt last
		for i := len(blocks) - 1; i >= 0; i-- {
			if blocks[i].Type == "text" {
				return blocks[i].Text
			}
		}
	}
	return ""
}

func writeError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": kind, "message": msg}})
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if s.Record {
		s.mu.Lock()
		s.reqs = append(s.reqs, Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body, At: time.Now()})
		s.mu.Unlock()
	}
	if s.Status != 0 && strings.HasPrefix(r.URL.Path, "/v1beta/") {
		writeGeminiError(w, s.Status, "INTERNAL", "stub configured to fail")
		return
	}
	if s.Status != 0 {
		writeError(w, s.Status, "api_error", "stub configured to fail")
		return
	}
	if strings.HasPrefix(r.URL.Path, "/v1beta/") {
		s.serveGemini(w, r, body)
		return
	}
	switch {
	case r.URL.Path == "/api/hello":
		w.WriteHeader(http.StatusOK)
	case r.URL.Path == "/v1/messages/count_tokens" && r.Method == http.MethodPost:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]int{"input_tokens": len(body)/4 + 1})
	case r.URL.Path == "/v1/responses" && r.Method == http.MethodPost:
		s.serveResponses(w, body)
	case r.URL.Path == "/v1/messages" && r.Method == http.MethodPost:
		var req request
		if err := json.Unmarshal(body, &req); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "body is not JSON: "+err.Error())
			return
		}
		last := ""
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if req.Messages[i].Role == "user" {
				last = textOf(req.Messages[i].Content)
				break
			}
		}
		if req.Model == "" {
			req.Model = "stub-model"
		}
		if tool := toolDirective(last, body); tool != nil {
			s.report(int64(len(body)/4), 10)
			if req.Stream {
				s.streamTool(w, req.Model, tool)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{
				"id": "msg_stub", "type": "message", "role": "assistant", "model": req.Model,
				"content":     []any{map[string]any{"type": "tool_use", "id": tool.id, "name": tool.name, "input": tool.input}},
				"stop_reason": "tool_use", "stop_sequence": nil,
				"usage": map[string]int{"input_tokens": len(body) / 4, "output_tokens": 10},
			})
			return
		}
		reply := s.Reply(last)
		if req.Stream {
			s.stream(w, req.Model, reply)
			return
		}
		s.report(int64(len(body)/4), int64(len(reply)/4))
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "msg_stub", "type": "message", "role": "assistant", "model": req.Model,
			"content":     []map[string]string{{"type": "text", "text": reply}},
			"stop_reason": "end_turn", "stop_sequence": nil,
			"usage": map[string]int{"input_tokens": len(body) / 4, "output_tokens": len(reply) / 4},
		})
	default:
		writeError(w, http.StatusNotFound, "not_found_error", "no route "+r.Method+" "+r.URL.Path+" on the stub upstream")
	}
}

// stream writes the reply as the provider's SSE event sequence, one text
// delta per word, flushing each event.
func (s *Server) stream(w http.ResponseWriter, model, reply string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(event string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if fl != nil {
			fl.Flush()
		}
		if s.EventDelay > 0 {
			time.Sleep(s.EventDelay)
		}
	}
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_stub", "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": 10, "output_tokens": 1}}})
	send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]string{"type": "text", "text": ""}})
	words := strings.SplitAfter(reply, " ")
	s.report(10, int64(len(words)))
	for _, wd := range words {
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "text_delta", "text": wd}})
	}
	send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": map[string]int{"output_tokens": len(words)}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// toolUse is a tool call the stub answers with.
type toolUse struct {
	id, name string
	input    map[string]string
}

// toolDirective is the tool call a @stub-write directive in the last user
// message asks for (nil: none). The path is joined to the working
// directory the client's system prompt names.
func toolDirective(last string, body []byte) *toolUse {
	for _, line := range strings.Split(last, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "@stub-write ")
		if !ok {
			continue
		}
		path, text, _ := strings.Cut(strings.TrimSpace(rest), " ")
		if !strings.HasPrefix(path, "/") {
			if m := workingDir.FindSubmatch(body); m != nil {
				path = strings.TrimRight(string(m[1]), "/") + "/" + path
			}
		}
		return &toolUse{id: "toolu_stub_write", name: "Write", input: map[string]string{"file_path": path, "content": strings.ReplaceAll(text, `\n`, "\n")}}
	}
	return nil
}

// workingDir finds the working directory in the real client's system
// prompt ("Primary working directory: /path", JSON-escaped in the body).
var workingDir = regexp.MustCompile(`Primary working directory: ([^\s\\"]+)`)

// streamTool writes a tool call as the provider's SSE event sequence: the
// tool_use block's start, its input as one input_json_delta, its stop.
func (s *Server) streamTool(w http.ResponseWriter, model string, t *toolUse) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(event string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if fl != nil {
			fl.Flush()
		}
	}
	input, _ := json.Marshal(t.input)
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_stub", "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": 10, "output_tokens": 1}}})
	send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": t.id, "name": t.name, "input": map[string]any{}}})
	send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "input_json_delta", "partial_json": string(input)}})
	send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "tool_use", "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 10}})
	send("message_stop", map[string]any{"type": "message_stop"})
}
