package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"lazy/config"
)

func FuzzParseEditorRoute(f *testing.F) {
	for _, s := range []string{"/_svc/cursor/key_svc_x/v1/a", "/_svc/cursor/-/x", "/_svc//x/y", "/_svc/a/b", "/_svc/a/b/", "/v1/messages", "/_svc/a/b/c/d?e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		agentName, token, rest, ok := ParseEditorRoute(path)
		if !ok {
			return
		}
		if agentName == "" || token == "" || !strings.HasPrefix(rest, "/") || len(rest) < 2 {
			t.Fatalf("accepted %q as (%q, %q, %q)", path, agentName, token, rest)
		}
		if "/_svc/"+agentName+"/"+token+rest != path {
			t.Fatalf("parts of %q do not rebuild it", path)
		}
	})
}

// fuzzRig is one proxy with an editor upstream that records what it got and
// answers a fixed body, shared by every fuzz input.
type fuzzRig struct {
	p        *Proxy
	ph, real string
	lastBody atomic.Pointer[[]byte]
	// lastRest is what the upstream got but its Authorization header: the
	// URL, the other headers and the body
	lastRest atomic.Pointer[string]
}

func newFuzzRig(f *testing.F) *fuzzRig {
	r := &fuzzRig{real: "key_REAL_" + strings.Repeat("z", 24)}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.lastBody.Store(&b)
		h := req.Header.Clone()
		h.Del("Authorization")
		rest := req.URL.String() + fmt.Sprint(h) + string(b)
		r.lastRest.Store(&rest)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	f.Cleanup(up.Close)
	home := f.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "credentials"), 0o700); err != nil {
		f.Fatal(err)
	}
	for _, n := range []string{"editor", "provider"} {
		if err := os.WriteFile(filepath.Join(home, "credentials", n), []byte(r.real), 0o600); err != nil {
			f.Fatal(err)
		}
	}
	cfg := config.Defaults()
	cfg.Agent.Runner = config.RunnerProcess // agents on the TCP listener
	cfg.Proxy.Upstream, cfg.Proxy.Credential, cfg.Proxy.EditorUpstream = up.URL, "provider", up.URL
	r.ph = NewEditorPlaceholder()
	g := Grants{r.ph: {Placeholder: r.ph, TaskRef: "t", TaskID: "x", EnvVar: "CURSOR_API_KEY", CreatedAt: time.Now()}}
	ptr := &atomic.Pointer[Grants]{}
	ptr.Store(&g)
	p, err := New(Options{Config: &cfg, Home: home, Grants: ptr})
	if err != nil {
		f.Fatal(err)
	}
	r.p = p
	return r
}

// FuzzProxySubstitution sends arbitrary paths, headers and bodies through the
// whole handler: the real credential never appears in what the client gets
// back, nor anywhere the upstream got but its Authorization header, and a
// body of at most 64 KiB never reaches the upstream with the placeholder
// in it.
func FuzzProxySubstitution(f *testing.F) {
	r := newFuzzRig(f)
	f.Add("/_svc/cursor/PH/v1/x", "Bearer PH", []byte(`{"k":"PH"}`))
	f.Add("/_svc/cursor/-/v1/x", "", []byte("PHPH"))
	f.Add("/v1/messages", "PH", []byte(`{"messages":[]}`))
	f.Add("/_svc/cursor/nope/v1", "x", []byte{})
	f.Add("/v1/oauth/token", "", []byte(`{"refresh_token":"PH"}`))
	f.Add("/_svc/cursor/PH/v1/x?k=PH", "Basic PH", []byte(`{"webhook":"https://h/?k=PH"}`))
	f.Fuzz(func(t *testing.T, path, auth string, body []byte) {
		path = strings.ReplaceAll(path, "PH", r.ph)
		body = bytes.ReplaceAll(body, []byte("PH"), []byte(r.ph))
		auth = strings.ReplaceAll(auth, "PH", r.ph)
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \t\r\n#") {
			return
		}
		req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1"+path, bytes.NewReader(body))
		if err != nil {
			return
		}
		req = originForm(req)
		if strings.ContainsAny(auth, "\r\n\x00") {
			return
		}
		req.Header.Set("Authorization", auth)
		req.Header.Set("x-api-key", auth)
		r.lastBody.Store(nil)
		r.lastRest.Store(nil)
		rec := httptest.NewRecorder()
		r.p.ServeHTTP(rec, req)
		out := rec.Body.String()
		for _, vs := range rec.Header() {
			out += strings.Join(vs, " ")
		}
		if strings.Contains(out, r.real) {
			t.Fatalf("the real credential came back to the client for %q", path)
		}
		if got := r.lastRest.Load(); got != nil && strings.Contains(*got, r.real) {
			t.Fatalf("the real key reached the upstream outside Authorization: %q", *got)
		}
		if _, tok, _, ok := ParseEditorRoute(req.URL.Path); ok && tok == r.ph && len(body) <= MaxSubstituteBody {
			if got := r.lastBody.Load(); got != nil && bytes.Contains(*got, []byte(r.ph)) {
				t.Fatalf("a %d-byte body reached the upstream with the placeholder in it", len(body))
			}
		}
	})
}

