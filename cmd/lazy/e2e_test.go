package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lazy/agent"
	"lazy/api"
	"lazy/gitx/gitxtest"
	"lazy/stubmodel"
)

var lazyBin, devserverBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lazy-e2e-bin-")
	if err != nil {
		panic(err)
	}
	lazyBin = filepath.Join(dir, "lazy")
	build := exec.Command("go", "build", "-o", lazyBin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build lazy:", err)
		os.Exit(1)
	}
	devserverBin = filepath.Join(dir, "devserver")
	build = exec.Command("go", "build", "-o", devserverBin, "../devserver")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build devserver:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// project is a temp git repo with a lazy config, a LAZY_HOME and a stub upstream.
type project struct {
	t     testing.TB
	root  string
	home  string
	stub  *stubmodel.Server
	env   []string
	paths api.Paths
	real  string
	// upstream is the stub's URL
	upstream string
}

// artifactDir is a fresh directory for a test's project. With
// LAZY_TEST_ARTIFACTS set (make test sets it) it is kept there after the test,
// so the leak hunt at the end of the suite can search everything the tests
// made; otherwise it is a temp dir removed after the test.
func artifactDir(t testing.TB, kind string) string {
	t.Helper()
	base := os.Getenv("LAZY_TEST_ARTIFACTS")
	if base == "" {
		return t.TempDir()
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	dir, err := os.MkdirTemp(base, name+"-"+kind+"-")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// keep writes a page or a stream the test saw into the project's artifacts.
func (p *project) keep(name, body string) {
	_ = os.WriteFile(filepath.Join(p.home, "seen-"+name), []byte(body), 0o600)
}

func newProject(t testing.TB, runner string) *project {
	t.Helper()
	return newProjectIn(t, runner, gitxtest.NewRepoIn(t, artifactDir(t, "root"), map[string]string{"README.md": "# p\n", "main.go": "package main\n"}))
}

// newProjectIn is newProject on an existing git repository at root (a
// clone, for a second member of a cluster).
func newProjectIn(t testing.TB, runner, root string) *project {
	t.Helper()
	stub := stubmodel.New()
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	home := artifactDir(t, "home")
	real := "sk-ant-api03-REALSECRET" + strings.Repeat("x", 20)
	if err := os.MkdirAll(filepath.Join(home, "credentials"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "credentials", "provider"), []byte(real+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &project{t: t, root: root, home: home, stub: stub, real: real, paths: api.StatePaths(home, root), upstream: srv.URL}
	p.env = append(os.Environ(), "LAZY_HOME="+home)
	p.lazy(0, "init")
	runnerLine := ""
	if runner != "" { // "": the default runner
		runnerLine = fmt.Sprintf("runner = %q\n", runner)
	}
	cfg := fmt.Sprintf("[daemon]\nport_window = [27100, 27199]\n[agent]\ndriver = \"script\"\n%sturn_timeout = \"2m\"\n[proxy]\nupstream = %q\ncredential = \"provider\"\n", runnerLine, srv.URL)
	if err := os.WriteFile(filepath.Join(root, ".lazy", "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd := exec.Command(lazyBin, "daemon", "stop", "--project", root)
		cmd.Env = p.env
		_ = cmd.Run()
	})
	return p
}

// run runs lazy and returns stdout, stderr and the exit code.
func (p *project) run(args ...string) (string, string, int) {
	p.t.Helper()
	cmd := exec.Command(lazyBin, append(args, "--project", p.root)...)
	cmd.Env = p.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		p.t.Fatalf("run lazy %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// lazy runs lazy and fails unless it exits with want.
func (p *project) lazy(want int, args ...string) string {
	p.t.Helper()
	out, errs, code := p.run(args...)
	if code != want {
		p.t.Fatalf("lazy %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, out, errs)
	}
	return out
}

func (p *project) show(ref string) api.TaskInfo {
	p.t.Helper()
	var ti api.TaskInfo
	if err := json.Unmarshal([]byte(p.lazy(0, "task", "show", ref, "--json")), &ti); err != nil {
		p.t.Fatal(err)
	}
	return ti
}

// waitStatus polls the task until it reaches status (or fails the test).
func (p *project) waitStatus(ref, status string) api.TaskInfo {
	p.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ti := p.show(ref)
		if ti.Status == status {
			return ti
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("task %s: status %s (%s), want %s", ref, ti.Status, ti.FailReason, status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *project) info() api.DaemonInfo {
	b, err := os.ReadFile(p.paths.DaemonJSON)
	if err != nil {
		p.t.Fatal(err)
	}
	var i api.DaemonInfo
	if err := json.Unmarshal(b, &i); err != nil {
		p.t.Fatal(err)
	}
	return i
}

const writeAndCommit = "add a file\n@write hello.txt hello\\n\n@commit add hello\n@answer done"

func checkTaskReachesBlocked(t *testing.T, runner string) {
	p := newProject(t, runner)
	out := p.lazy(0, "daemon", "start")
	if !strings.Contains(out, "daemon: running (pid ") || !strings.Contains(out, "dashboard: http://127.0.0.1:") {
		t.Fatalf("start output: %s", out)
	}
	out = p.lazy(0, "task", "new", "-m", writeAndCommit, "--code", "hello")
	if f := strings.Fields(out); len(f) != 2 || f[0] != "hello" || len(f[1]) != 32 {
		t.Fatalf("task new output: %q", out)
	}
	ti := p.waitStatus("hello", "blocked")
	if ti.Turns != 1 || ti.Branch != "lazy/hello" || ti.Parent != "main" {
		t.Errorf("task: %+v", ti)
	}
	log := gitxtest.Git(t, p.root, "log", "--oneline", "main..lazy/hello")
	if !strings.Contains(log, "add hello") {
		t.Fatalf("no commit on lazy/hello: %q", log)
	}
	if !strings.HasPrefix(ti.Worktree, p.paths.State) {
		t.Errorf("worktree %s is not under the state dir %s", ti.Worktree, p.paths.State)
	}
	checkStatePrivate(t, p.paths.State)
	// the stub saw a placeholder, never the real credential... and the real one on the last hop
	reqs := p.stub.Requests()
	if len(reqs) == 0 {
		t.Fatal("the agent never called the model")
	}
	for _, r := range reqs {
		if got := r.Header.Get("x-api-key"); got != p.real {
			t.Errorf("upstream got x-api-key %q, want the real credential", got)
		}
	}
}

func TestTaskReachesBlockedProcess(t *testing.T) { checkTaskReachesBlocked(t, "process") }

func TestTaskReachesBlockedBwrap(t *testing.T) {
	requireBwrap(t)
	checkTaskReachesBlocked(t, "bwrap")
}

// TestTaskReachesBlockedDefault: the default runner (auto) sandboxes.
func TestTaskReachesBlockedDefault(t *testing.T) {
	requireBwrap(t)
	checkTaskReachesBlocked(t, "")
}

// requireBwrap skips where bubblewrap cannot run, and fails on CI.
func requireBwrap(t *testing.T) {
	t.Helper()
	if err := agent.ProbeBwrap(""); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v on CI: make test installs bubblewrap", err)
		}
		t.Skip(err)
	}
}

func TestDaemonLifecycleAndCLI(t *testing.T) {
	p := newProject(t, "process")
	if out := p.lazy(0, "daemon", "status"); !strings.HasPrefix(out, "daemon: not running") {
		t.Fatalf("status before start: %q", out)
	}
	p.lazy(0, "daemon", "start")
	info := p.info()
	out := p.lazy(0, "daemon", "start") // idempotent: reports the running one
	if !strings.Contains(out, fmt.Sprintf("daemon: running (pid %d)", info.PID)) {
		t.Fatalf("second start: %q", out)
	}
	status := p.lazy(0, "daemon", "status")
	dash, _ := os.ReadFile(p.paths.DashboardToken)
	want := fmt.Sprintf("daemon: running (pid %d)\ndashboard: %s\nopen: %s/?token=%s\nproxy: %s\nstate: %s\nconfig: .lazy/config.toml has edits of your own, not committed and not from a task\n", info.PID, info.BaseURL, info.BaseURL, strings.TrimSpace(string(dash)), info.ProxyURL, p.paths.State)
	if status != want {
		t.Fatalf("status:\n got %q\nwant %q", status, want)
	}
	for _, f := range []string{p.paths.AuthToken, p.paths.DashboardToken, p.paths.ProxyTokens, p.paths.DaemonJSON} {
		st, err := os.Stat(f)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v %v, want 0600", f, st.Mode().Perm(), err)
		}
	}
	if st, _ := os.Stat(p.paths.State); st.Mode().Perm() != 0o700 {
		t.Errorf("state dir mode %v, want 0700", st.Mode().Perm())
	}

	// watch streams the events of the task as they happen
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lines := p.watch(ctx)

	p.lazy(0, "task", "new", "-m", writeAndCommit)
	var tl []api.TaskInfo
	if err := json.Unmarshal([]byte(p.lazy(0, "task", "list", "--json")), &tl); err != nil || len(tl) != 1 {
		t.Fatalf("task list --json: %v %v", tl, err)
	}
	short := tl[0].ShortID
	if tl[0].Code != "" || tl[0].Ref != short {
		t.Errorf("a task without code has its short id as ref: %+v", tl[0])
	}
	p.waitStatus(short, "blocked")
	var seen []string
	for l := range lines {
		seen = append(seen, l)
		if strings.Contains(l, "status blocked") {
			break
		}
	}
	joined := strings.Join(seen, "\n")
	for _, w := range []string{short + " work turn 1 start", short + " work turn 1 end done", short + " status blocked"} {
		if !strings.Contains(joined, w) {
			t.Errorf("watch output lacks %q:\n%s", w, joined)
		}
	}
	cancel()

	// resolution: a unique prefix works; a too-short one is refused
	p.show(tl[0].ID[:6])
	if _, errs, code := p.run("task", "show", "ab"); code != 1 || !strings.Contains(errs, "no task matches") {
		t.Errorf("short prefix: exit %d %s", code, errs)
	}

	// a task message on a blocked task starts the work turn that carries it
	out = p.lazy(0, "comment", short, "-m", "also this\n@answer ok")
	if !strings.HasPrefix(out, "queued: delivered with the next work turn (work turn 2, queued now)") {
		t.Fatalf("comment: %q", out)
	}
	p.waitStatus(short, "blocked")
	out = p.lazy(0, "unblock", short, "-m", "go on")
	if !strings.Contains(out, "work turn 3 queued") {
		t.Fatalf("unblock: %q", out)
	}
	ti := p.waitStatus(short, "blocked")
	if ti.Turns != 3 {
		t.Errorf("turns: got %d, want 3", ti.Turns)
	}

	// ops: actors table, /api/actors, /metrics, RPC without token
	if out := p.lazy(0, "actors"); !strings.Contains(out, "task/"+tl[0].ID) || !strings.Contains(out, "grants") || !strings.Contains(out, "traffic") {
		t.Errorf("actors:\n%s", out)
	}
	resp, err := p.get("/api/actors")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/api/actors: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = p.get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{`lazy_tasks{status="blocked"} 1`, `lazy_turns{kind="work",state="done"} 3`, "lazy_actor_restarts_total 0", "lazy_actor_mailbox_depth"} {
		if !strings.Contains(string(body), m) {
			t.Errorf("/metrics lacks %q", m)
		}
	}
	resp, err = http.Post(info.BaseURL+"/rpc/taskList", "application/json", strings.NewReader("{}"))
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("RPC without token: %v %v", resp.StatusCode, err)
	}
	req, _ := http.NewRequest(http.MethodGet, info.BaseURL+"/", nil)
	req.Host = "evil.example:80"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("non-loopback Host: %v %v", resp.StatusCode, err)
	}

	// the task page and the list render
	resp, err = p.get("/tasks/" + short)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("task page: %v", err)
	}
	resp.Body.Close()

	p.lazy(0, "task", "cancel", short)
	if ti := p.show(short); ti.Status != "cancelled" {
		t.Errorf("after cancel: %s", ti.Status)
	}
	if _, errs, code := p.run("unblock", short); code != 1 || !strings.Contains(errs, "cancelled") {
		t.Errorf("unblock after cancel: exit %d %s", code, errs)
	}

	if out := p.lazy(0, "daemon", "stop"); !strings.Contains(out, "daemon: stopped") {
		t.Fatalf("stop: %q", out)
	}
	if out := p.lazy(0, "daemon", "status"); !strings.HasPrefix(out, "daemon: not running") {
		t.Fatalf("status after stop: %q", out)
	}
	if _, errs, code := p.run("task", "list"); code != 1 || !strings.Contains(errs, "lazy daemon start") {
		t.Errorf("a command with no daemon: exit %d %q", code, errs)
	}
}

func TestKill9MidTurnThenRestart(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	pid := p.info().PID
	p.lazy(0, "task", "new", "--code", "slow", "-m", "@sleep 60s")
	deadline := time.Now().Add(30 * time.Second)
	for p.show("slow").Turns != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the turn never started")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100 && syscallAlive(pid); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(p.paths.DaemonJSON); err != nil {
		t.Fatal("the killed daemon left no daemon.json; the stale-file path is not exercised")
	}
	if out := p.lazy(0, "daemon", "status"); !strings.Contains(out, "not running") {
		t.Fatalf("status with a stale daemon.json: %q", out)
	}
	p.lazy(0, "daemon", "start")
	if p.info().PID == pid {
		t.Fatal("daemon.json still names the dead daemon")
	}
	ti := p.show("slow")
	if ti.Status != "failed" || !strings.Contains(ti.FailReason, "interrupted") {
		t.Fatalf("after restart: %+v", ti)
	}
	if out := p.lazy(0, "task", "show", "slow"); !strings.Contains(out, "work turn 1 (start) interrupted: the daemon stopped unexpectedly") {
		t.Errorf("the cut-off turn is not recorded as interrupted:\n%s", out)
	}
	p.lazy(0, "unblock", "slow", "-m", "@answer resumed")
	if ti := p.waitStatus("slow", "blocked"); ti.Turns != 2 {
		t.Errorf("turns after resume: %d", ti.Turns)
	}
}

func syscallAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestStartRefusesBadConfig(t *testing.T) {
	cases := map[string]struct{ cfg, want string }{
		"unknown key":            {"[agent]\nrunnr = \"process\"\n", `"agent.runnr"`},
		"bad duration":           {"[agent]\nask_timeout = \"soon\"\n", "agent.ask_timeout"},
		"bad url":                {"[proxy]\nupstream = \"nope\"\n", "proxy.upstream"},
		"dashboard not loopback": {"[daemon]\ndashboard_listen = \"0.0.0.0:27150\"\n", "loopback"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := newProject(t, "process")
			if err := os.WriteFile(filepath.Join(p.root, ".lazy", "config.toml"), []byte(tc.cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			_, errs, code := p.run("daemon", "start")
			if code != 1 || !strings.Contains(errs, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 1 naming %s", code, errs, tc.want)
			}
		})
	}
}

func TestVersionAndUsage(t *testing.T) {
	out, err := exec.Command(lazyBin, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "lazy 0.22 (commit ") {
		t.Fatalf("--version: %q %v", out, err)
	}
	cmd := exec.Command(lazyBin, "task", "new")
	if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 2 {
		t.Errorf("missing -m: exit %d, want 2", cmd.ProcessState.ExitCode())
	}
	if err := exec.Command(lazyBin, "completion", "bash").Run(); err != nil {
		t.Errorf("completion bash: %v", err)
	}
}

type execCmd = exec.Cmd

func newExec(name string, args ...string) *execCmd { return exec.Command(name, args...) }

// checkStatePrivate: every file lazy keeps in the state dir is 0600 and every
// dir 0700 (lazy.db and its -wal and -shm included). The worktrees, the task
// repositories and the agents' homes hold what git and the agent write; their
// top dirs are checked.
func checkStatePrivate(t *testing.T, state string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(state, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(state, path)
		parts := strings.Split(rel, string(filepath.Separator))
		if (parts[0] == "worktrees" || parts[0] == "repos" || parts[0] == "agents") && len(parts) > 1 {
			return fs.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().Type()&fs.ModeSocket != 0 {
			return nil
		}
		n++
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s is %o: others can read it", rel, perm)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 8 {
		t.Fatalf("only %d entries in the state dir", n)
	}
}

// get fetches a dashboard path as the CLI does, with the auth token.
func (p *project) get(path string) (*http.Response, error) {
	return p.request(http.MethodGet, path, "", "")
}

// request sends a dashboard request authenticated with the auth token.
func (p *project) request(method, path, ctype, body string) (*http.Response, error) {
	p.t.Helper()
	tok, err := os.ReadFile(p.paths.AuthToken)
	if err != nil {
		p.t.Fatal(err)
	}
	req, err := http.NewRequest(method, p.info().BaseURL+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	return http.DefaultClient.Do(req)
}

// login is url (on the dashboard) opened through the login token, as the
// `open:` line of lazy daemon status is: the browser gets its session cookie.
func (p *project) login(url string) string {
	p.t.Helper()
	tok, err := os.ReadFile(p.paths.DashboardToken)
	if err != nil {
		p.t.Fatal(err)
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "token=" + strings.TrimSpace(string(tok))
}
