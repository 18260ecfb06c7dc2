package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lazy/api"
	"lazy/config"
)

const realOpenAI = "sk-proj-REALOPENAIKEY-0123456789abcdefghij"

const responsesBody = `{"model":"gpt-5","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}],"stream":true}`

// openAIFixture is a proxy whose [proxy.openai] is a stub upstream with
// [credentials.openai], budgets and tripwires recorded.
type openAIFixture struct {
	*fixture
	up    *upstream
	mu    sync.Mutex
	over  bool
	trips []string
}

func newOpenAIFixture(t *testing.T) *openAIFixture {
	t.Helper()
	up := newUpstream(t)
	cfg := cfgFor("http://127.0.0.1:9", "provider")
	cfg.Proxy.OpenAI = config.Upstream{Upstream: up.srv.URL, Credential: config.CredentialProvider}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	of := &openAIFixture{up: up}
	f := &fixture{t: t, home: t.TempDir(), grants: &atomic.Pointer[Grants]{}}
	f.grants.Store(&Grants{})
	p, err := New(Options{Config: &cfg, Home: f.home, Grants: f.grants,
		Publish: func(tr api.Traffic) { f.mu.Lock(); f.traffic = append(f.traffic, tr); f.mu.Unlock() },
		OverBudget: func(string) (bool, string) {
			of.mu.Lock()
			defer of.mu.Unlock()
			return of.over, "token budget used up"
		},
		Tripwire: func(_, _, what string) { of.mu.Lock(); of.trips = append(of.trips, what); of.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	f.p = p
	f.srv = httptest.NewServer(p)
	t.Cleanup(f.srv.Close)
	f.writeCred("openai", realOpenAI+"\n")
	of.fixture = f
	return of
}

// openAIKey grants an OpenAI placeholder to ref and returns its header.
func (f *openAIFixture) openAIKey(ref string) map[string]string {
	ph := NewPlaceholder(KindOpenAI, realOpenAI)
	f.grant(ph, "", ref, "OPENAI_API_KEY")
	return map[string]string{"Authorization": "Bearer " + ph, "Accept": "text/event-stream"}
}

// openAIError is OpenAI's error shape.
type openAIError struct {
	Error *struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    *string `json:"code"`
	} `json:"error"`
	Type string `json:"type"` // Anthropic's shape has one: must be absent
}

func decodeOpenAIError(t *testing.T, b []byte) openAIError {
	t.Helper()
	var e openAIError
	if err := json.Unmarshal(b, &e); err != nil || e.Error == nil || e.Type != "" || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("not OpenAI's error shape: %s", b)
	}
	return e
}

func TestOpenAIRoute(t *testing.T) {
	f := newOpenAIFixture(t)
	hdr := f.openAIKey("cx")
	resp := f.do("POST", "/v1/responses", hdr, responsesBody)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "event: response.completed") {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	reqs := f.up.Requests()
	if len(reqs) != 1 || reqs[0].Path != "/v1/responses" || reqs[0].Header.Get("Authorization") != "Bearer "+realOpenAI || string(reqs[0].Body) != responsesBody {
		t.Fatalf("upstream saw %+v", reqs)
	}
	tr := f.lastTraffic()
	_, in, out := f.up.Reported()
	cached := f.up.ReportedCached()
	if tr.TaskRef != "cx" || tr.Usage == nil || tr.Usage.InputTokens+tr.Usage.CacheReadInputTokens != in || tr.Usage.CacheReadInputTokens != cached || tr.Usage.OutputTokens != out {
		t.Fatalf("traffic %+v usage %+v, the stub reported %d in (%d cached) %d out", tr, tr.Usage, in, cached, out)
	}
	if cached == 0 || tr.Usage.InputTokens == 0 {
		t.Fatalf("the stub reports cached tokens: %+v", tr.Usage)
	}
	// a JSON (not streamed) reply is counted too
	resp = f.do("POST", "/v1/responses", hdr, strings.Replace(responsesBody, `"stream":true`, `"stream":false`, 1))
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if tr := f.lastTraffic(); tr.Usage == nil || tr.Usage.OutputTokens == 0 {
		t.Fatalf("JSON reply: %+v", tr.Usage)
	}
}

func TestOpenAIRefusals(t *testing.T) {
	f := newOpenAIFixture(t)
	own := f.openAIKey("cx")
	anth := NewPlaceholder("api_key", "")
	f.grant(anth, "", "cx", "ANTHROPIC_API_KEY")
	for _, tc := range []struct {
		name, path, auth string
		status           int
		typ, cause       string
	}{
		{"unknown placeholder", "/v1/responses", "Bearer sk-proj-svc-" + strings.Repeat("Z", 32), 401, "invalid_request_error", CauseUnknownPlaceholder},
		{"Anthropic grant on the OpenAI route", "/v1/responses", "Bearer " + anth, 401, "invalid_request_error", CauseWrongGrantKind},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := f.do("POST", tc.path, map[string]string{"Authorization": tc.auth}, responsesBody)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			e := decodeOpenAIError(t, body)
			if resp.StatusCode != tc.status || e.Error.Type != tc.typ || e.Error.Code == nil || *e.Error.Code != tc.cause || f.lastTraffic().Refused != tc.cause {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
		})
	}
	// the OpenAI grant on an Anthropic route: refused in Anthropic's shape
	resp := f.do("POST", "/v1/messages", map[string]string{"x-api-key": strings.TrimPrefix(own["Authorization"], "Bearer ")}, msgBody)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(string(body), `"type":"error"`) || f.lastTraffic().Refused != CauseWrongGrantKind {
		t.Fatalf("OpenAI grant on /v1/messages: %d %s", resp.StatusCode, body)
	}
	// a spent budget: 429, insufficient_quota, code budget_exceeded
	f.mu.Lock()
	f.over = true
	f.mu.Unlock()
	resp = f.do("POST", "/v1/responses", own, responsesBody)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	e := decodeOpenAIError(t, body)
	if resp.StatusCode != 429 || e.Error.Type != "insufficient_quota" || *e.Error.Code != CauseBudgetExceeded || f.lastTraffic().Refused != CauseBudgetExceeded {
		t.Fatalf("budget: %d %s", resp.StatusCode, body)
	}
	if n := len(f.up.Requests()); n != 0 {
		t.Fatalf("%d refused calls reached the upstream", n)
	}
}

