package proxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"lazy/api"
	"lazy/config"
)

// benchEditor is a proxy whose editor upstream discards what it gets.
func benchEditor(b *testing.B) (*httptest.Server, string) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	b.Cleanup(up.Close)
	home := b.TempDir()
	_ = os.MkdirAll(filepath.Join(home, "credentials"), 0o700)
	_ = os.WriteFile(filepath.Join(home, "credentials", "editor"), []byte("key_REALEDITORKEY_abcdefghijklmnop"), 0o600)
	cfg := config.Defaults()
	cfg.Agent.Runner = config.RunnerProcess // agents on the TCP listener
	cfg.Proxy.EditorUpstream = up.URL
	ph := NewEditorPlaceholder()
	g := Grants{ph: {Placeholder: ph, TaskRef: "b", TaskID: "x", EnvVar: "CURSOR_API_KEY", CreatedAt: time.Now()}}
	ptr := &atomic.Pointer[Grants]{}
	ptr.Store(&g)
	p, err := New(Options{Config: &cfg, Home: home, Grants: ptr})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(p)
	b.Cleanup(srv.Close)
	return srv, ph
}

func benchEditorBody(b *testing.B, size int) {
	srv, ph := benchEditor(b)
	body := []byte(strings.Repeat("a", size))
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req, _ := http.NewRequest("POST", srv.URL+"/_svc/cursor/"+ph+"/v1/x", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+ph)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// BenchmarkEditorBody64KSubstituted is a 64 KiB body read whole and
// scanned for placeholders before it is forwarded, the key put in its
// Authorization header (the name is kept for make bench's table);
// BenchmarkEditorBody64KPlus1Streamed is one byte more, forwarded as a
// stream scanned as it passes. Their difference is the cost of reading whole.
func BenchmarkEditorBody64KSubstituted(b *testing.B)   { benchEditorBody(b, MaxSubstituteBody) }
func BenchmarkEditorBody64KPlus1Streamed(b *testing.B) { benchEditorBody(b, MaxSubstituteBody+1) }

func BenchmarkGrantLookup(b *testing.B) {
	g := Grants{}
	var ph string
	for i := 0; i < 10000; i++ {
		ph = NewPlaceholder("api_key", "")
		g[ph] = Grant{Placeholder: ph}
	}
	ptr := &atomic.Pointer[Grants]{}
	ptr.Store(&g)
	p := &Proxy{o: Options{Grants: ptr, Now: time.Now}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if gr, _ := p.resolve(ph); gr == nil {
			b.Fatal("miss")
		}
	}
}

// rtFunc is an in-memory upstream: no network, so the benchmark below is the
// proxy's own CPU per request.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// BenchmarkServeModelRequest is one granted /v1/messages request through
// ServeHTTP, with scrubbing on, against an in-memory upstream.
func BenchmarkServeModelRequest(b *testing.B) {
	home := b.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "credentials"), 0o700); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "credentials", "provider"), []byte(realKey), 0o600); err != nil {
		b.Fatal(err)
	}
	cfg := cfgFor("http://127.0.0.1:1", "provider")
	ph := NewPlaceholder("api_key", "")
	g := Grants{ph: {Placeholder: ph, TaskRef: "b", TaskID: strings.Repeat("b", 32), EnvVar: "ANTHROPIC_API_KEY"}}
	ptr := &atomic.Pointer[Grants]{}
	ptr.Store(&g)
	reply := []byte(`{"id":"msg_1","type":"message","content":[{"type":"text","text":"one two three"}],"usage":{"input_tokens":10,"output_tokens":3}}`)
	p, err := New(Options{Config: &cfg, Home: home, Grants: ptr, Port: 1, Publish: func(api.Traffic) {},
		Transport: rtFunc(func(r *http.Request) (*http.Response, error) {
			_, _ = io.Copy(io.Discard, r.Body)
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(reply)),
				ContentLength: int64(len(reply)), Request: r, ProtoMajor: 1, ProtoMinor: 1}, nil
		})})
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(msgBody)
	b.ReportAllocs()
	for b.Loop() {
		req := originForm(httptest.NewRequest("POST", "http://127.0.0.1:1/v1/messages?beta=true", bytes.NewReader(body)))
		req.Header.Set("x-api-key", ph)
		req.Header.Set("anthropic-version", "2023-06-01")
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
}

