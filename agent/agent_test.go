package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
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

	"lazy/gitx"
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
	// the prompt is never in argv: it goes on standard input
	if got := strings.Join(d.WorkArgv(""), " "); got != "-p --output-format json --permission-mode acceptEdits" {
		t.Errorf("work argv: %q", got)
	}
	if got := strings.Join(d.WorkArgv("S1"), " "); got != "-p --output-format json --resume S1 --permission-mode acceptEdits" {
		t.Errorf("resumed work argv: %q", got)
	}
	if got := strings.Join(d.AskArgv("S1"), " "); got != "-p --output-format json --resume S1 --permission-mode plan" {
		t.Errorf("ask argv: %q", got)
	}
	// agent.client_stream: claude's own stream, read as the turn runs
	s := ClaudeCode{StreamJSON: true}
	if got := strings.Join(s.WorkArgv("S1"), " "); got != "-p --output-format stream-json --verbose --resume S1 --permission-mode acceptEdits" {
		t.Errorf("streamed work argv: %q", got)
	}
	if got := strings.Join(s.AskArgv("S1"), " "); got != "-p --output-format stream-json --verbose --resume S1 --permission-mode plan" {
		t.Errorf("streamed ask argv: %q", got)
	}
	if d.Stream("/w", nil) != nil {
		t.Error("a driver without client_stream reads a stream")
	}
}

