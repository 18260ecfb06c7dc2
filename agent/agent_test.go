package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"lazy/gitx/gitxtest"
	"lazy/scriptagent"
	"lazy/scriptagent/agenttest"
	"lazy/stubmodel"
)

// TestMain lets the test binary play the scripted agent.
func TestMain(m *testing.M) { agenttest.Main(m) }

func self(t *testing.T) []string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe, "script-agent"}
}

func requireBwrap(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("bwrap is missing on CI: make test installs bubblewrap")
		}
		t.Skip("bwrap not installed (apt-get install bubblewrap)")
	}
	if out, err := exec.Command("bwrap", "--ro-bind", "/", "/", "true").CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("bwrap cannot create a sandbox here: %v %s", err, out)
		}
		t.Skipf("bwrap cannot create a sandbox here: %v %s", err, out)
	}
}

func TestEnvPassesOnlyAllowed(t *testing.T) {
	env := Env([]string{"PATH=/bin", "USER=u", "HOME=/root", "SECRET=x", "ANTHROPIC_API_KEY=real", "LANG=C", "TERM=xterm", "TZ=UTC"},
		"/state/agents/t/home", "http://127.0.0.1:1", map[string]string{EnvAPIKey: "sk-ant-svc-abc"})
	want := map[string]string{"PATH": "/bin", "USER": "u", "LANG": "C", "TERM": "xterm", "TZ": "UTC", "HOME": "/state/agents/t/home",
		"ANTHROPIC_BASE_URL": "http://127.0.0.1:1", "ANTHROPIC_API_KEY": "sk-ant-svc-abc"}
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := got[k]; dup {
			t.Errorf("%s set twice", k)
		}
		got[k] = v
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	if _, ok := got["SECRET"]; ok {
		t.Error("the daemon's own env leaked into the agent")
	}
}

func TestArgv(t *testing.T) {
	d := ClaudeCode{}
	if got := strings.Join(d.WorkArgv("do it", ""), " "); got != "-p --output-format json --permission-mode acceptEdits do it" {
		t.Errorf("work argv: %q", got)
	}
	if got := strings.Join(d.WorkArgv("do it", "S1"), " "); got != "-p --output-format json --resume S1 --permission-mode acceptEdits do it" {
		t.Errorf("resumed work argv: %q", got)
	}
	if got := strings.Join(d.AskArgv("why?", "S1"), " "); got != "-p --output-format json --resume S1 --permission-mode plan why?" {
		t.Errorf("ask argv: %q", got)
	}
	if got := d.WorkArgv("-rf", ""); got[len(got)-1] != " -rf" {
		t.Errorf("a prompt starting with - must not be a flag: %q", got)
	}
}

func TestParseResultSkipsNotices(t *testing.T) {
	out := []byte("Notice: something about the base URL\n{\"type\":\"result\",\"result\":\"hi\",\"session_id\":\"abc\",\"is_error\":false}\n")
	r, err := ClaudeCode{}.ParseResult(out)
	if err != nil || r.Text != "hi" || r.SessionID != "abc" {
		t.Fatalf("got %+v %v", r, err)
	}
	if _, err := (ClaudeCode{}).ParseResult([]byte("no json here")); err == nil {
		t.Error("want an error without a JSON result")
	}
}

type turnEnv struct {
	stub     *stubmodel.Server
	url      string
	worktree string
	home     string
}

func newTurnEnv(t *testing.T) turnEnv {
	stub := stubmodel.New()
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	repo := gitxtest.NewRepo(t, nil)
	home := filepath.Join(t.TempDir(), "home")
	return turnEnv{stub: stub, url: srv.URL, worktree: repo, home: home}
}

func (e turnEnv) spec(t *testing.T, prompt string) Spec {
	return Spec{Command: self(t), Args: ClaudeCode{}.WorkArgv(prompt, ""), Dir: e.worktree, Home: e.home,
		Env: Env(os.Environ(), e.home, e.url, map[string]string{EnvAPIKey: "sk-ant-api03-svc-placeholder"}), Timeout: time.Minute}
}

func checkTurn(t *testing.T, e turnEnv, r Runner) {
	out, err := r.Run(context.Background(), e.spec(t, "add a file\n@write hello.txt hi there\\n\n@commit add hello"))
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.Combined())
	}
	res, err := ClaudeCode{}.ParseResult(out.Stdout)
	if err != nil || res.SessionID == "" || !strings.Contains(res.Text, "stub answer") {
		t.Fatalf("result: %+v %v", res, err)
	}
	b, err := os.ReadFile(filepath.Join(e.worktree, "hello.txt"))
	if err != nil || string(b) != "hi there\n" {
		t.Fatalf("hello.txt: %q %v", b, err)
	}
	if log := gitxtest.Git(t, e.worktree, "log", "--oneline"); !strings.Contains(log, "add hello") {
		t.Errorf("no commit: %s", log)
	}
	reqs := e.stub.Requests()
	if len(reqs) != 1 || reqs[0].Header.Get("x-api-key") != "sk-ant-api03-svc-placeholder" || reqs[0].RawQuery != "beta=true" {
		t.Fatalf("stub saw %+v", reqs)
	}
	turns, err := scriptagent.ReadTurns(e.home)
	if err != nil || len(turns) != 1 {
		t.Fatalf("turn log: %v %v", turns, err)
	}
	// resume the session read-only: the agent sees its history and writes nothing
	ask := e.spec(t, "why?\n@write other.txt nope")
	ask.Args = ClaudeCode{}.AskArgv("why?\n@write other.txt nope", res.SessionID)
	if out, err := r.Run(context.Background(), ask); err != nil {
		t.Fatalf("ask: %v %s", err, out.Combined())
	}
	if _, err := os.Stat(filepath.Join(e.worktree, "other.txt")); err == nil {
		t.Error("a plan-mode turn wrote a file")
	}
	turns, _ = scriptagent.ReadTurns(e.home)
	if len(turns) != 2 || !turns[1].Resumed || turns[1].Mode != "plan" || turns[1].Session != res.SessionID {
		t.Errorf("ask turn record: %+v", turns)
	}
}

