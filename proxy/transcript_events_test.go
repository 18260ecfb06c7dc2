package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	sse "github.com/tmaxmax/go-sse"

	"lazy/api"
	"lazy/config"
)

// eventsFixture is a proxy whose OpenAI and Gemini upstreams serve upstream,
// with both real keys, whose Transcript answer is want (asked counts).
func eventsFixture(t *testing.T, upstream http.Handler, want func() Transcript) (*fixture, *atomic.Int64) {
	t.Helper()
	up, up2 := httptest.NewServer(upstream), httptest.NewServer(upstream) // one origin per credential
	t.Cleanup(up.Close)
	t.Cleanup(up2.Close)
	cfg := config.Defaults()
	cfg.Agent.Runner = config.RunnerProcess
	cfg.Proxy.OpenAI = config.Upstream{Upstream: up.URL, Credential: config.CredentialProvider}
	cfg.Proxy.Gemini = config.Upstream{Upstream: up2.URL, Credential: config.CredentialProvider}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, home: t.TempDir(), grants: &atomic.Pointer[Grants]{}}
	f.grants.Store(&Grants{})
	var asked atomic.Int64
	p, err := New(Options{Config: &cfg, Home: f.home, Grants: f.grants, Transcript: func(taskID, ref string) Transcript {
		asked.Add(1)
		return want()
	}})
	if err != nil {
		t.Fatal(err)
	}
	f.p = p
	f.srv = httptest.NewServer(p)
	t.Cleanup(f.srv.Close)
	f.writeCred("openai", realOpenAI+"\n")
	f.writeCred("gemini", realGeminiKey+"\n")
	return f, &asked
}

// sseWriter writes server-sent events, each flushed.
func sseWriter(w http.ResponseWriter) func(event string, v any) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	return func(event string, v any) {
		b, _ := json.Marshal(v)
		if event != "" {
			fmt.Fprintf(w, "event: %s\n", event)
		}
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
}

// checkMasked: the text is want with each secret starred, one tool call
// name with an input starting inputPrefix and no real key, usage, one end.
func checkMasked(t *testing.T, rec *recorded, want, tool, inputPrefix string, usage api.CallUsage) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	got := rec.text.String()
	t.Logf("transcript text: %q; tools %q; usage %+v; ended %d", got, rec.tools, rec.usage, rec.ended)
	if got != want {
		t.Errorf("text %q\nwant %q", got, want)
	}
	if len(rec.tools) != 1 || !strings.HasPrefix(rec.tools[0], tool+" "+inputPrefix) || strings.Contains(rec.tools[0], "REAL") {
		t.Errorf("tools %q, want one %s %s…", rec.tools, tool, inputPrefix)
	}
	if rec.usage == nil || *rec.usage != usage || rec.ended != 1 {
		t.Errorf("usage %+v (want %+v), ended %d", rec.usage, usage, rec.ended)
	}
}

// TestTranscriptFromResponsesStream: an OpenAI Responses stream's text
// deltas reach the Transcript with the real key and the task's placeholder
// masked, each split across two deltas; a function call announced by
// output_item.added, its arguments in deltas (the key split again), comes
// once (at .done, not again at output_item.done); the usage of
// response.completed and the end follow.
func TestTranscriptFromResponsesStream(t *testing.T) {
	rec := &recorded{}
	var ph string
	f, asked := eventsFixture(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		send := sseWriter(w)
		send("response.created", map[string]any{"type": "response.created", "response": map[string]any{"usage": nil}})
		send("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": map[string]any{"type": "message", "role": "assistant"}})
		for _, p := range []string{"Hello ", "the key is " + realOpenAI[:12], realOpenAI[12:] + " and ", "mine is " + ph[:11], ph[11:] + ". Done."} {
			send("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": p})
		}
		send("response.output_text.done", map[string]any{"type": "response.output_text.done", "output_index": 0, "text": "(whole text, not repeated)"})
		args := `{"cmd":"echo ` + realOpenAI + `"}`
		send("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 1, "item": map[string]any{"type": "function_call", "name": "shell", "arguments": "", "call_id": "c1"}})
		send("response.function_call_arguments.delta", map[string]any{"type": "response.function_call_arguments.delta", "output_index": 1, "delta": args[:15]})
		send("response.function_call_arguments.delta", map[string]any{"type": "response.function_call_arguments.delta", "output_index": 1, "delta": args[15:]})
		send("response.function_call_arguments.done", map[string]any{"type": "response.function_call_arguments.done", "output_index": 1, "arguments": args})
		send("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 1, "item": map[string]any{"type": "function_call", "name": "shell", "arguments": args}})
		send("response.completed", map[string]any{"type": "response.completed", "response": map[string]any{"usage": map[string]any{"input_tokens": 30, "input_tokens_details": map[string]int{"cached_tokens": 10}, "output_tokens": 7}}})
	}), func() Transcript { return rec })
	ph = NewPlaceholder(KindOpenAI, realOpenAI)
	f.grant(ph, "", "tx", "OPENAI_API_KEY")
	resp := f.do("POST", OpenAIRoute, map[string]string{"Authorization": "Bearer " + ph}, responsesBody)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Contains(string(body), realOpenAI) {
		t.Fatalf("status %d (or the real key reached the client): %s", resp.StatusCode, body)
	}
	want := "Hello the key is " + strings.Repeat("*", len(realOpenAI)) + " and mine is " + strings.Repeat("*", len(ph)) + ". Done."
	checkMasked(t, rec, want, "shell", `{"cmd":"echo *`, api.CallUsage{InputTokens: 20, CacheReadInputTokens: 10, OutputTokens: 7})
	if asked.Load() != 1 {
		t.Errorf("asked %d", asked.Load())
	}
}