func TestOpenAIEchoedKeyTrips(t *testing.T) {
	f := newOpenAIFixture(t)
	f.up.Reply = func(string) string { return "the key is " + realOpenAI + " ok" }
	resp := f.do("POST", "/v1/responses", f.openAIKey("cx"), responsesBody)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if bytes.Contains(body, []byte(realOpenAI)) {
		t.Fatal("the real key reached the client")
	}
	if tr := f.lastTraffic(); tr.Tripwire != TripRealCredential {
		t.Fatalf("traffic %+v", tr)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.trips) != 1 || f.trips[0] != TripRealCredential {
		t.Fatalf("trips %v", f.trips)
	}
}

func TestOpenAIPlaceholderShape(t *testing.T) {
	for real, want := range map[string]string{
		"sk-proj-abcdef":    "sk-proj-svc-",
		"sk-svcacct-abcdef": "sk-svcacct-svc-",
		"sk-abcdef":         "sk-svc-",
		"":                  "sk-svc-",
	} {
		ph := NewPlaceholder(KindOpenAI, real)
		if !strings.HasPrefix(ph, want) || len(ph) != len(want)+randLen {
			t.Errorf("%q: placeholder %q, want %s<random>", real, ph, want)
		}
	}
}

// TestResponsesUsageSplit: the reader passes every byte unchanged however
// the reply is cut into reads, and finds the usage of response.completed.
func TestResponsesUsageSplit(t *testing.T) {
	stream := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"\\\"usage\\\":{\\\"input_tokens\\\":999}\"}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":30,\"input_tokens_details\":{\"cached_tokens\":10},\"output_tokens\":7}}}\n\n"
	for _, step := range []int{1, 3, 17, len(stream)} {
		var u api.CallUsage
		var seen, end bool
		ru := newResponsesUsage(io.NopCloser(&chunked{b: []byte(stream), n: step}), "text/event-stream; charset=utf-8", &u, &seen, &end, nil)
		got, err := io.ReadAll(ru)
		ru.Close()
		if err != nil || string(got) != stream {
			t.Fatalf("step %d: bytes changed (%v)", step, err)
		}
		if !seen || !end || u.InputTokens != 20 || u.CacheReadInputTokens != 10 || u.OutputTokens != 7 {
			t.Fatalf("step %d: usage %+v seen %v end %v", step, u, seen, end)
		}
	}
	// closed before its end: the parser stops, nothing is counted twice
	var u api.CallUsage
	var seen, end bool
	ru := newResponsesUsage(io.NopCloser(strings.NewReader(stream)), "text/event-stream", &u, &seen, &end, nil)
	buf := make([]byte, 10)
	_, _ = ru.Read(buf)
	done := make(chan struct{})
	go func() { ru.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung")
	}
	if end || seen {
		t.Fatalf("a reply cut short: seen %v end %v", seen, end)
	}
}

