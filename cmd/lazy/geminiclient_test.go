package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"lazy/api"
	"lazy/gitx"
	"lazy/gitx/gitxtest"
	"lazy/review"
)

// geminiPath finds the real gemini CLI installed by `make test`
// (scripts/deps.sh), or LAZY_TEST_GEMINI.
func geminiPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("LAZY_TEST_GEMINI")
	if p == "" {
		home, _ := os.UserHomeDir()
		p = filepath.Join(home, ".cache", "lazy", "agents", "node_modules", ".bin", "gemini")
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the real gemini CLI is missing at %s: make test installs it", p)
		}
		t.Skipf("the real gemini CLI is not installed at %s (make deps installs it)", p)
	}
	return p
}

// echoKey is the prompt on which the test's Gemini upstream answers with
// the key it was sent (an upstream that leaks what it got).
const echoKey = "ECHO-THE-KEY"

// useGemini switches a project to the gemini driver (asDefault: as
// agent.driver; else for tasks made with --driver gemini) with its own upstream:
// the stub behind a second listener (one origin carries one credential),
// which echoes the key on echoKey. It returns the real Gemini key.
func (p *project) useGemini(t *testing.T, gemini string, asDefault bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		if bytes.Contains(b, []byte(echoKey)) && !bytes.Contains(b, []byte("responseJsonSchema")) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"the key I got is %s"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1}}`, r.Header.Get("x-goog-api-key"))
			return
		}
		p.stub.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	real := "AIza" + "REALgeminiSECRET" + strings.Repeat("k", 19) // 39 characters
	if err := os.WriteFile(filepath.Join(p.home, "credentials", "gemini"), []byte(real+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(p.root, ".lazy", "config.toml")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b)
	if asDefault {
		cfg = strings.Replace(cfg, `driver = "script"`, fmt.Sprintf("driver = \"gemini\"\ncommand = %q", gemini), 1)
	}
	cfg += fmt.Sprintf("\n[proxy.gemini]\nupstream = %q\ncredential = \"provider\"\n", srv.URL)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return real
}

// scanAgents reads every process's environ and cmdline until stop is
// closed: the real key in any is an error; it reports whether an agent
// process with the Gemini placeholder in its env was seen.
func scanAgents(t *testing.T, p *project, real string, stop <-chan struct{}) <-chan bool {
	seen := make(chan bool, 1)
	go func() {
		saw := false
		defer func() { seen <- saw }()
		for {
			procs, _ := filepath.Glob("/proc/[0-9]*")
			for _, pd := range procs {
				for _, f := range []string{"environ", "cmdline"} {
					b, err := os.ReadFile(filepath.Join(pd, f))
					if err != nil {
						continue
					}
					if bytes.Contains(b, []byte(real)) {
						t.Errorf("the real Gemini key is in %s/%s", pd, f)
					}
					if f == "environ" && bytes.Contains(b, []byte("GEMINI_API_KEY=AIzasvc-")) && bytes.Contains(b, []byte("HOME="+p.paths.Agents)) {
						saw = true
					}
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return seen
}

// TestRealGeminiThroughProxy runs the npm gemini CLI as a task's agent in
// the default sandbox: a work turn and an ask turn (resuming its session)
// go through the proxy; the upstream sees the real key, the agent only a
// placeholder; usage is what the stub reported; a budget refusal reaches
// the client in Google's error shape; an echoed key trips the wire.
func TestRealGeminiThroughProxy(t *testing.T) {
	gemini := geminiPath(t)
	p := newProject(t, "") // the default runner: bwrap
	real := p.useGemini(t, gemini, true)
	p.lazy(0, "daemon", "start")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	w := p.startWatch(ctx, "--net")

	stop := make(chan struct{})
	seen := scanAgents(t, p, real, stop)
	p.lazy(0, "task", "new", "--code", "gem", "-m", "remember the word PINEAPPLE")
	ti := p.waitStatus("gem", "blocked")
	close(stop)
	if !<-seen {
		t.Error("no agent process with GEMINI_API_KEY=AIzasvc-… in its env was seen while the turn ran: the scan proves nothing")
	}
	out := p.lazy(0, "task", "show", "gem")
	if !strings.Contains(out, "stub answer to: remember the word PINEAPPLE") {
		t.Errorf("the turn's result is not the model's answer:\n%s", out)
	}
	reqs := p.stub.Requests()
	gen := 0
	for _, r := range reqs {
		if !strings.HasPrefix(r.Path, "/v1beta/models/") {
			t.Errorf("the client called %s %s", r.Method, r.Path)
			continue
		}
		gen++
		if got := r.Header.Get("x-goog-api-key"); got != real {
			t.Errorf("%s: upstream got x-goog-api-key %q, want the real key", r.Path, got)
		}
		if strings.Contains(r.RawQuery, "key") {
			t.Errorf("%s: a key in the query %q", r.Path, r.RawQuery)
		}
		for k, vs := range r.Header {
			for _, v := range vs {
				if strings.Contains(v, "svc-") {
					t.Errorf("a placeholder reached the upstream in %s", k)
				}
			}
		}
	}
	if gen == 0 {
		t.Fatal("the real client never reached the Gemini upstream")
	}
	// usage: exactly what the stub reported (the last call's row may land
	// just after the turn ends)
	calls, in, outTok := p.stub.Reported()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		u := p.show("gem").Usage
		if u != nil && u.InputTokens == in && u.OutputTokens == outTok && u.Requests >= calls {
			t.Logf("usage: %d calls, %d in, %d out, as the stub reported", u.Requests, u.InputTokens, u.OutputTokens)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage %+v, the stub reported %d calls, %d in, %d out", u, calls, in, outTok)
		}
	}
	// the client's configuration is the daemon's, in the task's home
	settings, err := os.ReadFile(filepath.Join(p.paths.Agents, "gem", "home", ".gemini", "settings.json"))
	if err != nil || !strings.Contains(string(settings), `"gemini-api-key"`) {
		t.Errorf("settings.json in the agent's home: %v %s", err, settings)
	}

	// the ask: plan mode, resuming the session, the answer in the thread
	gitxtest.Commit(t, ti.Worktree, "a line to discuss", map[string]string{"notes.txt": "first line\n"})
	if _, err := (gitx.TaskRepo{Project: p.root, Worktree: ti.Worktree, Branch: ti.Branch, Parent: ti.Parent}).Import(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.stub.Reset()
	a := p.post("gem", api.PostCommentArgs{Body: "What word did I ask you to remember?", File: "notes.txt", Line: 1, Side: "new", Intent: "ask"})
	pl := p.waitThreads("gem", "the real client's answer", func(pl review.Payload) bool {
		return find(pl, a.ID).AskState == review.AskAnswered || find(pl, a.ID).AskState == review.AskFailed
	})
	if got := find(pl, a.ID); got.AskState != review.AskAnswered {
		t.Fatalf("ask: %s %q", got.AskState, got.AskError)
	}
	resumed := false
	for _, r := range p.stub.Requests() {
		if strings.Contains(string(r.Body), "PINEAPPLE") && strings.Contains(string(r.Body), "What word did I ask you") {
			resumed = true
		}
	}
	if !resumed {
		t.Error("the ask did not carry the earlier conversation: the session was not resumed")
	}

	// a budget the first call uses up: the next is refused in Google's shape
	p.lazy(0, "task", "new", "--code", "bud", "--budget-tokens", "1", "-m", "spend it")
	bud := p.waitStatus("bud", "failed")
	if !strings.Contains(bud.FailReason, "token budget used up") {
		t.Errorf("fail reason %q", bud.FailReason)
	}
	var detail api.TaskDetail
	if err := p.rpc().Call(context.Background(), "taskShow", map[string]any{"task": "bud"}, &detail); err != nil || len(detail.Turns) == 0 {
		t.Fatalf("taskShow bud: %v %+v", err, detail)
	}
	// the client reports the refusal it got: Google's status and the
	// message that tells it not to retry
	if o := detail.Turns[0].Output; !strings.Contains(o, "remaining limit: 0") || !strings.Contains(o, "429") {
		t.Errorf("the client did not get the budget refusal in Google's shape; its output:\n%s", o)
	} else {
		p.keep("gemini-budget-turn.txt", o)
	}

	// an upstream that echoes the key: masked, the wire trips
	p.lazy(0, "task", "new", "--code", "echo", "-m", echoKey)
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		e := p.show("echo")
		if e.Tripwire != "" {
			if !strings.Contains(e.Tripwire, "real_credential_in_response") {
				t.Errorf("tripwire %q", e.Tripwire)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no tripwire on the echoed key: %+v", e)
		}
	}
	p.waitStatus("echo", "failed")
	cancel()
	var stream strings.Builder
	for l := range w.lines {
		stream.WriteString(l + "\n")
	}
	st := stream.String()
	for _, want := range []string{" gem - POST /v1beta/models/", " bud - POST /v1beta/models/", "-> 429", "refused: budget_exceeded", " echo - POST /v1beta/models/", "tripwire: real_credential_in_response"} {
		if !strings.Contains(st, want) {
			t.Errorf("the traffic stream lacks %q:\n%s", want, st)
		}
	}
	p.keep("gemini-watch-net.txt", st)
	p.lazy(0, "daemon", "stop")

	// the leak hunt: the key in no file of the state dir, worktrees, homes
	files, hits := fileLeaks(t, []*project{p}, real)
	reg, _ := os.ReadFile(p.paths.ProxyTokens)
	var grants []struct {
		Placeholder string `json:"placeholder"`
	}
	_ = json.Unmarshal(reg, &grants)
	minted := false
	for _, g := range grants {
		minted = minted || (strings.HasPrefix(g.Placeholder, "AIzasvc-") && len(g.Placeholder) == 39)
	}
	if !minted {
		t.Errorf("the grant registry holds no AIza-shaped placeholder: %s", reg)
	}
	t.Logf("leak hunt: %d files and the process table searched; %d hits", files, hits)
}

// TestRealGeminiTaskDriver: under agent.driver = "script", a task made
// with --driver gemini runs the gemini CLI (found on the daemon's PATH)
// through the Gemini route, beside a task of the scripted agent.
func TestRealGeminiTaskDriver(t *testing.T) {
	gemini := geminiPath(t)
	p := newProject(t, "")
	real := p.useGemini(t, gemini, false)
	for i, kv := range p.env {
		if strings.HasPrefix(kv, "PATH=") {
			p.env[i] = "PATH=" + filepath.Dir(gemini) + ":" + strings.TrimPrefix(kv, "PATH=")
		}
	}
	p.lazy(0, "daemon", "start")
	p.lazy(1, "task", "new", "--code", "bad", "--driver", "nope", "-m", "x")
	p.lazy(0, "task", "new", "--code", "g", "--driver", "gemini", "-m", "say hi")
	p.lazy(0, "task", "new", "--code", "s", "-m", "@answer scripted")
	g := p.waitStatus("g", "blocked")
	p.waitStatus("s", "blocked")
	if !strings.HasPrefix(g.Agent, "gemini") {
		t.Errorf("task g's agent %q, want gemini", g.Agent)
	}
	if s := p.show("s"); !strings.HasPrefix(s.Agent, "script") {
		t.Errorf("task s's agent %q, want the config's script", s.Agent)
	}
	// the task and review pages say which agent
	for _, page := range []string{"/tasks/" + g.ID, "/review/" + g.ID} {
		if code, html := p.browserPage(page); code != 200 || !regexp.MustCompile(`class="agent">(<code>)?gemini`).MatchString(html) {
			t.Errorf("%s: %d, does not name the agent gemini", page, code)
		}
	}
	if out := p.lazy(0, "task", "show", "g"); !strings.Contains(out, "stub answer to: say hi") {
		t.Errorf("task g:\n%s", out)
	}
	sawGemini, sawAnthropic := false, false
	for _, r := range p.stub.Requests() {
		switch {
		case strings.HasPrefix(r.Path, "/v1beta/"):
			sawGemini = true
			if r.Header.Get("x-goog-api-key") != real {
				t.Errorf("%s: the upstream did not get the real Gemini key", r.Path)
			}
		case r.Path == "/v1/messages":
			sawAnthropic = true
		}
	}
	if !sawGemini || !sawAnthropic {
		t.Errorf("gemini calls %v, scripted agent's calls %v: want both", sawGemini, sawAnthropic)
	}
}
