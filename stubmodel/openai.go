package stubmodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// OpenAI Responses (POST /v1/responses), as the codex CLI calls it: a JSON
// body with "input" items and "stream": true; the answer is the event
// sequence codex reads (response.created, the message item, text deltas,
// response.completed carrying the usage). Errors are OpenAI's shape.

// responsesRequest is the part of a Responses body the stub reads.
type responsesRequest struct {
	Model  string          `json:"model"`
	Input  json.RawMessage `json:"input"`
	Stream bool            `json:"stream"`
}

// lastUserText is the text of the last user message among the input items
// (a plain string input is the message itself).
func lastUserText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var items []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &items) != nil {
		return ""
	}
	for i := len(items) - 1; i >= 0; i-- {
		it := items[i]
		if it.Role != "user" || (it.Type != "" && it.Type != "message") {
			continue
		}
		if json.Unmarshal(it.Content, &s) == nil {
			return s
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(it.Content, &parts) != nil {
			continue
		}
		for j := len(parts) - 1; j >= 0; j-- {
			if parts[j].Type == "input_text" && !strings.HasPrefix(strings.TrimSpace(parts[j].Text), "<") {
				return parts[j].Text // codex's own context blocks (<environment_context>, ...) are not the prompt
			}
		}
	}
	return ""
}

// writeOpenAIError answers in OpenAI's error shape.
func writeOpenAIError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": kind, "param": nil, "code": nil}})
}

// serveResponses answers POST /v1/responses.
func (s *Server) serveResponses(w http.ResponseWriter, body []byte) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "body is not JSON: "+err.Error())
		return
	}
	if req.Model == "" {
		req.Model = "stub-model"
	}
	reply := s.Reply(lastUserText(req.Input))
	// usage as OpenAI reports it: input_tokens include the cached ones
	in := int64(len(body)/4 + 1)
	cached := in / 2
	out := int64(len(strings.SplitAfter(reply, " ")))
	s.reportCached(in, cached, out)
	usage := map[string]any{
		"input_tokens": in, "input_tokens_details": map[string]int64{"cached_tokens": cached},
		"output_tokens": out, "output_tokens_details": map[string]int64{"reasoning_tokens": 0},
		"total_tokens": in + out,
	}
	msg := map[string]any{"id": "msg_stub", "type": "message", "status": "completed", "role": "assistant",
		"content": []map[string]any{{"type": "output_text", "text": reply, "annotations": []any{}}}}
	resp := map[string]any{"id": "resp_stub", "object": "response", "created_at": time.Now().Unix(), "status": "completed",
		"model": req.Model, "output": []any{msg}, "usage": usage}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	seq := 0
	send := func(typ string, data map[string]any) {
		data["type"], data["sequence_number"] = typ, seq
		seq++
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		if fl != nil {
			fl.Flush()
		}
		if s.EventDelay > 0 {
			time.Sleep(s.EventDelay)
		}
	}
	started := map[string]any{"id": "resp_stub", "object": "response", "created_at": resp["created_at"], "status": "in_progress",
		"model": req.Model, "output": []any{}, "usage": nil}
	send("response.created", map[string]any{"response": started})
	send("response.in_progress", map[string]any{"response": started})
	send("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{
		"id": "msg_stub", "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}})
	send("response.content_part.added", map[string]any{"item_id": "msg_stub", "output_index": 0, "content_index": 0,
		"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
	for _, wd := range strings.SplitAfter(reply, " ") {
		send("response.output_text.delta", map[string]any{"item_id": "msg_stub", "output_index": 0, "content_index": 0, "delta": wd})
	}
	send("response.output_text.done", map[string]any{"item_id": "msg_stub", "output_index": 0, "content_index": 0, "text": reply})
	send("response.content_part.done", map[string]any{"item_id": "msg_stub", "output_index": 0, "content_index": 0,
		"part": map[string]any{"type": "output_text", "text": reply, "annotations": []any{}}})
	send("response.output_item.done", map[string]any{"output_index": 0, "item": msg})
	send("response.completed", map[string]any{"response": resp})
}
