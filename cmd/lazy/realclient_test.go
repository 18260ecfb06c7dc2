package main

import (
	"context"
	"fmt"
	"io"
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

// claudePath finds the real client installed by `make test` (scripts/deps.sh).
func claudePath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("LAZY_TEST_CLAUDE")
	if p == "" {
		home, _ := os.UserHomeDir()
		p = filepath.Join(home, ".cache", "lazy", "claude-code", "node_modules", ".bin", "claude")
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the real claude CLI is missing at %s: make test installs it", p)
		}
		t.Skipf("the real claude CLI is not installed at %s (make deps installs it)", p)
	}
	return p
}

// useClaude switches a project to the real client with a credential kind.
func (p *project) useClaude(t *testing.T, claude, kind string) {
	cfgPath := filepath.Join(p.root, ".lazy", "config.toml")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(b), `driver = "script"`, fmt.Sprintf("driver = \"claude-code\"\ncommand = %q", claude), 1)
	cfg += fmt.Sprintf("\n[credentials.provider]\nkind = %q\n", kind)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if kind == "oauth" {
		// the shape `claude setup-token` prints: an API key under kind =
		// "oauth" is refused at start
		p.real = strings.Replace(p.real, "sk-ant-api03-", "sk-ant-oat01-", 1)
		if err := os.WriteFile(filepath.Join(p.home, "credentials", "provider"), []byte(p.real+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRealClientThroughProxy runs the npm claude CLI as a task's agent with
// each placeholder variable in turn: the upstream sees the real credential in
// the form that kind uses, never the placeholder.
func TestRealClientThroughProxy(t *testing.T) {
	claude := claudePath(t)
	for _, tc := range []struct{ kind, envVar, header string }{
		{"api_key", "ANTHROPIC_API_KEY", "x-api-key"},
		{"oauth", "CLAUDE_CODE_OAUTH_TOKEN", "Authorization"},
		{"auth_token", "ANTHROPIC_AUTH_TOKEN", "Authorization"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			p := newProject(t, "")
			p.useClaude(t, claude, tc.kind)
			p.lazy(0, "daemon", "start")
			p.lazy(0, "task", "new", "--code", "hi", "-m", "say hi")
			ti := p.waitStatus("hi", "blocked")
			reqs := p.stub.Requests()
			if len(reqs) == 0 {
				t.Fatal("the real client never reached the upstream")
			}
			want := p.real
			if tc.header == "Authorization" {
				want = "Bearer " + p.real
			}
			sawMessages := false
			for _, r := range reqs {
				if r.Path == "/v1/messages" {
					sawMessages = true
					if r.RawQuery != "beta=true" {
						t.Errorf("query not kept: %q", r.RawQuery)
					}
				}
				if got := r.Header.Get(tc.header); got != want {
					t.Errorf("%s %s: upstream got %s %q, want the real credential", r.Method, r.Path, tc.header, got)
				}
				for k, vs := range r.Header {
					for _, v := range vs {
						if strings.Contains(v, "-svc-") {
							t.Errorf("a placeholder reached the upstream in %s", k)
						}
					}
				}
			}
			if !sawMessages {
				t.Error("no POST /v1/messages reached the upstream")
			}
			out := p.lazy(0, "task", "show", "hi")
			if !strings.Contains(out, "stub answer to: say hi") {
				t.Errorf("the turn's result is not the model's answer:\n%s", out)
			}
			if ti.Turns != 1 {
				t.Errorf("turns %d", ti.Turns)
			}
		})
	}
}

// TestLeakHunt runs real turns (the scripted agent, and the real client when
// installed) and then searches everything an agent or an operator can see for
// the real credential: every process's env and argv while an agent runs, the
// daemon logs, the worktrees and agent homes, the DB, the grant registry, the
// pages, the traffic stream, and the docker argv the runner would build.
func TestLeakHunt(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := p.startWatch(ctx, "--net")

	p.lazy(0, "task", "new", "--code", "leak", "-m", "@write a.txt x\n@commit a\n@sleep 2s\n@model 3")
	// while the agent runs: every process's environ and cmdline
	deadline := time.Now().Add(30 * time.Second)
	scanned := false
	for time.Now().Before(deadline) && !scanned {
		if p.show("leak").Turns == 1 {
			time.Sleep(500 * time.Millisecond)
			procs, _ := filepath.Glob("/proc/[0-9]*")
			sawAgent := false
			for _, pd := range procs {
				for _, f := range []string{"environ", "cmdline"} {
					b, err := os.ReadFile(filepath.Join(pd, f))
					if err != nil {
						continue
					}
					if strings.Contains(string(b), p.real) {
						t.Errorf("the real credential is in %s/%s", pd, f)
					}
					if f == "environ" && strings.Contains(string(b), "-svc-") && strings.Contains(string(b), "HOME="+p.paths.Agents) {
						sawAgent = true
					}
				}
			}
			if !sawAgent {
				t.Error("no agent process with a placeholder env was found while the turn ran: the scan proves nothing")
			}
			scanned = true
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.waitStatus("leak", "blocked")
	if claude := os.Getenv("LAZY_TEST_CLAUDE"); claude != "" {
		if _, err := os.Stat(claude); err == nil {
			p.lazy(0, "comment", "leak", "-m", "and again")
			p.waitStatus("leak", "blocked")
		}
	}
	for _, path := range []string{"/", "/tasks/leak", "/api/tasks", "/api/actors", "/metrics"} {
		resp, err := p.get(path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), p.real) {
			t.Errorf("the real credential is on the page %s", path)
		}
		p.keep("page"+strings.ReplaceAll(path, "/", "_")+".html", string(b))
	}
	cancel()
	var stream strings.Builder
	for l := range w.lines {
		stream.WriteString(l + "\n")
	}
	if !strings.Contains(stream.String(), "net> ") || !strings.Contains(stream.String(), " leak ") {
		t.Errorf("the traffic stream shows no attributed net> line:\n%s", stream.String())
	}
	if strings.Contains(stream.String(), p.real) {
		t.Error("the real credential is in the traffic stream")
	}
	p.keep("watch-net.txt", stream.String())
	p.lazy(0, "daemon", "stop")

	// files: state dir (logs, DB, registry, worktrees, agent homes) and the project
	files, hits := fileLeaks(t, []*project{p}, p.real)
	if files < 10 {
		t.Errorf("only %d files searched: the hunt is not looking where it should", files)
	}
	reg, _ := os.ReadFile(p.paths.ProxyTokens)
	if !strings.Contains(string(reg), "sk-ant-api03-svc-") {
		t.Error("the grant registry holds no placeholder: the hunt ran without agents")
	}
	t.Logf("leak hunt: %d files, the process table, 5 pages and the traffic stream searched; %d hits", files, hits)
}

// TestDockerRunnerArgv: no Docker engine runs here, so a stand-in `docker`
// on the daemon's PATH answers `docker info` and records the `docker run`
// argv the runner built. The argv must carry placeholders only.
func TestDockerRunnerArgv(t *testing.T) {
	p := newProject(t, "docker")
	bin := t.TempDir()
	record := filepath.Join(bin, "argv")
	script := "#!/bin/sh\nif [ \"$1\" = info ]; then echo 28.2.2; exit 0; fi\nprintf '%s\\n' \"$@\" > " + record + "\necho 'no engine in tests' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "docker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for i, kv := range p.env {
		if strings.HasPrefix(kv, "PATH=") {
			p.env[i] = "PATH=" + bin + ":" + strings.TrimPrefix(kv, "PATH=")
		}
	}
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "dock", "-m", "hello")
	ti := p.waitStatus("dock", "failed")
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatalf("docker run was never called (%s)", ti.FailReason)
	}
	argv := strings.Split(strings.TrimSpace(string(b)), "\n")
	joined := strings.Join(argv, " ")
	if strings.Contains(joined, p.real) {
		t.Fatal("the real credential is in the docker argv")
	}
	for _, want := range []string{"run --rm -i --init --network none --cap-drop ALL --security-opt no-new-privileges --read-only --tmpfs /tmp:",
		"--name lazy-dock-1 --user ", "--ulimit nofile=4096:4096 --pids-limit 2048 --memory 8589934592",
		"-v " + ti.Worktree + ":" + ti.Worktree, "-v " + ti.Worktree + "/.git:" + ti.Worktree + "/.git:ro", "-w " + ti.Worktree,
		":/run/lazy/proxy.sock -v " + lazyBin + ":/run/lazy/lazy:ro",
		"-e ANTHROPIC_API_KEY=sk-ant-api03-svc-", "-e HOME=" + filepath.Join(p.paths.Agents, "dock", "home"),
		"lazy-agent:latest /run/lazy/lazy sandbox-exec --listen 127.0.0.1:", "--socket /run/lazy/proxy.sock -- " + lazyBin + " script-agent -p --output-format json --permission-mode acceptEdits"} {
		if !strings.Contains(joined, want) {
			t.Errorf("docker argv lacks %q:\n%s", want, joined)
		}
	}
	if strings.HasSuffix(joined, " hello") {
		t.Error("the prompt is in argv: it goes on standard input")
	}
	// nothing secret is mounted: not the lazy home, the state dir, the credentials
	for _, bad := range []string{"-v " + p.home + ":", "-v " + p.paths.State + ":", "credentials", "--network host", "auth-token", "proxy-tokens", "--user 0:"} {
		if strings.Contains(joined, bad) {
			t.Errorf("docker argv holds %q:\n%s", bad, joined)
		}
	}
	if !strings.Contains(ti.FailReason, "no engine in tests") {
		t.Errorf("the failure must carry the runner's message: %s", ti.FailReason)
	}
}

// TestRealClientAsk: with the claude CLI as the agent, an ask resumes the
// task's session in plan mode and the answer lands in the thread.
func TestRealClientAsk(t *testing.T) {
	claude := claudePath(t)
	p := newProject(t, "") // the default runner: the real client inside the sandbox
	p.useClaude(t, claude, "api_key")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "cl", "-m", "remember the word PINEAPPLE")
	ti := p.waitStatus("cl", "blocked")
	// what the real client's calls cost is counted exactly as the stub
	// reported it (the last call's count may land just after the turn ends)
	calls, in, outTok := p.stub.Reported()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		u := p.show("cl").Usage
		if u != nil && u.InputTokens == in && u.OutputTokens == outTok && u.Requests >= calls {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage %+v, the stub reported %d calls, %d in, %d out", u, calls, in, outTok)
		}
	}
	if calls == 0 {
		t.Fatal("the real client made no model call")
	}
	// the stub model makes no edits, so the test commits a line to anchor on
	// (in the task's repository, then imported as after a work turn)
	gitxtest.Commit(t, ti.Worktree, "a line to discuss", map[string]string{"notes.txt": "first line\n"})
	if _, err := (gitx.TaskRepo{Project: p.root, Worktree: ti.Worktree, Branch: ti.Branch, Parent: ti.Parent}).Import(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.stub.Reset()
	a := p.post("cl", api.PostCommentArgs{Body: "What word did I ask you to remember?", File: "notes.txt", Line: 1, Side: "new", Intent: "ask"})
	pl := p.waitThreads("cl", "the real client's answer", func(pl review.Payload) bool {
		return find(pl, a.ID).AskState == review.AskAnswered || find(pl, a.ID).AskState == review.AskFailed
	})
	if got := find(pl, a.ID); got.AskState != review.AskAnswered {
		t.Fatalf("ask: %s %q", got.AskState, got.AskError)
	}
	var reply review.ReviewComment
	for _, th := range pl.Threads {
		if th.ID == a.ThreadID && len(th.Messages) == 2 {
			reply = th.Messages[1]
		}
	}
	if reply.Actor != review.Agent || !strings.Contains(reply.Body, "stub answer to:") || !strings.Contains(reply.Body, "notes.txt") {
		t.Fatalf("the answer in the thread: %+v", reply)
	}
	// the ask resumed the session: the upstream saw the first turn's prompt in the conversation
	resumed := false
	for _, r := range p.stub.Requests() {
		if r.Path == "/v1/messages" && strings.Contains(string(r.Body), "PINEAPPLE") && strings.Contains(string(r.Body), "What word did I ask you") {
			resumed = true
		}
	}
	if !resumed {
		t.Error("the ask did not carry the earlier conversation: the session was not resumed")
	}
	out := p.lazy(0, "task", "show", "cl")
	if !strings.Contains(out, "ask 1 (ask) done") {
		t.Errorf("task show:\n%s", out)
	}
}

// fileLeaks searches every file of the projects' homes (state dirs, logs,
// DBs, worktrees, agent homes) and roots for the secrets; each project's
// own credentials dir, where the real credential lives, is skipped. It
// returns the files searched and the hits.
func fileLeaks(t *testing.T, ps []*project, secrets ...string) (files, hits int) {
	t.Helper()
	for _, p := range ps {
		credDir := filepath.Join(p.home, "credentials")
		for _, root := range []string{p.home, p.root} {
			_ = filepath.Walk(root, func(path string, fi os.FileInfo, err error) error {
				if err != nil || fi.IsDir() || strings.HasPrefix(path, credDir) {
					return nil
				}
				files++
				b, err := os.ReadFile(path)
				for _, s := range secrets {
					if err == nil && strings.Contains(string(b), s) {
						hits++
						t.Errorf("a secret is in %s", path)
					}
				}
				return nil
			})
		}
	}
	return files, hits
}