// TestTranscriptFromResponsesJSON: a whole JSON Responses reply is read at
// its end (its message text and its function call); a call whose
// Transcript answer is nil is not read, and its reply is the same.
func TestTranscriptFromResponsesJSON(t *testing.T) {
	rec := &recorded{}
	on := true
	f, asked := eventsFixture(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"r","output":[{"type":"reasoning","summary":[]},{"type":"message","content":[{"type":"output_text","text":"the answer"}]},{"type":"function_call","name":"apply_patch","arguments":"{\"p\":1}"}],"usage":{"input_tokens":5,"output_tokens":2}}`)
	}), func() Transcript {
		if on {
			return rec
		}
		return nil
	})
	ph := NewPlaceholder(KindOpenAI, realOpenAI)
	f.grant(ph, "", "tj", "OPENAI_API_KEY")
	read := func() string {
		resp := f.do("POST", OpenAIRoute, map[string]string{"Authorization": "Bearer " + ph}, responsesBody)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(b)
	}
	first := read()
	on = false
	if second := read(); first != second {
		t.Errorf("replies differ:\n%s\n%s", first, second)
	}
	checkMasked(t, rec, "the answer", "apply_patch", `{"p":1}`, api.CallUsage{InputTokens: 5, OutputTokens: 2})
	if asked.Load() != 2 {
		t.Errorf("asked %d", asked.Load())
	}
}

// TestTranscriptFromGeminiStream: a Gemini SSE stream's text parts reach
// the Transcript masked (the real key and the placeholder each split
// across two chunks); a thought is left out; a functionCall part is a tool
// call with its args; the last chunk's usageMetadata and the end follow.
// generateContent's JSON reply is read whole; countTokens asks for none.
func TestTranscriptFromGeminiStream(t *testing.T) {
	var rec *recorded
	var ph string
	usage := map[string]any{"promptTokenCount": 40, "cachedContentTokenCount": 15, "candidatesTokenCount": 6, "thoughtsTokenCount": 2}
	chunk := func(parts ...map[string]any) map[string]any {
		return map[string]any{"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}}}
	}
	text := func(s string) map[string]any { return map[string]any{"text": s} }
	f, asked := eventsFixture(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ":countTokens") {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"totalTokens":3}`)
			return
		}
		if strings.HasSuffix(r.URL.Path, ":generateContent") {
			w.Header().Set("Content-Type", "application/json")
			m := chunk(text("whole "), map[string]any{"functionCall": map[string]any{"name": "read_file", "args": map[string]string{"path": "a.go"}}})
			m["usageMetadata"] = map[string]any{"promptTokenCount": 4, "candidatesTokenCount": 1}
			_ = json.NewEncoder(w).Encode(m)
			return
		}
		send := sseWriter(w)
		send("", chunk(map[string]any{"text": "thinking about " + realGeminiKey, "thought": true}))
		for _, p := range []string{"Hello ", "the key is " + realGeminiKey[:10], realGeminiKey[10:] + " and ", "mine is " + ph[:12], ph[12:] + ". Done."} {
			send("", chunk(text(p)))
		}
		send("", chunk(map[string]any{"functionCall": map[string]any{"name": "write_file", "args": map[string]string{"file_path": "b.go", "content": realGeminiKey}}}))
		last := chunk(text(""))
		last["usageMetadata"] = usage
		send("", last)
	}), func() Transcript { return rec })
	call := func(method string) string {
		// a fresh grant each call: a whole real key in a reply trips the
		// wire, which revokes the grant
		ph = NewPlaceholder(KindGemini, "")
		f.grant(ph, "", "tg", "GEMINI_API_KEY")
		rec = &recorded{}
		resp := f.do("POST", "/v1beta/models/gemini-2.5-flash:"+method, map[string]string{"x-goog-api-key": ph}, geminiBody)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.Contains(string(body), realGeminiKey) {
			t.Fatalf("%s: status %d (or the real key reached the client): %s", method, resp.StatusCode, body)
		}
		return string(body)
	}
	call("streamGenerateContent?alt=sse")
	want := "Hello the key is " + strings.Repeat("*", len(realGeminiKey)) + " and mine is " + strings.Repeat("*", len(ph)) + ". Done."
	checkMasked(t, rec, want, "write_file", `{"content":"*`, api.CallUsage{InputTokens: 25, CacheReadInputTokens: 15, OutputTokens: 8})
	call("generateContent")
	checkMasked(t, rec, "whole ", "read_file", `{"path":"a.go"}`, api.CallUsage{InputTokens: 4, OutputTokens: 1})
	call("countTokens")
	if asked.Load() != 2 {
		t.Errorf("asked %d, want 2 (countTokens carries no transcript)", asked.Load())
	}
}

