package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"lazy/api"
	"lazy/canary"
	"lazy/config"
	"lazy/internal/logfile"
)

// A task's model call as the daemon serves it, in one process with an
// in-memory upstream: the budget's hold (Reserve) sized from a ~3 KB body,
// the decoys of three tasks scanned for, the traffic line at info to a
// text log, the usage read, the scrubber on. What the load bench's daemon
// row pays per call beyond the bare proxy, without the network.

// taskCallBody is a ~3 KB request like the load bench's (lazybench).
func taskCallBody(openai bool) []byte {
	pad := strings.Repeat("lorem ipsum dolor sit amet ", 110)
	var body any = map[string]any{"model": "m", "max_tokens": 64, "stream": false, "messages": []map[string]string{{"role": "user", "content": pad}}}
	if openai {
		body = map[string]any{"model": "m", "stream": true, "input": []map[string]any{{"type": "message", "role": "user",
			"content": []map[string]string{{"type": "input_text", "text": pad}}}}}
	}
	b, _ := json.Marshal(body)
	return b
}

const openAIReply = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"usage\":null}}\n\n" +
	"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"one two three\"}\n\n" +
	"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"usage\":{\"input_tokens\":10,\"input_tokens_details\":{\"cached_tokens\":4},\"output_tokens\":3}}}\n\n"

// taskCall is a proxy serving one task's calls as the daemon does, and
// one call of it (which fails tb unless it was answered 200 and counted).
func taskCall(tb testing.TB, openai bool) func() {
	home := tb.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "credentials"), 0o700); err != nil {
		tb.Fatal(err)
	}
	for name, key := range map[string]string{"provider": realKey, "openai": realOpenAI} {
		if err := os.WriteFile(filepath.Join(home, "credentials", name), []byte(key), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	cfg := cfgFor("http://127.0.0.1:1", "provider")
	cfg.Proxy.OpenAI = config.Upstream{Upstream: "http://127.0.0.1:2", Credential: config.CredentialProvider}
	ph, env, path, header, prefix := NewPlaceholder("api_key", ""), "ANTHROPIC_API_KEY", "/v1/messages?beta=true", "x-api-key", ""
	reply, ct := []byte(`{"id":"msg_1","type":"message","content":[{"type":"text","text":"one two three"}],"usage":{"input_tokens":10,"output_tokens":3}}`), "application/json"
	if openai {
		ph, env, path, header, prefix = NewPlaceholder(KindOpenAI, realOpenAI), "OPENAI_API_KEY", OpenAIRoute, "Authorization", "Bearer "
		reply, ct = []byte(openAIReply), "text/event-stream"
	}
	id := strings.Repeat("b", 32)
	g := Grants{ph: {Placeholder: ph, TaskRef: "b", TaskID: id, EnvVar: env}}
	ptr := &atomic.Pointer[Grants]{}
	ptr.Store(&g)
	maker := canary.NewMaker([]byte("a key of the daemon's, 32 bytes!"))
	marks := map[canary.Owner][]string{}
	for _, t := range []string{id, strings.Repeat("c", 32), strings.Repeat("d", 32)} {
		marks[canary.Owner{TaskID: t, Ref: t[:1]}] = maker.For(t).Marks
	}
	decoys := canary.NewSet(marks)
	var held atomic.Int64
	var counted atomic.Int64
	p, err := New(Options{Config: &cfg, Home: home, Grants: ptr, Port: 1,
		Log:      slog.New(logfile.NewText(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})), // the daemon's handler
		Canaries: func() *canary.Set { return decoys },
		Reserve: func(_ string, estimate func() int64) (int64, string) {
			n := estimate()
			held.Add(n)
			return n, ""
		},
		Publish: func(t api.Traffic) {
			held.Add(-t.Reserved)
			if t.Usage != nil && t.Usage.OutputTokens == 3 {
				counted.Add(1)
			}
		},
		Transport: rtFunc(func(r *http.Request) (*http.Response, error) {
			_, _ = io.Copy(io.Discard, r.Body)
			wrote(r) // as net/http's transports report it
			n := int64(len(reply))
			if openai {
				n = -1
			}
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ct}}, Body: io.NopCloser(bytes.NewReader(reply)),
				ContentLength: n, Request: r, ProtoMajor: 1, ProtoMinor: 1}, nil
		})})
	if err != nil {
		tb.Fatal(err)
	}
	body := taskCallBody(openai)
	return func() {
		req := originForm(httptest.NewRequest("POST", "http://127.0.0.1:1"+path, bytes.NewReader(body)))
		req.Header.Set(header, prefix+ph)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		before := counted.Load()
		p.ServeHTTP(rec, req)
		if rec.Code != 200 || counted.Load() != before+1 {
			tb.Fatalf("status %d, usage not counted: %s", rec.Code, rec.Body)
		}
	}
}

func BenchmarkServeTaskCall(b *testing.B)       { benchTaskCall(b, false) }
func BenchmarkServeTaskCallOpenAI(b *testing.B) { benchTaskCall(b, true) }

func benchTaskCall(b *testing.B, openai bool) {
	call := taskCall(b, openai)
	b.ReportAllocs()
	for b.Loop() {
		call()
	}
}

// TestTaskCallAllocs holds a task's call to its allocations (a count, not
// a time: the same on a busy machine). A change that adds allocations on
// the hot path fails here; raise a ceiling only with the reason in
// docs/BENCHMARKS.md.
func TestTaskCallAllocs(t *testing.T) {
	if raceOn {
		t.Skip("the race detector allocates on its own; the count is held in the plain run")
	}
	for _, c := range []struct {
		name    string
		openai  bool
		ceiling float64
	}{{"anthropic", false, taskCallAllocs}, {"openai", true, taskCallOpenAIAllocs}} {
		call := taskCall(t, c.openai)
		call()
		got := testing.AllocsPerRun(200, call)
		t.Logf("%s: %.0f allocations per call (ceiling %.0f)", c.name, got, c.ceiling)
		if got > c.ceiling {
			t.Errorf("%s: %.0f allocations per call, more than %.0f", c.name, got, c.ceiling)
		}
	}
}

// The ceilings of TestTaskCallAllocs (httptest's request and recorder
// included).
const (
	taskCallAllocs       = 81
	taskCallOpenAIAllocs = 102
)

// wrote reports r written whole to its trace, as net/http's transports do
// once they have sent a request and its body.
func wrote(r *http.Request) {
	if tr := httptrace.ContextClientTrace(r.Context()); tr != nil && tr.WroteRequest != nil {
		tr.WroteRequest(httptrace.WroteRequestInfo{})
	}
}
