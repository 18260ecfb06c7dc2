package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf16"

	"lazy/api"
)

// recorded is a Transcript that keeps what it was told.
type recorded struct {
	mu    sync.Mutex
	text  strings.Builder
	tools []string
	usage *api.CallUsage
	ended int
}

func (r *recorded) OnText(s string) { r.mu.Lock(); r.text.WriteString(s); r.mu.Unlock() }
func (r *recorded) OnToolCall(name, input string) {
	r.mu.Lock()
	r.tools = append(r.tools, name+" "+input)
	r.mu.Unlock()
}
func (r *recorded) OnUsage(u api.CallUsage) { r.mu.Lock(); r.usage = &u; r.mu.Unlock() }
func (r *recorded) End()                    { r.mu.Lock(); r.ended++; r.mu.Unlock() }

// transcriptFixture is a proxy over upstream whose Transcript answer is
// want (asked counts the calls that asked).
func transcriptFixture(t *testing.T, upstream http.Handler, want func() Transcript) (*fixture, *atomic.Int64) {
	t.Helper()
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)
	cfg := cfgFor(up.URL, "provider")
	f := &fixture{t: t, home: t.TempDir(), grants: &atomic.Pointer[Grants]{}}
	g := Grants{}
	f.grants.Store(&g)
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
	f.writeCred("provider", realKey)
	return f, &asked
}

// sseUpstream streams text pieces as text_delta events, then one tool_use
// block whose input comes in two input_json_delta events.
func sseUpstream(pieces []string, tool, input1, input2 string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		send := func(v any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "event: x\ndata: %s\n\n", b)
			fl.Flush()
		}
		send(map[string]any{"type": "message_start", "message": map[string]any{"usage": map[string]int{"input_tokens": 7, "output_tokens": 1}}})
		send(map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]string{"type": "text", "text": ""}})
		for _, p := range pieces {
			send(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "text_delta", "text": p}})
		}
		send(map[string]any{"type": "content_block_stop", "index": 0})
		send(map[string]any{"type": "content_block_start", "index": 1, "content_block": map[string]any{"type": "tool_use", "id": "t1", "name": tool, "input": map[string]any{}}})
		send(map[string]any{"type": "content_block_delta", "index": 1, "delta": map[string]string{"type": "input_json_delta", "partial_json": input1}})
		send(map[string]any{"type": "content_block_delta", "index": 1, "delta": map[string]string{"type": "input_json_delta", "partial_json": input2}})
		send(map[string]any{"type": "content_block_stop", "index": 1})
		send(map[string]any{"type": "message_delta", "usage": map[string]int{"output_tokens": 12}})
		send(map[string]any{"type": "message_stop"})
	})
}

// TestTranscriptFromStream: a streamed reply's text and tool call reach the
// Transcript with the real key and the task's placeholder masked, each
// split across two text pieces (which the byte scrubber sees apart, as JSON
// strings of two events); the usage and the end follow.
func TestTranscriptFromStream(t *testing.T) {
	rec := &recorded{}
	var ph string
	pieces := func() []string {
		return []string{"Hello ", "the key is " + realKey[:10], realKey[10:] + " and ", "mine is " + ph[:9], ph[9:] + ". Done."}
	}
	var f *fixture
	f, asked := transcriptFixture(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sseUpstream(pieces(), "Write", `{"file_path":"a.go","content":"`+realKey[:5], realKey[5:]+`"}`).ServeHTTP(w, r)
	}), func() Transcript { return rec })
	hdr := f.key("tx")
	ph = hdr["x-api-key"]
	resp := f.do("POST", "/v1/messages", hdr, msgBody)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	got := rec.text.String()
	t.Logf("transcript text: %q; tools %q; usage %+v", got, rec.tools, rec.usage)
	want := "Hello the key is " + strings.Repeat("*", len(realKey)) + " and mine is " + strings.Repeat("*", len(ph)) + ". Done."
	if got != want {
		t.Errorf("text %q\nwant %q", got, want)
	}
	if len(rec.tools) != 1 || !strings.HasPrefix(rec.tools[0], `Write {"file_path":"a.go"`) || strings.Contains(rec.tools[0], "REALKEY") {
		t.Errorf("tools %q", rec.tools)
	}
	if rec.usage == nil || rec.usage.InputTokens != 7 || rec.usage.OutputTokens != 12 || rec.ended != 1 || asked.Load() != 1 {
		t.Errorf("usage %+v, ended %d, asked %d", rec.usage, rec.ended, asked.Load())
	}
	if strings.Contains(string(body), realKey) {
		t.Error("the client got the real key")
	}
}