// chunked reads b n bytes at a time.
type chunked struct {
	b []byte
	n int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	k := min(c.n, len(p), len(c.b))
	copy(p, c.b[:k])
	c.b = c.b[k:]
	return k, nil
}

// FuzzResponsesUsage: whatever an upstream streams, the reader passes it
// unchanged, ends, and never records a negative count.
func FuzzResponsesUsage(f *testing.F) {
	f.Add([]byte("event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":3,\"input_tokens_details\":{\"cached_tokens\":9},\"output_tokens\":2}}}\n\n"), 5, true)
	f.Add([]byte("data: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":-1,\"output_tokens\":1e3}}}\r\n\r\n"), 1, true)
	f.Add([]byte(`{"usage":{"input_tokens":4,"output_tokens":5}}`), 2, false)
	f.Add([]byte("event: x\ndata: \n\n:comment\n\ndata"), 3, true)
	f.Fuzz(func(t *testing.T, b []byte, step int, stream bool) {
		if step < 1 {
			step = 1
		}
		ct := "application/json"
		if stream {
			ct = "text/event-stream"
		}
		var u api.CallUsage
		var seen, end bool
		ru := newResponsesUsage(io.NopCloser(&chunked{b: append([]byte(nil), b...), n: step}), ct, &u, &seen, &end, nil)
		got, err := io.ReadAll(ru)
		ru.Close()
		if err != nil || !bytes.Equal(got, b) || !end {
			t.Fatalf("bytes changed or no end: %v", err)
		}
		if u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheReadInputTokens < 0 || u.CacheCreationInputTokens < 0 {
			t.Fatalf("negative usage %+v", u)
		}
	})
}

// BenchmarkServeOpenAIRequest is BenchmarkServeModelRequest on the OpenAI
// Responses route: a streamed reply whose response.completed carries the
// usage, parsed with go-sse beside the copy to the client.
func BenchmarkServeOpenAIRequest(b *testing.B) {
	home := b.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "credentials"), 0o700); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "credentials", "openai"), []byte(realOpenAI), 0o600); err != nil {
		b.Fatal(err)
	}
	cfg := cfgFor("http://127.0.0.1:2", "none")
	cfg.Proxy.OpenAI = config.Upstream{Upstream: "http://127.0.0.1:1", Credential: config.CredentialProvider}
	ph := NewPlaceholder(KindOpenAI, realOpenAI)
	g := Grants{ph: {Placeholder: ph, TaskRef: "b", TaskID: strings.Repeat("b", 32), EnvVar: "OPENAI_API_KEY"}}
	ptr := &atomic.Pointer[Grants]{}
	ptr.Store(&g)
	reply := []byte("event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"usage\":null}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"one two three\"}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"usage\":{\"input_tokens\":10,\"input_tokens_details\":{\"cached_tokens\":4},\"output_tokens\":3}}}\n\n")
	var seen api.CallUsage
	p, err := New(Options{Config: &cfg, Home: home, Grants: ptr, Port: 1, Publish: func(t api.Traffic) {
		if t.Usage != nil {
			seen = *t.Usage
		}
	},
		Transport: rtFunc(func(r *http.Request) (*http.Response, error) {
			_, _ = io.Copy(io.Discard, r.Body)
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(reply)),
				ContentLength: -1, Request: r, ProtoMajor: 1, ProtoMinor: 1}, nil
		})})
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(responsesBody)
	b.ReportAllocs()
	for b.Loop() {
		req := originForm(httptest.NewRequest("POST", "http://127.0.0.1:1/v1/responses", bytes.NewReader(body)))
		req.Header.Set("Authorization", "Bearer "+ph)
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
	if seen.OutputTokens != 3 || seen.CacheReadInputTokens != 4 {
		b.Fatalf("usage %+v", seen)
	}
}
