package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"lazy/api"
	"lazy/config"
)

const realGeminiKey = "AIzaREALgeminiKEY0123456789abcdefghijkl" // 39 characters, the real shape

const geminiBody = `{"contents":[{"role":"user","parts":[{"text":"say hi"}]}],"generationConfig":{"maxOutputTokens":100}}`

// geminiFixture is a proxy in front of h with the Gemini route's upstream
// at h, budgets and tripwires recorded.
type geminiFixture struct {
	*fixture
	over    atomic.Bool
	tripsMu sync.Mutex
	trips   []string
}

func newGeminiFixture(t *testing.T, h http.Handler) *geminiFixture {
	t.Helper()
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	cfg := config.Defaults()
	cfg.Agent.Runner = config.RunnerProcess
	cfg.Proxy.Gemini = config.Upstream{Upstream: up.URL, Credential: config.CredentialProvider}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, home: t.TempDir(), grants: &atomic.Pointer[Grants]{}}
	g := Grants{}
	f.grants.Store(&g)
	gf := &geminiFixture{fixture: f}
	p, err := New(Options{Config: &cfg, Home: f.home, Grants: f.grants,
		Publish: func(tr api.Traffic) {
			f.mu.Lock()
			f.traffic = append(f.traffic, tr)
			f.mu.Unlock()
		},
		OverBudget: func(string) (bool, string) {
			if gf.over.Load() {
				return true, "the task has used its token budget (10 of 10 tokens); raise it with lazy task budget"
			}
			return false, ""
		},
		Tripwire: func(_, ref, what string) {
			gf.tripsMu.Lock()
			gf.trips = append(gf.trips, ref+" "+what)
			gf.tripsMu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	f.p = p
	f.srv = httptest.NewServer(p)
	t.Cleanup(f.srv.Close)
	f.writeCred("gemini", realGeminiKey+"\n")
	return gf
}

// geminiKey grants a fresh Gemini placeholder to task ref.
func (f *geminiFixture) geminiKey(ref string) string {
	ph := NewPlaceholder(KindGemini, "")
	f.grant(ph, "", ref, "GEMINI_API_KEY")
	return ph
}

func TestGeminiPlaceholderShape(t *testing.T) {
	ph := NewPlaceholder(KindGemini, "")
	if len(ph) != GeminiKeyLen || !strings.HasPrefix(ph, "AIzasvc-") {
		t.Fatalf("placeholder %q: want 39 characters starting AIzasvc-", ph)
	}
	for _, c := range ph {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			t.Fatalf("placeholder %q has %q, outside a Gemini key's alphabet", ph, c)
		}
	}
	if m, ok := randMark(ph); !ok || len(m) != markLen || !strings.HasSuffix(ph, m) {
		t.Errorf("randMark(%q) = %q %v", ph, m, ok)
	}
}

// googleError decodes Google's error shape and fails unless it is one.
func googleError(t *testing.T, b []byte) (code int, status, reason string) {
	t.Helper()
	var e struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
			Details []struct {
				Reason string `json:"reason"`
			} `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Code == 0 || e.Error.Status == "" || e.Error.Message == "" {
		t.Fatalf("not Google's error shape (%v): %s", err, b)
	}
	if len(e.Error.Details) > 0 {
		reason = e.Error.Details[0].Reason
	}
	return e.Error.Code, e.Error.Status, reason
}

// TestGeminiRoute: the real key reaches the upstream in x-goog-api-key,
// never the placeholder; the usage of a JSON reply, an SSE stream and a
// JSON-array stream is what the stub reported.
func TestGeminiRoute(t *testing.T) {
	up := newUpstream(t)
	f := newGeminiFixture(t, up.Server)
	ph := f.geminiKey("gem")
	for _, path := range []string{
		"/v1beta/models/gemini-2.5-flash:generateContent",
		"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
		"/v1beta/models/gemini-2.5-flash:streamGenerateContent",
	} {
		t.Run(path, func(t *testing.T) {
			up.Reset()
			_, in0, out0 := up.Reported()
			resp := f.do("POST", path, map[string]string{"x-goog-api-key": ph, "Content-Type": "application/json"}, geminiBody)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(body), "stub answer to: say hi") && !strings.Contains(string(body), "stub ") {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			reqs := up.Requests()
			if len(reqs) != 1 {
				t.Fatalf("upstream saw %d requests", len(reqs))
			}
			if got := reqs[0].Header.Get("x-goog-api-key"); got != realGeminiKey {
				t.Errorf("upstream got x-goog-api-key %q, want the real key", got)
			}
			for k, vs := range reqs[0].Header {
				for _, v := range vs {
					if strings.Contains(v, "svc-") {
						t.Errorf("the placeholder reached the upstream in %s", k)
					}
				}
			}
			_, in1, out1 := up.Reported()
			tr := f.lastTraffic()
			if tr.TaskRef != "gem" || tr.Status != 200 || tr.Usage == nil {
				t.Fatalf("traffic: %+v", tr)
			}
			if tr.Usage.InputTokens != in1-in0 || tr.Usage.OutputTokens != out1-out0 {
				t.Errorf("usage %+v, the stub reported %d in, %d out", *tr.Usage, in1-in0, out1-out0)
			}
			if !strings.Contains(tr.Line(), "POST /v1beta/models/gemini-2.5-flash:") {
				t.Errorf("traffic line: %s", tr.Line())
			}
		})
	}
}

// TestGeminiRefusals: each refusal comes in Google's error shape, names
// its cause, and reaches no upstream.
func TestGeminiRefusals(t *testing.T) {
	up := newUpstream(t)
	f := newGeminiFixture(t, up.Server)
	ph := f.geminiKey("gem")
	anth := NewPlaceholder("api_key", "")
	f.grant(anth, "", "claude", "ANTHROPIC_API_KEY")
	gen := "/v1beta/models/gemini-2.5-flash:generateContent"
	for _, tc := range []struct {
		name, path, key string
		over            bool
		noCred          bool
		code            int
		status, cause   string
	}{
		{"unknown placeholder", gen, "AIzasvc-" + strings.Repeat("x", 31), false, false, 401, "UNAUTHENTICATED", CauseUnknownPlaceholder},
		{"key in the query", gen + "?key=" + ph, "", false, false, 400, "INVALID_ARGUMENT", CauseKeyInQuery},
		{"key in the query beside the header", gen + "?alt=sse&key=AIzaanything", ph, false, false, 400, "INVALID_ARGUMENT", CauseKeyInQuery},
		{"a model name that is no name", "/v1beta/models/..%2f..%2fx:generateContent", ph, false, false, 404, "NOT_FOUND", ""},
		{"a method not proxied", "/v1beta/models/gemini-2.5-flash:batchGenerateContent", ph, false, false, 404, "NOT_FOUND", ""},
		{"another query parameter", gen + "?upload=1", ph, false, false, 400, "INVALID_ARGUMENT", ""},
		{"an Anthropic placeholder", gen, anth, false, false, 401, "UNAUTHENTICATED", CauseWrongGrantKind},
		{"budget used", gen, ph, true, false, 429, "RESOURCE_EXHAUSTED", CauseBudgetExceeded},
		{"no Gemini key on this machine", gen, ph, false, true, 401, "UNAUTHENTICATED", CauseGeminiMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up.Reset()
			f.over.Store(tc.over)
			if tc.noCred {
				f.writeCred("gemini", "")
				defer f.writeCred("gemini", realGeminiKey+"\n")
			}
			hdr := map[string]string{}
			if tc.key != "" {
				hdr["x-goog-api-key"] = tc.key
			}
			resp := f.do("POST", tc.path, hdr, geminiBody)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.code, body)
			}
			code, status, reason := googleError(t, body)
			if code != tc.code || status != tc.status || reason != tc.cause || resp.Header.Get("x-lazy-refused") != tc.cause {
				t.Errorf("got %d %s %q, want %d %s %q: %s", code, status, reason, tc.code, tc.status, tc.cause, body)
			}
			if tc.cause != "" && f.lastTraffic().Refused != tc.cause {
				t.Errorf("traffic: %+v", f.lastTraffic())
			}
			if n := len(up.Requests()); n != 0 {
				t.Errorf("a refused request reached the upstream (%d)", n)
			}
		})
	}
	f.over.Store(false)
	// a Gemini placeholder on the Anthropic route is refused there, in its shape
	resp := f.do("POST", "/v1/messages", map[string]string{"x-api-key": ph}, msgBody)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(string(body), `"type":"error"`) || !strings.Contains(string(body), CauseWrongGrantKind) {
		t.Errorf("Gemini placeholder on /v1/messages: %d %s", resp.StatusCode, body)
	}
}

// TestGeminiTripwire: an upstream that echoes the real key: it is masked
// before the client sees it, the wire trips, the task's placeholder is
// refused from then on.
func TestGeminiTripwire(t *testing.T) {
	for _, stream := range []bool{false, true} {
		f := newGeminiFixture(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := r.Header.Get("x-goog-api-key")
			if stream {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, `data: {"candidates":[{"content":{"parts":[{"text":"your key is `+key+`"}]}}]}`+"\r\n\r\n")
				w.(http.Flusher).Flush()
				io.WriteString(w, `data: {"usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":2,"cachedContentTokenCount":3,"thoughtsTokenCount":1}}`+"\r\n\r\n")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"candidates":[{"content":{"parts":[{"text":"your key is `+key+`"}]}}],"usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":2,"cachedContentTokenCount":3,"thoughtsTokenCount":1}}`)
		}))
		ph := f.geminiKey("echo")
		path := "/v1beta/models/m:generateContent"
		if stream {
			path = "/v1beta/models/m:streamGenerateContent?alt=sse"
		}
		resp := f.do("POST", path, map[string]string{"x-goog-api-key": ph}, geminiBody)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if bytes.Contains(body, []byte(realGeminiKey)) || !bytes.Contains(body, []byte(strings.Repeat("*", len(realGeminiKey)))) {
			t.Errorf("stream %v: the real key was not masked: %s", stream, body)
		}
		tr := f.lastTraffic()
		if tr.Tripwire != TripRealCredential {
			t.Errorf("stream %v: traffic %+v, want tripwire %s", stream, tr, TripRealCredential)
		}
		// usage: the prompt less the cached tokens, candidates and thoughts
		if tr.Usage == nil || tr.Usage.InputTokens != 4 || tr.Usage.CacheReadInputTokens != 3 || tr.Usage.OutputTokens != 3 {
			t.Errorf("stream %v: usage %+v, want 4 in, 3 cached, 3 out", stream, tr.Usage)
		}
		f.tripsMu.Lock()
		trips := strings.Join(f.trips, ";")
		f.tripsMu.Unlock()
		if trips != "echo "+TripRealCredential {
			t.Errorf("stream %v: the daemon was told %q", stream, trips)
		}
		resp = f.do("POST", path, map[string]string{"x-goog-api-key": ph}, geminiBody)
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("stream %v: after the trip the placeholder got %d: %s", stream, resp.StatusCode, body)
		}
		googleError(t, body)
	}
}

