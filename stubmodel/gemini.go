package stubmodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The Gemini protocol (the generativelanguage API the gemini CLI speaks
// with an API key): POST /v1beta/models/<model>:generateContent answers one
// JSON GenerateContentResponse, :streamGenerateContent?alt=sse the same
// response in SSE chunks ("data: {...}" then a blank line), and
// :countTokens {"totalTokens": n}. Every answer carries usageMetadata, the
// last chunk of a stream the totals.

// geminiPart is one part of a content.
type geminiPart struct {
	Text             string          `json:"text,omitempty"`
	FunctionCall     any             `json:"functionCall,omitempty"`
	FunctionResponse json.RawMessage `json:"functionResponse,omitempty"`
}

type geminiRequest struct {
	Contents []struct {
		Role  string       `json:"role"`
		Parts []geminiPart `json:"parts"`
	} `json:"contents"`
	GenerationConfig struct {
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
	} `json:"generationConfig"`
}

// geminiRoute splits /v1beta/models/<model>:<method>.
func geminiRoute(path string) (model, method string, ok bool) {
	rest, found := strings.CutPrefix(path, "/v1beta/models/")
	if !found {
		return "", "", false
	}
	model, method, ok = strings.Cut(rest, ":")
	return model, method, ok && model != "" && !strings.Contains(model, "/")
}

// writeGeminiError answers in Google's error shape.
func writeGeminiError(w http.ResponseWriter, status int, grpcStatus, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": status, "message": msg, "status": grpcStatus}})
}

// serveGemini answers one Gemini route; body is the request's.
func (s *Server) serveGemini(w http.ResponseWriter, r *http.Request, body []byte) {
	model, method, ok := geminiRoute(r.URL.Path)
	if !ok || r.Method != http.MethodPost {
		writeGeminiError(w, http.StatusNotFound, "NOT_FOUND", "no route "+r.Method+" "+r.URL.Path+" on the stub upstream")
		return
	}
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeGeminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "body is not JSON: "+err.Error())
		return
	}
	if method == "countTokens" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]int{"totalTokens": len(body)/4 + 1})
		return
	}
	if method != "generateContent" && method != "streamGenerateContent" {
		writeGeminiError(w, http.StatusNotFound, "NOT_FOUND", "no method "+method+" on the stub upstream")
		return
	}
	last := ""
	for i := len(req.Contents) - 1; i >= 0 && last == ""; i-- {
		if req.Contents[i].Role != "user" {
			continue
		}
		for _, p := range req.Contents[i].Parts {
			if p.Text != "" {
				last = p.Text // the last text part: the prompt after any context
			}
		}
	}
	answered := false // the last content carries a tool's result: the directive is done
	if n := len(req.Contents); n > 0 {
		for _, p := range req.Contents[n-1].Parts {
			answered = answered || len(p.FunctionResponse) > 0
		}
	}
	var reply string
	var call *toolUse
	if req.GenerationConfig.ResponseMimeType != "application/json" && !answered {
		// @stub-write: a write_file call, its path as given (gemini
		// resolves a relative one against its working directory)
		if t := toolDirective(last, nil); t != nil {
			call = &toolUse{name: "write_file", input: t.input}
		}
	}
	if call != nil {
		reply = "Writing it now."
	} else if req.GenerationConfig.ResponseMimeType == "application/json" {
		// the client's own side questions (which model to route to, whether
		// the model should speak next) want JSON of a schema: the smallest
		// value of it
		schema := req.GenerationConfig.ResponseJSONSchema
		if len(schema) == 0 {
			schema = req.GenerationConfig.ResponseSchema
		}
		b, _ := json.Marshal(fromSchema(schema, 0))
		reply = string(b)
	} else {
		reply = s.Reply(last)
	}
	in, out := int64(len(body)/4), int64(len(reply)/4+1)
	s.report(in, out)
	usage := map[string]any{"promptTokenCount": in, "candidatesTokenCount": out, "totalTokenCount": in + out}
	resp := func(text string, final bool) map[string]any {
		parts := []geminiPart{{Text: text}}
		if final && call != nil {
			parts = append(parts, geminiPart{FunctionCall: map[string]any{"name": call.name, "args": call.input}})
		}
		c := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		m := map[string]any{"candidates": []any{c}, "modelVersion": model, "responseId": "stub"}
		if final {
			c["finishReason"] = "STOP"
			m["usageMetadata"] = usage
		} else {
			m["usageMetadata"] = map[string]any{"promptTokenCount": in, "totalTokenCount": in}
		}
		return m
	}
	if method == "generateContent" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp(reply, true))
		return
	}
	if r.URL.Query().Get("alt") != "sse" {
		// without alt=sse the stream is one JSON array of the chunks
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode([]any{resp(reply, true)})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	words := strings.SplitAfter(reply, " ")
	for i, wd := range words {
		b, _ := json.Marshal(resp(wd, i == len(words)-1))
		fmt.Fprintf(w, "data: %s\r\n\r\n", b)
		if fl != nil {
			fl.Flush()
		}
		if s.EventDelay > 0 {
			time.Sleep(s.EventDelay)
		}
	}
}

// fromSchema is the smallest value of an OpenAPI-style schema (the type
// names upper or lower case): each required property of an object, the
// first of an enum, "stub" for a string, 1 for a number.
func fromSchema(raw json.RawMessage, depth int) any {
	var sc struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
		Enum       []any                      `json:"enum"`
		Items      json.RawMessage            `json:"items"`
	}
	if depth > 8 || json.Unmarshal(raw, &sc) != nil {
		return nil
	}
	if len(sc.Enum) > 0 {
		return sc.Enum[0]
	}
	switch strings.ToLower(sc.Type) {
	case "object":
		o := map[string]any{}
		for _, k := range sc.Required {
			o[k] = fromSchema(sc.Properties[k], depth+1)
		}
		return o
	case "array":
		return []any{}
	case "integer", "number":
		return 1
	case "boolean":
		return false
	case "string":
		return "stub"
	}
	return nil
}