// BenchmarkServeBareReverseProxy is the same request through a bare
// httputil.ReverseProxy that only swaps the key: the floor the proxy's own
// work is measured against.
func BenchmarkServeBareReverseProxy(b *testing.B) {
	reply := []byte(`{"id":"msg_1","type":"message","content":[{"type":"text","text":"one two three"}],"usage":{"input_tokens":10,"output_tokens":3}}`)
	u, _ := url.Parse("http://127.0.0.1:1")
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.Out.Header.Set("x-api-key", realKey) },
		FlushInterval: 0, BufferPool: bufferPool{},
		Transport: rtFunc(func(r *http.Request) (*http.Response, error) {
			_, _ = io.Copy(io.Discard, r.Body)
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(reply)),
				ContentLength: int64(len(reply)), Request: r, ProtoMajor: 1, ProtoMinor: 1}, nil
		}),
	}
	body := []byte(msgBody)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("POST", "http://127.0.0.1:1/v1/messages?beta=true", bytes.NewReader(body))
		req.Header.Set("x-api-key", "ph")
		req.Header.Set("anthropic-version", "2023-06-01")
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, req)
	}
}

// nopTranscript is a watcher's transcript that does nothing with what it
// gets: what the proxy itself spends on reading a reply for one.
type nopTranscript struct{}

func (nopTranscript) OnText(string)             {}
func (nopTranscript) OnToolCall(string, string) {}
func (nopTranscript) OnUsage(api.CallUsage)     {}
func (nopTranscript) End()                      {}

// benchTranscript is a task's streamed model call (30 text deltas) through
// the proxy, with its reply read for a transcript (watched) or not.
func benchTranscript(b *testing.B, watched bool) {
	up := httptest.NewServer(sseUpstream(strings.Fields(strings.Repeat("word ", 30)), "Write", `{"file_path":"a.go",`, `"content":"x"}`))
	b.Cleanup(up.Close)
	home := b.TempDir()
	_ = os.MkdirAll(filepath.Join(home, "credentials"), 0o700)
	_ = os.WriteFile(filepath.Join(home, "credentials", "provider"), []byte(realKey), 0o600)
	cfg := config.Defaults()
	cfg.Agent.Runner = config.RunnerProcess
	cfg.Proxy.Upstream, cfg.Proxy.Credential = up.URL, "provider"
	ph := NewPlaceholder("api_key", "")
	g := Grants{ph: {Placeholder: ph, TaskRef: "b", TaskID: "x", EnvVar: "ANTHROPIC_API_KEY", CreatedAt: time.Now()}}
	ptr := &atomic.Pointer[Grants]{}
	ptr.Store(&g)
	p, err := New(Options{Config: &cfg, Home: home, Grants: ptr, Transcript: func(string, string) Transcript {
		if watched {
			return nopTranscript{}
		}
		return nil
	}})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(p)
	b.Cleanup(srv.Close)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("x-api-key", ph)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// BenchmarkModelCallNoWatcher and BenchmarkModelCallWatched: the same
// streamed call, with nobody watching its task (the reply is not read for a
// transcript) and with a watcher (it is parsed, masked and handed on).
func BenchmarkModelCallNoWatcher(b *testing.B) { benchTranscript(b, false) }
func BenchmarkModelCallWatched(b *testing.B)   { benchTranscript(b, true) }

// BenchmarkServeGeminiRequest is BenchmarkServeModelRequest on the Gemini
// route: a streamGenerateContent?alt=sse call whose reply is read for its
// usageMetadata by go-sse on the reader's goroutine.
func BenchmarkServeGeminiRequest(b *testing.B) {
	home := b.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "credentials"), 0o700); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "credentials", "gemini"), []byte(realGeminiKey), 0o600); err != nil {
		b.Fatal(err)
	}
	cfg := cfgFor("http://127.0.0.1:1", "none")
	cfg.Proxy.Gemini.Upstream = "http://127.0.0.1:2"
	ph := NewPlaceholder(KindGemini, "")
	g := Grants{ph: {Placeholder: ph, TaskRef: "b", TaskID: strings.Repeat("b", 32), EnvVar: "GEMINI_API_KEY"}}
	ptr := &atomic.Pointer[Grants]{}
	ptr.Store(&g)
	reply := []byte("data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"one two \"}]}}],\"usageMetadata\":{\"promptTokenCount\":10,\"totalTokenCount\":10}}\r\n\r\n" +
		"data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"three\"}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":10,\"candidatesTokenCount\":3,\"totalTokenCount\":13}}\r\n\r\n")
	p, err := New(Options{Config: &cfg, Home: home, Grants: ptr, Port: 1, Publish: func(api.Traffic) {},
		Transport: rtFunc(func(r *http.Request) (*http.Response, error) {
			_, _ = io.Copy(io.Discard, r.Body)
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(reply)),
				ContentLength: -1, Request: r, ProtoMajor: 1, ProtoMinor: 1}, nil
		})})
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(geminiBody)
	b.ReportAllocs()
	for b.Loop() {
		req := originForm(httptest.NewRequest("POST", "http://127.0.0.1:1/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", bytes.NewReader(body)))
		req.Header.Set("x-goog-api-key", ph)
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
}