// fuzzEvents feeds b to an event parser the way its route's reader does
// (SSE events decoded by go-sse, or a whole reply) and checks the
// Transcript is told sane things: bounded tool input, nothing after End.
func fuzzEvents(t *testing.T, mk func(Transcript) EventParser, b []byte, stream bool) {
	rec := &recorded{}
	p := mk(rec)
	if stream {
		for ev, err := range sse.Read(bytes.NewReader(b), &sse.ReadConfig{MaxEventSize: 1 << 20}) {
			if err != nil {
				break
			}
			p.Event([]byte(ev.Data))
		}
	} else {
		p.Whole(b)
	}
	p.End()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.text.Len() > len(b) {
		t.Fatalf("more text (%d) than input (%d)", rec.text.Len(), len(b))
	}
	for _, tc := range rec.tools {
		if len(tc) > len(b)+api.MaxToolInput+1 {
			t.Fatalf("tool call of %d bytes from %d", len(tc), len(b))
		}
	}
}

// FuzzResponsesTranscript: whatever a Responses reply holds, its parser
// never panics, and hands on no more than it was given.
func FuzzResponsesTranscript(f *testing.F) {
	f.Add([]byte("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n"), true)
	f.Add([]byte("data: {\"type\":\"response.output_item.added\",\"output_index\":2,\"item\":{\"type\":\"function_call\",\"name\":\"x\"}}\n\ndata: {\"type\":\"response.function_call_arguments.delta\",\"output_index\":2,\"delta\":\"{\\\"a\"}\n\n"), true)
	f.Add([]byte("data: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"local_shell_call\",\"action\":{\"command\":[\"ls\"]}}}\n\n"), true)
	f.Add([]byte(`{"output":[{"type":"message","content":[{"type":"output_text","text":"t"}]},{"type":"custom_tool_call","name":"p","input":"x"}]}`), false)
	f.Fuzz(func(t *testing.T, b []byte, stream bool) { fuzzEvents(t, newResponsesParser, b, stream) })
}

// FuzzGeminiTranscript: whatever a Gemini reply holds, its parser never
// panics, and hands on no more than it was given.
func FuzzGeminiTranscript(f *testing.F) {
	f.Add([]byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"hi\"}]}}]}\r\n\r\n"), true)
	f.Add([]byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":{\"a\":1}}}]}}]}\n\n"), true)
	f.Add([]byte(`{"candidates":[{"content":{"parts":[{"text":"t","thought":true},{"text":"u"}]}}],"usageMetadata":{}}`), false)
	f.Fuzz(func(t *testing.T, b []byte, stream bool) { fuzzEvents(t, newGeminiParser, b, stream) })
}

// eventsBoth hands each event to the Responses parser with and without
// its fast way to the deltas and returns what each told.
func eventsBoth(events ...[]byte) (fast, slow []string) {
	var f, s told
	pf := newResponsesParser(&f).(*responsesParser)
	ps := newResponsesParser(&s).(*responsesParser)
	ps.slow = true
	for _, p := range []*responsesParser{pf, ps} {
		for _, e := range events {
			p.Event(e)
		}
		p.End()
	}
	return f.calls, s.calls
}

