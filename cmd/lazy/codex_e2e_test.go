package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lazy/api"
	"lazy/gitx"
	"lazy/gitx/gitxtest"
	"lazy/review"
)

// codexPath finds OpenAI's codex CLI installed by `make test`
// (scripts/deps.sh, LAZY_TEST_CODEX in the Makefile).
func codexPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("LAZY_TEST_CODEX")
	if p == "" {
		home, _ := os.UserHomeDir()
		p = filepath.Join(home, ".cache", "lazy", "agents", "node_modules", ".bin", "codex")
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the real codex CLI is missing at %s: make test installs it", p)
		}
		t.Skipf("the real codex CLI is not installed at %s (make deps installs it)", p)
	}
	return p
}

// useCodex switches a project to the codex driver: [proxy.openai] is the
// stub upstream with [credentials.openai], a real-shaped project key.
func (p *project) useCodex(t *testing.T, codex string) string {
	t.Helper()
	cfgPath := filepath.Join(p.root, ".lazy", "config.toml")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(b), `driver = "script"`, fmt.Sprintf("driver = \"codex\"\ncommand = %q", codex), 1)
	cfg = strings.Replace(cfg, "[proxy]\n", fmt.Sprintf("[proxy.openai]\nupstream = %q\ncredential = \"provider\"\n[proxy]\n", p.upstream), 1)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	real := "sk-proj-REALOPENAI" + strings.Repeat("q", 40)
	if err := os.WriteFile(filepath.Join(p.home, "credentials", "openai"), []byte(real+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return real
}

// TestRealCodexThroughProxy runs the npm codex CLI as a task's agent in the
// default sandbox: a work turn and an ask turn (resuming the session)
// complete through the proxy's OpenAI route; the upstream sees the real key
// and the agent (env, argv, home, worktree) only the placeholder; usage is
// what the stub reported; a spent budget is refused in OpenAI's error
// shape; the real key echoed in a reply trips the wire.
func TestRealCodexThroughProxy(t *testing.T) {
	codex := codexPath(t)
	p := newProject(t, "") // the default runner: bwrap
	// one origin may not carry two credentials: the Anthropic primary is
	// left on another (unused) origin, the stub is [proxy.openai]
	cfgPath := filepath.Join(p.root, ".lazy", "config.toml")
	b, _ := os.ReadFile(cfgPath)
	if err := os.WriteFile(cfgPath, []byte(strings.Replace(string(b), fmt.Sprintf("upstream = %q", p.upstream), `upstream = "http://127.0.0.1:9"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	real := p.useCodex(t, codex)
	p.stub.EventDelay = 100 * time.Millisecond // the turn lasts long enough to look at its processes
	p.lazy(0, "daemon", "start")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lines := p.watchNet(ctx)

	p.lazy(0, "task", "new", "--code", "cx", "-m", "remember the word PINEAPPLE")
	// while codex runs: every process's environ and cmdline
	sawAgent := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && !sawAgent; time.Sleep(50 * time.Millisecond) {
		procs, _ := filepath.Glob("/proc/[0-9]*")
		for _, pd := range procs {
			for _, f := range []string{"environ", "cmdline"} {
				b, err := os.ReadFile(filepath.Join(pd, f))
				if err != nil {
					continue
				}
				if strings.Contains(string(b), real) {
					t.Errorf("the real OpenAI key is in %s/%s", pd, f)
				}
				if f == "environ" && strings.Contains(string(b), "OPENAI_API_KEY=sk-proj-svc-") {
					sawAgent = true
				}
			}
		}
		if st := p.show("cx").Status; st != "running" && !sawAgent {
			t.Fatalf("the turn ended (%s) before its processes were seen", st)
		}
	}
	if !sawAgent {
		t.Fatal("no agent process with the placeholder OPENAI_API_KEY was seen while the turn ran")
	}
	ti := p.waitStatus("cx", "blocked")
	out := p.lazy(0, "task", "show", "cx")
	if !strings.Contains(out, "stub answer to: remember the word PINEAPPLE") {
		t.Fatalf("the work turn's result is not the model's answer:\n%s", out)
	}
	calls := 0
	for _, r := range p.stub.Requests() {
		if r.Path != "/v1/responses" {
			t.Errorf("codex called %s %s upstream", r.Method, r.Path)
			continue
		}
		calls++
		if got := r.Header.Get("Authorization"); got != "Bearer "+real {
			t.Errorf("the upstream got Authorization %q, want the real key", got)
		}
		for k, vs := range r.Header {
			for _, v := range vs {
				if strings.Contains(v, "svc-") {
					t.Errorf("a placeholder reached the upstream in %s", k)
				}
			}
		}
	}
	if calls == 0 {
		t.Fatal("no POST /v1/responses reached the upstream")
	}
	// usage: exactly what the stub reported (OpenAI's input counts the
	// cached tokens; lazy records them apart)
	n, in, outTok := p.stub.Reported()
	cached := p.stub.ReportedCached()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		u := p.show("cx").Usage
		if u != nil && u.InputTokens+u.CacheReadInputTokens == in && u.CacheReadInputTokens == cached && u.OutputTokens == outTok && u.Requests >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage %+v, the stub reported %d calls, %d in (%d cached), %d out", u, n, in, cached, outTok)
		}
	}
	if reg, _ := os.ReadFile(p.paths.ProxyTokens); !strings.Contains(string(reg), `"placeholder": "sk-proj-svc-`) || strings.Contains(string(reg), real) {
		t.Errorf("the grant registry holds no placeholder shaped like the project key:\n%s", reg)
	}
	// the client's configuration in the agent's home: the proxy, never the key
	conf, err := os.ReadFile(filepath.Join(p.paths.Agents, "cx", "home", ".codex", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), `wire_api = "responses"`) || !strings.Contains(string(conf), `env_key = "OPENAI_API_KEY"`) || strings.Contains(string(conf), real) {
		t.Errorf("codex's config.toml:\n%s", conf)
	}

	// an ask resumes codex's session, read-only
	gitxtest.Commit(t, ti.Worktree, "a line to discuss", map[string]string{"notes.txt": "first line\n"})
	if _, err := (gitx.TaskRepo{Project: p.root, Worktree: ti.Worktree, Branch: ti.Branch, Parent: ti.Parent}).Import(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.stub.Reset()
	a := p.post("cx", api.PostCommentArgs{Body: "What word did I ask you to remember?", File: "notes.txt", Line: 1, Side: "new", Intent: "ask"})
	pl := p.waitThreads("cx", "codex's answer", func(pl review.Payload) bool {
		return find(pl, a.ID).AskState == review.AskAnswered || find(pl, a.ID).AskState == review.AskFailed
	})
	if got := find(pl, a.ID); got.AskState != review.AskAnswered {
		t.Fatalf("ask: %s %q", got.AskState, got.AskError)
	}
	resumed := false
	for _, r := range p.stub.Requests() {
		if r.Path == "/v1/responses" && strings.Contains(string(r.Body), "PINEAPPLE") && strings.Contains(string(r.Body), "What word did I ask you") {
			resumed = true
		}
	}
	if !resumed {
		t.Error("the ask did not carry the earlier conversation: codex's session was not resumed")
	}

	// a spent budget: the next call is refused before it leaves, in
	// OpenAI's error shape, and codex's turn fails saying so
	p.lazy(0, "task", "budget", "cx", "--tokens", "1")
	p.stub.Reset()
	p.lazy(0, "comment", "cx", "-m", "go on")
	ti = p.waitStatus("cx", "failed")
	if len(p.stub.Requests()) != 0 {
		t.Errorf("%d calls reached the upstream over the budget", len(p.stub.Requests()))
	}
	got := strings.Join(collect(lines, 2*time.Second), "\n")
	if !strings.Contains(got, "POST /v1/responses -> 429") || !strings.Contains(got, "refused: budget_exceeded") {
		t.Errorf("watch --net:\n%s", got)
	}
	// codex read the refusal as OpenAI's insufficient_quota (its own
	// words for it, and no retry) and the task says why
	recs := p.showAll("cx").TurnRecords
	last := recs[len(recs)-1]
	if !strings.Contains(last.Output, "Quota exceeded") || !strings.Contains(ti.FailReason, "token budget used up") || !strings.Contains(ti.FailReason, "1 calls refused") {
		t.Errorf("the refused turn: %s\n%s", ti.FailReason, last.Output)
	}
	t.Logf("codex on the refusal: %s", lastLine(last.Output))

	// the real key echoed by the upstream: masked, and the wire trips
	p.lazy(0, "task", "budget", "cx", "--tokens", "0")
	p.stub.Reply = func(string) string { return "your key is " + real }
	p.lazy(0, "unblock", "cx", "-m", "what is your key?")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ti = p.show("cx")
		if ti.Tripwire != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no tripwire: status %s %s", ti.Status, ti.FailReason)
		}
	}
	if !strings.Contains(ti.Tripwire, "real_credential_in_response") {
		t.Errorf("tripwire %q", ti.Tripwire)
	}
	p.lazy(0, "daemon", "stop")

	// nothing an agent or an operator sees holds the real key
	files, hits := fileLeaks(t, []*project{p}, real)
	t.Logf("codex: %d files searched, %d hits", files, hits)
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return ls[len(ls)-1]
}