// TestLargePromptOnStdin: a prompt far over the 128 KiB one argv string may
// hold reaches the agent whole, under every runner that can run here.
func TestLargePromptOnStdin(t *testing.T) {
	e := newTurnEnv(t)
	prompt := "big\n@answer got it\n" + strings.Repeat("0123456789abcdef\n", 300<<10/17)
	runners := []Runner{Process{}}
	if ProbeBwrap("") == nil {
		runners = append(runners, Bwrap{})
	}
	for _, r := range runners {
		s := e.spec(t, prompt)
		out, err := r.Run(context.Background(), s)
		if err != nil {
			t.Fatalf("%s: %v\n%s", r.Name(), err, out.Combined())
		}
		turns, err := scriptagent.ReadTurns(e.home)
		if err != nil || len(turns) == 0 || len(turns[len(turns)-1].Prompt) != len(prompt) {
			t.Fatalf("%s: the agent got %d bytes of a %d-byte prompt (%v)", r.Name(), len(turns[len(turns)-1].Prompt), len(prompt), err)
		}
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
	port     int
	socket   string // the stub also answers here, as the proxy does
	worktree string
	home     string
}

func newTurnEnv(t *testing.T) turnEnv {
	stub := stubmodel.New()
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	sock := filepath.Join(shortTemp(t), "proxy.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	us := &http.Server{Handler: stub}
	go us.Serve(ln)
	t.Cleanup(func() { us.Close() })
	repo := gitxtest.NewRepo(t, nil)
	home := filepath.Join(t.TempDir(), "home")
	return turnEnv{stub: stub, url: srv.URL, port: srv.Listener.Addr().(*net.TCPAddr).Port, socket: sock, worktree: repo, home: home}
}

// shortTemp is a temp dir with a path short enough for a Unix socket.
func shortTemp(t *testing.T) string {
	d, err := os.MkdirTemp("", "lz")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func (e turnEnv) spec(t *testing.T, prompt string) Spec {
	return Spec{Command: self(t), Args: ClaudeCode{}.WorkArgv(""), Stdin: []byte(prompt), Dir: e.worktree, Home: e.home,
		Env: Env(os.Environ(), e.home, e.url, map[string]string{EnvAPIKey: "sk-ant-api03-svc-placeholder"}), Timeout: time.Minute,
		ProxySocket: e.socket, ProxyPort: e.port, Self: self(t)[0]}
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
	ask.Args = ClaudeCode{}.AskArgv(res.SessionID)
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
	credFile := filepath.Join(outside, "provider-key")
	if err := os.WriteFile(credFile, []byte("s3cret-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	// a host service on loopback the agent must not reach
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go func() {
		for {
			c, err := host.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HOSTSERVICE\n"))
			c.Close()
		}
	}()
	hostPort := host.Addr().(*net.TCPAddr).Port
	e := newTurnEnv(t)
	script := `cat ` + state + `/secret 2>/dev/null && echo LEAK; ` +
		`cat ` + credFile + ` 2>/dev/null | grep -q s3cret && echo LEAK_CRED; ` +
		`echo x > ` + outside + `/f 2>/dev/null && echo WROTE_OUTSIDE; ` +
		`(exec 3<>/dev/tcp/127.0.0.1/` + itoa(hostPort) + ` && cat <&3) 2>/dev/null | grep -q HOSTSERVICE && echo REACHED_HOST; ` +
		`(exec 3<>/dev/tcp/127.0.0.1/` + itoa(e.port) + ` && printf 'HEAD /api/hello HTTP/1.0\r\nHost: 127.0.0.1:` + itoa(e.port) + `\r\n\r\n' >&3 && cat <&3) 2>/dev/null | grep -q 'HTTP/1' && echo REACHED_PROXY; ` +
		`ls ` + e.socket + ` >/dev/null 2>&1 && echo SAW_HOST_TMP; ` +
		`echo ok > ` + wt + `/in.txt && echo WROTE_WORKTREE; echo $HOME`
	out, err := Bwrap{}.Run(context.Background(), Spec{Command: []string{"/bin/bash", "-c", script}, Dir: wt, Home: home,
		Env: []string{"PATH=/usr/bin:/bin", "HOME=" + home}, Hide: []string{state}, HideFile: []string{credFile}, Timeout: time.Minute,
		ProxySocket: e.socket, ProxyPort: e.port, Self: self(t)[0]})
	if err != nil {
		t.Fatalf("%v %s", err, out.Combined())
	}
	s := string(out.Stdout)
	for _, bad := range []string{"LEAK", "LEAK_CRED", "REACHED_HOST"} {
		if strings.Contains(s, bad) {
			t.Errorf("sandbox: %s\n%s", bad, out.Combined())
		}
	}
	// a write outside lands in the sandbox's own /tmp, never on the host
	if _, err := os.Stat(filepath.Join(outside, "f")); err == nil {
		t.Error("the sandbox wrote outside its worktree on the host")
	}
	// another process's socket in the host's /tmp is out of sight
	if strings.Contains(s, "SAW_HOST_TMP") {
		t.Error("the host's /tmp is visible")
	}
	if !strings.Contains(s, "WROTE_WORKTREE") || !strings.Contains(s, "REACHED_PROXY") {
		t.Fatalf("sandbox output (the worktree and the proxy must work): %s", out.Combined())
	}
}

// TestBwrapTaskRepo: in its worktree the agent uses git as usual on its own
// task repository (status, add, commit, log, diff against the parent through
// the project's objects); from the sandbox nothing of the project's git is
// writable (objects, another task's ref, config), nor its task repository's
// config, hooks, info, alternates or the worktree's .git file, nor another
// task's repository. What it committed reaches the project only by the
// daemon's import; a blob it swaps is refused there; deleting its whole
// object store leaves the project whole.
func TestBwrapTaskRepo(t *testing.T) {
	requireBwrap(t)
	e := newTurnEnv(t)
	ctx := context.Background()
	project := e.worktree
	state := t.TempDir()
	mk := func(name string) gitx.TaskRepo {
		tr := gitx.TaskRepo{Project: project, Worktree: filepath.Join(state, "worktrees", name), Branch: "lazy/" + name, Parent: "main"}
		if err := gitx.CreateTask(ctx, project, tr.Worktree, tr.Branch, "main"); err != nil {
			t.Fatal(err)
		}
		return tr
	}
	tr, other := mk("fix"), mk("other")
	gd := tr.GitDir()
	pgit := filepath.Join(project, ".git")
	someObject := strings.TrimSpace(gitxtest.Git(t, project, "rev-parse", "main:README.md"))
	loose := filepath.Join(pgit, "objects", someObject[:2], someObject[2:])
	otherBefore, _ := gitx.RevParse(ctx, project, "lazy/other")
	mainBefore, _ := gitx.RevParse(ctx, project, "main")
	configBefore, _ := os.ReadFile(filepath.Join(project, ".git", "config"))

	run := func(script string, ask bool) string {
		t.Helper()
		sp, err := gitx.ForSandbox(tr.Worktree, ask)
		if err != nil {
			t.Fatal(err)
		}
		home := filepath.Join(state, "home")
		out, err := Bwrap{}.Run(ctx, Spec{Command: []string{"/bin/bash", "-c", script}, Dir: tr.Worktree, Home: home,
			Env: []string{"PATH=/usr/bin:/bin", "HOME=" + home}, Hide: []string{state}, Visible: sp.Visible, Writable: sp.Writable, ReadOnly: sp.ReadOnly,
			Timeout: time.Minute, ProxySocket: e.socket, ProxyPort: e.port, Self: self(t)[0]})
		if err != nil {
			t.Fatalf("%v %s", err, out.Combined())
		}
		return string(out.Stdout)
	}
	git := "git -c user.name=a -c user.email=a@x"
	try := func(label, cmd string) string { return cmd + ` 2>/dev/null && echo ` + label + `; ` }
	script := `set +e; echo hi > f.txt; ` + git + ` add f.txt && ` + git + ` commit -qm agent && echo COMMITTED; ` +
		`git status --porcelain | grep -q . || echo STATUS_CLEAN; ` +
		`git log --oneline main..HEAD | grep -q agent && echo LOGGED; ` +
		`git diff main --stat | grep -q f.txt && echo DIFFED; ` +
		try("WROTE_PROJECT_OBJECTS", `touch `+pgit+`/objects/planted`) +
		try("REPLACED_PROJECT_OBJECT", `cp /dev/null `+loose) +
		try("DELETED_PROJECT_OBJECT", `rm -f `+loose) +
		try("MOVED_OTHER_TASK", `echo `+mainBefore+` > `+pgit+`/refs/heads/lazy/other`) +
		try("MOVED_OTHER_TASK_GIT", `git --git-dir=`+pgit+` update-ref refs/heads/lazy/other HEAD`) +
		try("MOVED_MAIN", `git --git-dir=`+pgit+` update-ref refs/heads/main HEAD`) +
		try("WROTE_PROJECT_CONFIG", `printf '[core]\n\tfsmonitor = touch /tmp/pwned\n' >> `+pgit+`/config`) +
		try("WROTE_CONFIG", `printf '[core]\n\tfsmonitor = touch /tmp/pwned\n' >> `+gd+`/config`) +
		try("GIT_CONFIG", `git config core.fsmonitor "touch /tmp/pwned"`) +
		try("PLANTED_HOOK", `printf '#!/bin/sh\necho PWNED\n' > `+gd+`/hooks/post-checkout`) +
		try("WROTE_INFO", `echo '* filter=evil' > `+gd+`/info/attributes`) +
		try("WROTE_ALTERNATES", `echo /tmp > `+gd+`/objects/info/alternates`) +
		try("MOVED_OBJECTS", `mv `+gd+`/objects `+gd+`/objects.old`) +
		try("REDIRECTED", `echo "gitdir: /tmp/evil" > .git`) +
		try("TOUCHED_OTHER_REPO", `touch `+other.GitDir()+`/planted`) +
		try("TOUCHED_OTHER_WORKTREE", `touch `+other.Worktree+`/planted`) +
		`true`
	s := run(script, false)
	for _, good := range []string{"COMMITTED", "STATUS_CLEAN", "LOGGED", "DIFFED"} {
		if !strings.Contains(s, good) {
			t.Errorf("in its sandbox the agent's git did not work: %s missing from\n%s", good, s)
		}
	}
	for _, bad := range []string{"WROTE_PROJECT_OBJECTS", "REPLACED_PROJECT_OBJECT", "DELETED_PROJECT_OBJECT", "MOVED_OTHER_TASK", "MOVED_OTHER_TASK_GIT",
		"MOVED_MAIN", "WROTE_CONFIG", "GIT_CONFIG", "PLANTED_HOOK", "WROTE_INFO", "WROTE_ALTERNATES", "MOVED_OBJECTS", "REDIRECTED",
		"TOUCHED_OTHER_REPO", "TOUCHED_OTHER_WORKTREE"} {
		if strings.Contains(s, bad) {
			t.Errorf("the sandbox allowed %s:\n%s", bad, s)
		}
	}
	if got, _ := gitx.RevParse(ctx, project, "lazy/other"); got != otherBefore {
		t.Errorf("lazy/other moved")
	}
	// where the project lies under the sandbox's own /tmp, a write there
	// lands in that tmpfs: the host's file is what counts
	if b, _ := os.ReadFile(filepath.Join(project, ".git", "config")); string(b) != string(configBefore) {
		t.Errorf("the project's config changed:\n%s", b)
	}
	if now, _ := gitx.RevParse(ctx, project, "lazy/fix"); now != mainBefore {
		t.Fatalf("the agent's commit reached the project before any import")
	}
	head, err := tr.Import(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if log := strings.TrimSpace(gitxtest.Git(t, project, "log", "-1", "--format=%s", head)); log != "agent" {
		t.Errorf("imported head: %q", log)
	}

	// an ask turn: the task repository is read-only too
	s = run(`set +e; git log -1 --format=%s | grep -q agent && echo ASK_LOGGED; echo x > g.txt; `+git+` add g.txt 2>/dev/null && `+git+` commit -qm ask 2>/dev/null && echo ASK_COMMITTED; true`, true)
	if strings.Contains(s, "ASK_COMMITTED") || !strings.Contains(s, "ASK_LOGGED") {
		t.Errorf("an ask turn must read the task repository and not commit in it:\n%s", s)
	}
	_ = os.Remove(filepath.Join(tr.Worktree, "g.txt"))

	// a swapped blob is refused at the import
	if _, err := exec.LookPath("python3"); err == nil {
		forge := `set +e; echo 'pay(amount)' > app.py; ` + git + ` add app.py && ` + git + ` commit -qm pay; ` +
			`b=$(git rev-parse HEAD:app.py); f=` + gd + `/objects/${b:0:2}/${b:2}; rm -f $f; ` +
			`python3 -c 'import sys,zlib; d=b"send_to_attacker(amount)\n"; sys.stdout.buffer.write(zlib.compress(b"blob %d\0" % len(d) + d))' > $f && echo FORGED; true`
		if s := run(forge, false); !strings.Contains(s, "FORGED") {
			t.Fatalf("the forge did not run: %s", s)
		}
		if _, err := tr.Import(ctx); !errors.Is(err, gitx.ErrImportRefused) {
			t.Errorf("import of a swapped blob: got %v, want import refused", err)
		} else {
			t.Logf("%v", err)
		}
		if now, _ := gitx.RevParse(ctx, project, "lazy/fix"); now != head {
			t.Errorf("a refused import moved lazy/fix")
		}
	}

	// one command deletes the task repository's objects: the project is whole
	run(`rm -rf `+gd+`/objects/* `+pgit+`/objects/* 2>/dev/null; true`, false)
	gitxtest.Git(t, project, "fsck", "--strict", "--no-progress")
	if got, _ := gitx.RevParse(ctx, project, "lazy/fix"); got != head {
		t.Errorf("lazy/fix: got %s, want %s", got, head)
	}
	if _, err := os.Stat(filepath.Join(pgit, "objects", "planted")); err == nil {
		t.Errorf("a file was planted in the project's objects")
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
	s := Spec{Name: "fix-3", Command: []string{"claude"}, Args: ClaudeCode{}.WorkArgv(""), Dir: "/s/wt", Home: "/s/home",
		Env: []string{"HOME=/s/home", "ANTHROPIC_API_KEY=sk-ant-svc-x"}, Writable: []string{"/s/repo.git"}, Visible: []string{"/p/.git/objects"},
		Share: []string{"/cache/go-mod"}, Limits: Limits{OpenFiles: 4096, Procs: 512, Memory: 4 << 30, TmpSize: 64 << 20}}
	uid := strings.Join([]string{itoa(os.Getuid()), itoa(os.Getgid())}, ":")
	if os.Getuid() == 0 {
		uid = "1000:1000" // never root inside
	}
	s.ReadOnly = []string{"/s/repo.git/config"}
	s.ProxySocket, s.ProxyPort, s.Self = "/tmp/lazy-proxy-1/proxy.sock", 26001, "/usr/bin/lazy"
	s.HideFile = []string{"/etc/secret-key"}
	// no host network, no capabilities, a read-only image, never root; the
	// limits; only the shares, the project's objects (read-only), the home,
	// the worktree and the task repository; the proxy socket and the
	// forwarder mounted; nothing secret mounted (a hidden file is simply
	// not there)
	want := []string{"docker", "run", "--rm", "-i", "--init", "--network", "none", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--read-only", "--tmpfs", "/tmp:rw,nosuid,nodev,size=67108864", "--shm-size", "67108864",
		"--name", "lazy-fix-3", "--user", uid, "--ulimit", "nofile=4096:4096", "--pids-limit", "512", "--memory", "4294967296",
		"-v", "/cache/go-mod:/cache/go-mod:ro", "-v", "/p/.git/objects:/p/.git/objects:ro",
		"-v", "/s/home:/s/home", "-v", "/s/wt:/s/wt", "-v", "/s/repo.git:/s/repo.git", "-v", "/s/repo.git/config:/s/repo.git/config:ro",
		"-v", "/tmp/lazy-proxy-1/proxy.sock:/run/lazy/proxy.sock", "-v", "/usr/bin/lazy:/run/lazy/lazy:ro", "-w", "/s/wt",
		"-e", "HOME=/s/home", "-e", "ANTHROPIC_API_KEY=sk-ant-svc-x", "img:1",
		"/run/lazy/lazy", "sandbox-exec", "--listen", "127.0.0.1:26001", "--socket", "/run/lazy/proxy.sock", "--",
		"claude", "-p", "--output-format", "json", "--permission-mode", "acceptEdits"}
	got := Docker{Image: "img:1"}.Argv(s)
	if !slices.Equal(got, want) {
		t.Errorf("docker argv:\n got %q\nwant %q", got, want)
	}
	// an ask turn: the worktree read-only
	s.Ask = true
	if got := strings.Join(Docker{Image: "img:1"}.Argv(s), " "); !strings.Contains(got, "-v /s/wt:/s/wt:ro") {
		t.Errorf("ask turn: the worktree is not read-only: %s", got)
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

// TestProbeNamesTheFix: where bwrap cannot make lazy's sandbox (a kernel
// that refuses unprivileged user namespaces, played by a bwrap that fails
// as it would there), the probe fails and names the fix; "auto" then
// refuses every turn rather than run a weaker sandbox.
func TestProbeNamesTheFix(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "bwrap")
	script := "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	err := ProbeBwrap(fake)
	if err == nil || !strings.Contains(err.Error(), "user namespaces") || !strings.Contains(err.Error(), "max_user_namespaces") {
		t.Fatalf("probe: %v", err)
	}
	_, runErr := Refuse{Why: err.Error()}.Run(context.Background(), Spec{})
	if !errors.Is(runErr, ErrUnavailable) || !strings.Contains(runErr.Error(), "user namespaces") {
		t.Fatalf("refused turn: %v", runErr)
	}
}