// The API's delta events take the fast way and tell what encoding/json
// reads of them.
func TestFastResponsesDelta(t *testing.T) {
	added := []byte(`{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","name":"shell","arguments":""}}`)
	lines := [][]byte{
		[]byte(`{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi \"there\"\n\u00e9","logprobs":[],"obfuscation":"Xy1"}`),
		[]byte(`{"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 1, "delta": "{\"cmd\":", "sequence_number": 7}`),
		[]byte(`{"type":"response.function_call_arguments.delta","output_index":1,"delta":"\"ls\"}"}`),
		[]byte(`{"type":"response.output_text.delta","output_index":0,"delta":""}`),
	}
	for _, l := range lines {
		if _, _, _, ok := fastResponsesDelta(l); !ok {
			t.Errorf("%s: not read the fast way", l)
		}
	}
	done := []byte(`{"type":"response.function_call_arguments.done","output_index":1}`)
	fast, slow := eventsBoth(append([][]byte{added}, append(lines, done)...)...)
	if fmt.Sprint(fast) != fmt.Sprint(slow) || len(fast) != 2 || fast[0] != "text Hi \"there\"\né" || fast[1] != `tool shell {"cmd":"ls"}` {
		t.Errorf("fast %q\nslow %q", fast, slow)
	}
}

// FuzzFastResponsesDelta: any event, after a tool call's announcement,
// tells the transcript what encoding/json's reading tells it.
func FuzzFastResponsesDelta(f *testing.F) {
	for _, s := range []string{
		`{"type":"response.output_text.delta","output_index":0,"delta":"hi","logprobs":[{"a":[1,2.5e3,null,true]}]}`,
		`{"type":"response.function_call_arguments.delta","output_index":1,"delta":"{\"a\":"}`,
		`{"type":"response.output_text.delta","output_index":0,"delta":"a","Delta":"b"}`,
		`{"type":"response.output_text.delta","output_index":0,"delta":"a","delta":"b"}`,
		`{"type":"response.output_text.delta","output_index":1.0,"delta":"f"}`,
		`{"type":"response.output_text.delta","output_index":0,"delta":"x","arguments":5}`,
		`{"type":"response.output_text.delta","output_index":0,"delta":null}`,
		`{"type":"response.output_text.delta",,"delta":"x"}`,
		`{"type":"response.output_text.delta","delta":"x"} trailing`,
		"{\"type\":\"response.output_text.delta\",\"delta\":\"\xff\"}",
	} {
		f.Add(s)
	}
	added := []byte(`{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","name":"shell"}}`)
	done := []byte(`{"type":"response.function_call_arguments.done","output_index":1}`)
	f.Fuzz(func(t *testing.T, event string) {
		fast, slow := eventsBoth(added, []byte(event), done)
		if fmt.Sprint(fast) != fmt.Sprint(slow) {
			t.Fatalf("%q:\nfast %q\nslow %q", event, fast, slow)
		}
	})
}

// BenchmarkResponsesDeltaFast and ...Slow: one text delta as the API
// writes it, read for the transcript with and without fastResponsesDelta.
func BenchmarkResponsesDeltaFast(b *testing.B) { benchResponsesDelta(b, false) }
func BenchmarkResponsesDeltaSlow(b *testing.B) { benchResponsesDelta(b, true) }

func benchResponsesDelta(b *testing.B, slow bool) {
	ev := []byte(`{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_68b0a1c2d3e4f5","output_index":0,"content_index":0,"delta":" the","logprobs":[],"obfuscation":"Xy1zQ"}`)
	p := newResponsesParser(nopTranscript{}).(*responsesParser)
	p.slow = slow
	b.ReportAllocs()
	for b.Loop() {
		p.Event(ev)
	}
}

// BenchmarkAnthropicDeltaFast and ...Slow: the same for a
// content_block_delta (fastDelta).
func BenchmarkAnthropicDeltaFast(b *testing.B) { benchAnthropicDelta(b, false) }
func BenchmarkAnthropicDeltaSlow(b *testing.B) { benchAnthropicDelta(b, true) }

func benchAnthropicDelta(b *testing.B, slow bool) {
	ev := []byte("data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" the\"}}\n\n")
	p := newAnthropicParser("text/event-stream", nopTranscript{}).(*anthropicParser)
	p.slow = slow
	b.ReportAllocs()
	for b.Loop() {
		p.Feed(ev)
	}
}