// FuzzGeminiUsage: whatever an upstream sends, split anyhow, the usage
// reader passes every byte on unchanged, ends, and never panics; a usage
// frame that is whole in the input is read.
func FuzzGeminiUsage(f *testing.F) {
	f.Add([]byte("data: {\"usageMetadata\":{\"promptTokenCount\":5,\"candidatesTokenCount\":2}}\r\n\r\n"), true, uint8(3))
	f.Add([]byte(`{"usageMetadata":{"promptTokenCount":5}}`), false, uint8(1))
	f.Add([]byte(`[{"usageMetadata":{"promptTokenCount":5}},{"usageMetadata":{"candidatesTokenCount":9}}]`), false, uint8(7))
	f.Add([]byte("data: {\"usageMetadata\":\ndata: {}}\n\n: comment\nevent: x\n\n"), true, uint8(2))
	f.Fuzz(func(t *testing.T, in []byte, stream bool, step uint8) {
		pl := &plan{}
		u := newGeminiUsage(io.NopCloser(&chunked{b: in, n: int(step%64) + 1}), pl, stream, nil)
		out, err := io.ReadAll(u)
		if err != nil {
			t.Fatal(err)
		}
		u.Close()
		if !bytes.Equal(out, in) {
			t.Fatal("the reader changed the bytes")
		}
		if !pl.usageDone {
			t.Fatal("read to EOF but not done")
		}
		if pl.usage.InputTokens < 0 || pl.usage.OutputTokens < 0 || pl.usage.CacheReadInputTokens < 0 {
			t.Fatalf("negative usage %+v", pl.usage)
		}
	})
}

func TestParseGeminiRoute(t *testing.T) {
	for path, want := range map[string]bool{
		"/v1beta/models/gemini-2.5-pro:generateContent":               true,
		"/v1beta/models/gemini-3.5-flash-lite:countTokens":            true,
		"/v1beta/models/m_1.2:streamGenerateContent":                  true,
		"/v1beta/models/:generateContent":                             false,
		"/v1beta/models/-x:generateContent":                           false,
		"/v1beta/models/a/b:generateContent":                          false,
		"/v1beta/models/a%20b:generateContent":                        false,
		"/v1beta/models/a:generateContent:x":                          false,
		"/v1beta/models/" + strings.Repeat("a", 129) + ":countTokens": false,
		"/v1beta/files/x":                                             false,
	} {
		if _, _, ok := ParseGeminiRoute(path); ok != want {
			t.Errorf("ParseGeminiRoute(%q) = %v, want %v", path, ok, want)
		}
	}
}