// TestTranscriptFromJSON: a whole JSON reply is read at its end; a call
// whose Transcript answer is nil is not read at all, and its reply is the
// same.
func TestTranscriptFromJSON(t *testing.T) {
	rec := &recorded{}
	on := true
	up := newUpstream(t)
	f, asked := transcriptFixture(t, up.Server, func() Transcript {
		if on {
			return rec
		}
		return nil
	})
	hdr := f.key("tj")
	read := func() string {
		resp := f.do("POST", "/v1/messages", hdr, msgBody)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(b)
	}
	first := read()
	waitEnded(t, rec, 1)
	on = false
	second := read()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.text.String() != "stub answer to: hi" || rec.ended != 1 || asked.Load() != 2 {
		t.Errorf("text %q, ended %d, asked %d", rec.text.String(), rec.ended, asked.Load())
	}
	if first != second {
		t.Errorf("replies differ:\n%s\n%s", first, second)
	}
	// count_tokens carries no transcript: not asked
	resp := f.do("POST", "/v1/messages/count_tokens", hdr, msgBody)
	resp.Body.Close()
	if asked.Load() != 2 {
		t.Errorf("count_tokens asked for a transcript")
	}
}

// waitEnded waits until rec was ended n times: a whole reply's transcript
// is told after the reply reached the client.
func waitEnded(t *testing.T, rec *recorded, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec.mu.Lock()
		ended := rec.ended
		rec.mu.Unlock()
		if ended >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the transcript was ended %d times 5 s after the reply, want %d", ended, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// heldTranscript is a Transcript that, told anything, waits until the
// client has the whole reply (or 3 s): so it records whether it was told
// before the reply's last bytes went out.
type heldTranscript struct {
	recorded
	got   chan struct{}
	early atomic.Bool
}

func (h *heldTranscript) wait() {
	select {
	case <-h.got:
	case <-time.After(3 * time.Second):
		h.early.Store(true)
	}
}
func (h *heldTranscript) OnText(s string) { h.wait(); h.recorded.OnText(s) }
func (h *heldTranscript) End()            { h.wait(); h.recorded.End() }

// TestWholeReplyBeforeItsTranscript: a reply of one message reaches the
// agent whole before its transcript is read and told (the parse and the
// telling are the call's bookkeeping, not on the reply's way): the
// Transcript here waits for the client to have the reply, which it could
// not have if the transcript were told on the way.
func TestWholeReplyBeforeItsTranscript(t *testing.T) {
	h := &heldTranscript{got: make(chan struct{})}
	up := newUpstream(t)
	f, _ := transcriptFixture(t, up.Server, func() Transcript { return h })
	resp := f.do("POST", "/v1/messages", f.key("tw"), msgBody)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	close(h.got)
	if err != nil || resp.StatusCode != 200 || resp.ContentLength <= 0 {
		t.Fatalf("status %d, length %d, err %v: %s", resp.StatusCode, resp.ContentLength, err, b)
	}
	waitEnded(t, &h.recorded, 1)
	if h.early.Load() {
		t.Fatal("the transcript was told before the reply reached the client")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.text.String() != "stub answer to: hi" {
		t.Errorf("transcript text %q", h.text.String())
	}
}

// TestMaskClientReport: what an agent client reported of its own turn is
// masked as a call's transcript is: the real credential and the task's
// placeholders, never another task's placeholder (it is no secret of this
// task's) nor anything else.
func TestMaskClientReport(t *testing.T) {
	f, _ := transcriptFixture(t, http.NotFoundHandler(), func() Transcript { return nil })
	g := Grants{
		"sk-ant-api03-svc-TASKONE-0123456789": {Placeholder: "sk-ant-api03-svc-TASKONE-0123456789", TaskID: "t1", Role: "worker"},
		"sk-ant-api03-svc-TASKTWO-0123456789": {Placeholder: "sk-ant-api03-svc-TASKTWO-0123456789", TaskID: "t2", Role: "worker"},
	}
	f.grants.Store(&g)
	in := "env: ANTHROPIC_API_KEY=sk-ant-api03-svc-TASKONE-0123456789 key " + realKey + " other sk-ant-api03-svc-TASKTWO-0123456789"
	got := f.p.Mask("t1", in)
	want := "env: ANTHROPIC_API_KEY=" + strings.Repeat("*", 35) + " key " + strings.Repeat("*", len(realKey)) + " other sk-ant-api03-svc-TASKTWO-0123456789"
	if got != want {
		t.Errorf("masked:\n got %q\nwant %q", got, want)
	}
	if got := f.p.Mask("t1", "nothing secret"); got != "nothing secret" {
		t.Errorf("plain text changed: %q", got)
	}
}

// told is what a transcript was told, call by call.
type told struct{ calls []string }

func (r *told) OnText(s string)            { r.calls = append(r.calls, "text "+s) }
func (r *told) OnToolCall(name, in string) { r.calls = append(r.calls, "tool "+name+" "+in) }
func (r *told) OnUsage(u api.CallUsage)    { r.calls = append(r.calls, fmt.Sprint("usage ", u)) }
func (r *told) End()                       { r.calls = append(r.calls, "end") }

// parseBoth feeds stream to the Anthropic parser with and without its
// fast way to the deltas and returns what each told.
func parseBoth(stream []byte) (fast, slow []string) {
	var f, s told
	pf := newAnthropicParser("text/event-stream", &f).(*anthropicParser)
	ps := newAnthropicParser("text/event-stream", &s).(*anthropicParser)
	ps.slow = true
	for _, p := range []*anthropicParser{pf, ps} {
		p.Feed(stream)
		p.End()
	}
	return f.calls, s.calls
}

// The deltas as the API writes them take the fast way, whatever their
// text; what they tell the transcript is what encoding/json reads.
func TestFastDeltaAsTheAPIWritesThem(t *testing.T) {
	texts := []string{"Hello", "", " world", "line\nbreak\ttab", `quote " and \ slash /`, "é ü 中文 🙂", "\u2028\u007f",
		"<tag> & 'x'", "\x01ctl", "a\u0000b"}
	for i, text := range texts {
		for _, kind := range []string{"text_delta", "input_json_delta"} {
			key := map[string]string{"text_delta": "text", "input_json_delta": "partial_json"}[kind]
			// as Python's json.dumps (the API) writes it, ASCII-escaped or
			// not, and as Go's encoder does (<, > and & as \u escapes)
			lines := [][]byte{}
			for _, esc := range []bool{false, true} {
				var b bytes.Buffer
				enc := json.NewEncoder(&b)
				enc.SetEscapeHTML(esc)
				_ = enc.Encode(text)
				lines = append(lines, []byte(fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":%q,%q:%s}}`, i, kind, key, bytes.TrimSpace(b.Bytes()))))
			}
			lines = append(lines, []byte(fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":%q,%q:"%s"}}`, i, kind, key, asciiEscaped(text))),
				// as the API's documents print it, and with the keys sorted
				[]byte(fmt.Sprintf(`{"type": "content_block_delta", "index": %d, "delta": {"type": %q, %q: "%s"}}`, i, kind, key, asciiEscaped(text))))
			sorted, _ := json.Marshal(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]string{"type": kind, key: text}})
			lines = append(lines, sorted)
			for _, line := range lines {
				d, ok := fastDelta(line)
				if !ok {
					t.Errorf("%s: not read the fast way", line)
					continue
				}
				var e anthropicEvent
				if err := json.Unmarshal(line, &e); err != nil || e.Type != "content_block_delta" || e.Index != d.index || e.Delta == nil ||
					e.Delta.Type != d.kind || e.Delta.Text != d.text || e.Delta.PartialJSON != d.partialJSON {
					t.Errorf("%s:\nfast %+v\njson %+v %v", line, d, e.Delta, err)
				}
			}
		}
	}
	// one tool call's input in deltas, and text, as one stream
	stream := "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"Write\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"file_path\\\":\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"a.go\\\"}\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
		"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"done\\n\"}}\r\n"
	fast, slow := parseBoth([]byte(stream))
	if fmt.Sprint(fast) != fmt.Sprint(slow) || len(fast) != 2 || fast[0] != `tool Write {"file_path":"a.go"}` {
		t.Errorf("fast %q\nslow %q", fast, slow)
	}
}

// asciiEscaped is s with every rune past ASCII as \u escapes (a surrogate
// pair past the BMP), as Python's json.dumps writes by default.
func asciiEscaped(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r < ' ' || r == 0x7f:
			fmt.Fprintf(&b, `\u%04x`, r)
		case r < 0x80:
			b.WriteRune(r)
		default:
			for _, u := range utf16.Encode([]rune{r}) {
				fmt.Fprintf(&b, `\u%04x`, u)
			}
		}
	}
	return b.String()
}

// FuzzFastDelta: any line, read the fast way or not, tells the transcript
// what encoding/json's reading tells it.
func FuzzFastDelta(f *testing.F) {
	for _, s := range []string{
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`,
		`{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`,
		`{"type":"content_block_delta","index":00,"delta":{"type":"text_delta","text":"lead"}}`,
		`{"type":"content_block_delta","index":99999999999,"delta":{"type":"text_delta","text":"big"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\ud83d\ude42 \ud83d x \u00e9"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\\"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x","text":"y"}}`,
		"{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\xff\"}}",
		`{"delta": {"text": "a", "type": "text_delta"}, "index": 1, "type": "content_block_delta"} `,
		`{"type":"content_block_delta","Index":1,"delta":{"type":"text_delta","text":"case"}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"a","Text":"b"}}`,
		`{"type":"content_block_delta","index":1.0,"delta":{"type":"text_delta","text":"f"}}`,
		`{"type":"content_block_delta","index":1,"delta":null}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		fast, slow := parseBoth([]byte("data: " + line + "\n"))
		if fmt.Sprint(fast) != fmt.Sprint(slow) {
			t.Fatalf("%q:\nfast %q\nslow %q", line, fast, slow)
		}
	})
}