// A value nested past the reader's depth is left to encoding/json, which
// reads it (up to its own bound) or refuses it.
func TestFastResponsesDeltaDeep(t *testing.T) {
	for _, depth := range []int{maxLiteDepth - 2, maxLiteDepth + 1, 20000} {
		ev := []byte(`{"type":"response.output_text.delta","delta":"x","n":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`)
		_, _, _, ok := fastResponsesDelta(ev)
		if ok != (depth < maxLiteDepth) {
			t.Errorf("depth %d: read the fast way %v", depth, ok)
		}
		fast, slow := eventsBoth(ev)
		if fmt.Sprint(fast) != fmt.Sprint(slow) {
			t.Errorf("depth %d: fast %q slow %q", depth, fast, slow)
		}
	}
}

// geminiBoth hands a response to the Gemini parser with and without its
// fast way and returns what each told.
func geminiBoth(response []byte) (fast, slow []string) {
	var f, s told
	pf := newGeminiParser(&f).(*geminiParser)
	ps := newGeminiParser(&s).(*geminiParser)
	ps.slow = true
	pf.Event(response)
	ps.Event(response)
	return f.calls, s.calls
}

// A streamed response as the API writes it takes the fast way and tells
// what encoding/json reads of it.
func TestFastGeminiParts(t *testing.T) {
	for _, r := range []string{
		`{"candidates": [{"content": {"parts": [{"text": "Hello \"w\"\n"}],"role": "model"},"index": 0,"safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT","probability": "NEGLIGIBLE"}]}],"usageMetadata": {"promptTokenCount": 8,"candidatesTokenCount": 3,"totalTokenCount": 11},"modelVersion": "gemini-2.5-pro","responseId": "abc"}`,
		`{"candidates":[{"content":{"parts":[{"thought":true,"text":"hmm"},{"functionCall":{"name":"run_shell_command","args":{"command":"ls -la","n":[1,2.5e-3,null]}}}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":8}}`,
		`{"candidates":[{"content":{"parts":[{"text":"first"}]}},{"content":{"parts":[{"text":"second"}]}}]}`,
	} {
		if _, ok := fastGeminiParts([]byte(r)); !ok {
			t.Errorf("%s: not read the fast way", r)
		}
		fast, slow := geminiBoth([]byte(r))
		if fmt.Sprint(fast) != fmt.Sprint(slow) || len(fast) == 0 {
			t.Errorf("%s:\nfast %q\nslow %q", r, fast, slow)
		}
	}
}

// FuzzFastGeminiParts: any response tells the transcript what
// encoding/json's reading tells it.
func FuzzFastGeminiParts(f *testing.F) {
	for _, s := range []string{
		`{"candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":8}}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"a":[1,{"b":null}]}}}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":null}}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a","Text":"b"}]}}]}`,
		`{"Candidates":[{"content":{"parts":[{"text":"a"}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"Candidates":[{"content":{"parts":[{"text":"b"}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"}]},"Content":{"parts":[{"text":"b"}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"}],"PARTS":[{"text":"b"}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"}]}},{"content":{"parts":[{"text":5}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"thought":"yes","text":"a"}]}}]}`,
		`{"candidates":[null,{"content":{"parts":[{"text":"a"}]}}]}`,
		`{"candidates":[{"content":{"parts":[null,{"text":"a"}]}}]}`,
		`{"candidates":[]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"}]}}]} x`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, response string) {
		fast, slow := geminiBoth([]byte(response))
		if fmt.Sprint(fast) != fmt.Sprint(slow) {
			t.Fatalf("%q:\nfast %q\nslow %q", response, fast, slow)
		}
	})
}

// BenchmarkGeminiPartsFast and ...Slow: one streamed response as the API
// writes it, read for the transcript with and without fastGeminiParts.
func BenchmarkGeminiPartsFast(b *testing.B) { benchGeminiParts(b, false) }
func BenchmarkGeminiPartsSlow(b *testing.B) { benchGeminiParts(b, true) }

func benchGeminiParts(b *testing.B, slow bool) {
	ev := []byte(`{"candidates": [{"content": {"parts": [{"text": " the"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 812,"candidatesTokenCount": 41,"totalTokenCount": 853,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 812}]},"modelVersion": "gemini-2.5-pro","responseId": "mmWpaOTbMbvMz7IPsJ7W-Qg"}`)
	p := newGeminiParser(nopTranscript{}).(*geminiParser)
	p.slow = slow
	b.ReportAllocs()
	for b.Loop() {
		p.Event(ev)
	}
}