// FuzzParseCredential reads arbitrary credential files: a credential with a
// value, or an error; never a panic.
func FuzzParseCredential(f *testing.F) {
	for _, s := range []string{"sk-ant-api03-x", `{"token":"t","expires_at":"2030-01-01T00:00:00Z"}`, `{"token":""}`, "a b", "", `{"expires_at":"soon","token":"x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCredential(b)
		if err == nil && c.Value == "" {
			t.Fatalf("%q parsed to an empty credential", b)
		}
	})
}

// echoPlan is what the echoing upstream does with one fuzz input: the
// credential it received, between Prefix and Suffix, in a header, a cookie
// and the body; the body split in two writes at Split; coded by Mode (plain,
// gzip, a coding the proxy cannot read, identity then gzip, gzip twice);
// and by the bits of Extra a declared trailer (1), undeclared trailers, one
// named by the key (2), and a 103 Early Hints holding the key (4).
type echoPlan struct {
	Prefix, Suffix []byte
	Split          int
	Mode, Extra    byte
}

// echoModes are the Content-Encoding lines of each Mode; the first is the
// only one whose answer is not refused (502) but for gzip.
var echoModes = [][]string{nil, {"gzip"}, {"br"}, {"identity", "gzip"}, {"gzip", "gzip"}}

// FuzzEchoingUpstream: whatever an upstream does with the real credential it
// was sent — echo it in headers, cookies, redirects, a body split anywhere,
// trailers declared or not, a 1xx's headers, gzip it once or twice, stack
// codings, wrap it in any bytes — none of it reaches the client, which is a
// real client of a real proxy listener on loopback.
func FuzzEchoingUpstream(f *testing.F) {
	const real = "sk-ant-api03-REALFUZZKEY-0123456789abcdef"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var pl echoPlan
		_ = json.NewDecoder(req.Body).Decode(&pl)
		key := req.Header.Get("x-api-key")
		body := append(append(append([]byte{}, pl.Prefix...), key...), pl.Suffix...)
		w.Header().Set("X-Echo", key)
		w.Header().Set("Set-Cookie", "k="+key)
		w.Header().Set("Location", "/?k="+key)
		serveEcho(w, key, body, pl.Split, gapEcho{declared: pl.Extra&1 != 0, undeclared: pl.Extra&2 != 0, early: pl.Extra&4 != 0,
			encodings: echoModes[int(pl.Mode)%len(echoModes)]})
	}))
	f.Cleanup(up.Close)
	home := f.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "credentials"), 0o700); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "credentials", "provider"), []byte(real), 0o600); err != nil {
		f.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.Agent.Runner = config.RunnerProcess // agents on the TCP listener
	cfg.Proxy.Upstream, cfg.Proxy.Credential = up.URL, "provider"
	ptr := &atomic.Pointer[Grants]{}
	p, err := New(Options{Config: &cfg, Home: home, Grants: ptr})
	if err != nil {
		f.Fatal(err)
	}
	srv := httptest.NewServer(p)
	f.Cleanup(srv.Close)
	f.Add([]byte(`{"text":"`), []byte(`"}`), 5, byte(0), byte(0))
	f.Add([]byte("data: "), []byte("\n\n"), 20, byte(1), byte(0))
	f.Add([]byte{}, []byte{}, 0, byte(2), byte(0))
	f.Add([]byte("sk-ant-api03-REAL"), []byte("sk-ant"), -3, byte(0), byte(0))
	// the bypasses of issue 24, one seed each
	f.Add([]byte(`{"t":"`), []byte(`"}`), 3, byte(0), byte(1)) // a declared trailer
	f.Add([]byte(`{"t":"`), []byte(`"}`), 3, byte(1), byte(2)) // undeclared trailers, gzip body
	f.Add([]byte(`{"t":"`), []byte(`"}`), 3, byte(0), byte(4)) // 103 Early Hints
	f.Add([]byte(`{"t":"`), []byte(`"}`), 3, byte(3), byte(0)) // identity then gzip
	f.Add([]byte(`{"t":"`), []byte(`"}`), 3, byte(4), byte(7)) // gzip twice, and all of the above
	f.Fuzz(func(t *testing.T, prefix, suffix []byte, split int, mode, extra byte) {
		// a trip revokes the grant: a fresh one for every input
		ph := NewPlaceholder("api_key", real)
		ptr.Store(&Grants{ph: {Placeholder: ph, TaskRef: "t", TaskID: "x", EnvVar: "ANTHROPIC_API_KEY"}})
		b, _ := json.Marshal(echoPlan{Prefix: prefix, Suffix: suffix, Split: split, Mode: mode, Extra: extra})
		v := callThrough(t, srv.URL, map[string]string{"x-api-key": ph}, string(b))
		m := int(mode) % len(echoModes)
		if v.holds(real) {
			t.Fatalf("the real credential reached the client (mode %d, extra %d, split %d): %q", m, extra, split, v.text)
		}
		if m >= 2 && v.status != http.StatusBadGateway {
			t.Fatalf("codings %q must be refused: %d %q", echoModes[m], v.status, v.text)
		}
		if v.status == 200 && !bytes.Contains(prefix, []byte(real[:8])) && !bytes.Contains(suffix, []byte(real[:8])) &&
			!strings.Contains(v.text, strings.Repeat("*", len(real))) {
			t.Fatalf("an echo that was scrubbed must show where (mode %d): %q", m, v.text)
		}
	})
}