func TestProcessTurn(t *testing.T) { checkTurn(t, newTurnEnv(t), Process{}) }

func TestBwrapTurn(t *testing.T) {
	requireBwrap(t)
	checkTurn(t, newTurnEnv(t), Bwrap{})
}

func TestBwrapConfines(t *testing.T) {
	requireBwrap(t)
	state := t.TempDir()
	if err := os.WriteFile(filepath.Join(state, "secret"), []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	wt := filepath.Join(state, "worktrees", "t")
	home := filepath.Join(state, "agents", "t", "home")
	for _, d := range []string{wt, home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	outside := t.TempDir()
	script := `cat ` + state + `/secret 2>/dev/null && echo LEAK; ` +
		`echo x > ` + outside + `/f 2>/dev/null && echo WROTE_OUTSIDE; ` +
		`echo ok > ` + wt + `/in.txt && echo WROTE_WORKTREE; echo $HOME`
	out, err := Bwrap{}.Run(context.Background(), Spec{Command: []string{"/bin/sh", "-c", script}, Dir: wt, Home: home,
		Env: []string{"PATH=/usr/bin:/bin", "HOME=" + home}, Hide: []string{state}, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("%v %s", err, out.Combined())
	}
	s := string(out.Stdout)
	if strings.Contains(s, "LEAK") || strings.Contains(s, "WROTE_OUTSIDE") || !strings.Contains(s, "WROTE_WORKTREE") {
		t.Fatalf("sandbox output: %s", s)
	}
}

func TestTimeoutKillsGroup(t *testing.T) {
	e := newTurnEnv(t)
	s := e.spec(t, "@sleep 30s")
	s.Timeout = 300 * time.Millisecond
	start := time.Now()
	_, err := Process{}.Run(context.Background(), s)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("the timeout did not kill the agent promptly")
	}
}

func TestCrashAndMissing(t *testing.T) {
	e := newTurnEnv(t)
	_, err := Process{}.Run(context.Background(), e.spec(t, "@crash boom"))
	if err == nil || !strings.Contains(err.Error(), "status 3") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("crash: got %v", err)
	}
	s := e.spec(t, "x")
	s.Command = []string{"/nonexistent/claude"}
	if _, err := (Process{}).Run(context.Background(), s); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("missing agent: got %v, want ErrUnavailable", err)
	}
}

func TestDockerArgv(t *testing.T) {
	s := Spec{Name: "fix-3", Command: []string{"claude"}, Args: ClaudeCode{}.WorkArgv("go", ""), Dir: "/s/wt", Home: "/s/home",
		Env: []string{"HOME=/s/home", "ANTHROPIC_API_KEY=sk-ant-svc-x"}, Writable: []string{"/p/.git"}}
	got := Docker{Image: "img:1"}.Argv(s)
	uid := strings.Join([]string{itoa(os.Getuid()), itoa(os.Getgid())}, ":")
	want := []string{"docker", "run", "--rm", "-i", "--init", "--network", "host", "--name", "lazy-fix-3", "--user", uid,
		"-v", "/s/wt:/s/wt", "-v", "/s/home:/s/home", "-v", "/p/.git:/p/.git", "-w", "/s/wt",
		"-e", "HOME=/s/home", "-e", "ANTHROPIC_API_KEY=sk-ant-svc-x", "img:1",
		"claude", "-p", "--output-format", "json", "--permission-mode", "acceptEdits", "go"}
	if !slices.Equal(got, want) {
		t.Errorf("docker argv:\n got %q\nwant %q", got, want)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

type countingRunner struct {
	mu        sync.Mutex
	now, peak int
}

func (c *countingRunner) Name() string { return "counting" }
func (c *countingRunner) Run(ctx context.Context, s Spec) (Outcome, error) {
	c.mu.Lock()
	c.now++
	if c.now > c.peak {
		c.peak = c.now
	}
	c.mu.Unlock()
	time.Sleep(30 * time.Millisecond)
	c.mu.Lock()
	c.now--
	c.mu.Unlock()
	return Outcome{Stdout: []byte(`{"result":"ok","session_id":"s"}`)}, nil
}

// TestSlotsBoundConcurrentAgents: with max_concurrent agents running, the
// next turn waits for a slot.
func TestSlotsBoundConcurrentAgents(t *testing.T) {
	r := &countingRunner{}
	l := &Launcher{Driver: ClaudeCode{}, Runner: r, AgentsDir: t.TempDir(), Slots: NewSlots(2),
		Placeholders: func(context.Context, string, string, string) (map[string]string, error) { return nil, nil }}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if _, _, err := l.RunTurn(context.Background(), TurnRequest{Ref: fmt.Sprint("t", i), Prompt: "x"}); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	if r.peak != 2 {
		t.Errorf("peak concurrent agents: %d, want 2", r.peak)
	}
}
