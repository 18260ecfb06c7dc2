package main

import (
	"bufio"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lazy/api"
	"lazy/review"
)

// The first hour of a new user (issue 25, items 6, 7, 8, 12, 13): each
// test follows a step of the README on a repository it makes, with the
// real daemon, git and bwrap, and fails if the old behaviour comes back.

// pathWithout is a PATH holding every program of the system's but name:
// a directory of links to /usr/bin (where Debian installs bwrap) minus
// name, then the rest of the system's directories. Linking name into the
// returned directory "installs" it.
func pathWithout(t *testing.T, name string) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	ents, err := os.ReadDir("/usr/bin")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == name {
			continue
		}
		if err := os.Symlink(filepath.Join("/usr/bin", e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	// the agent's PATH is the daemon's: inside a sandbox only the system's
	// directories are seen, so git is also found at its own place there
	path = dir + ":/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/lib/git-core"
	for _, d := range filepath.SplitList(path)[1:] {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			t.Skipf("%s is also installed in %s: cannot hide it", name, d)
		}
	}
	return dir, path
}

// withEnv replaces (or adds) one variable of env.
func withEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// needBwrap skips where bubblewrap cannot sandbox (fails under CI=true).
func needBwrap(t *testing.T) string {
	t.Helper()
	bw, err := exec.LookPath("bwrap")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("bwrap is not installed: make test installs bubblewrap")
		}
		t.Skip("bwrap is not installed")
	}
	return bw
}

// TestFirstHourSandboxInstalledLater (item 6): a user starts the daemon
// before installing bubblewrap. The status says what the sandbox needs,
// `task new` refuses (exit 1) and makes nothing; once bwrap is installed
// (linked into the daemon's PATH) the running daemon uses it — for the
// status, for `task new`, and for a turn of a task made before — with no
// restart.
func TestFirstHourSandboxInstalledLater(t *testing.T) {
	bwrap := needBwrap(t)
	dir, path := pathWithout(t, "bwrap")
	p := newProject(t, "") // the default runner: auto
	p.env = withEnv(p.env, "PATH", path)
	install := func() {
		t.Helper()
		if err := os.Symlink(bwrap, filepath.Join(dir, "bwrap")); err != nil {
			t.Fatal(err)
		}
	}
	uninstall := func() {
		t.Helper()
		if err := os.Remove(filepath.Join(dir, "bwrap")); err != nil {
			t.Fatal(err)
		}
	}

	out, errs, code := p.run("daemon", "start")
	if code != 0 {
		t.Fatalf("daemon start: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "sandbox: unavailable: bwrap is not installed") || !strings.Contains(out, "apt-get install bubblewrap") || !strings.Contains(out, "turns will be refused") {
		t.Fatalf("the status does not say what the sandbox needs:\n%s", out)
	}
	out, errs, code = p.run("task", "new", "--code", "early", "-m", writeAndCommit)
	if code != 1 || !strings.Contains(errs, "no task was created") || !strings.Contains(errs, "apt-get install bubblewrap") {
		t.Fatalf("task new without a sandbox: exit %d, want 1 with the fix\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if out := p.lazy(0, "task", "list"); !strings.Contains(out, "no tasks yet") {
		t.Fatalf("a refused task new left a task:\n%s", out)
	}
	if b, err := exec.Command("git", "-C", p.root, "branch", "--list", "lazy/*").Output(); err != nil || strings.TrimSpace(string(b)) != "" {
		t.Fatalf("a refused task new left a branch: %q %v", b, err)
	}

	install()
	if out := p.lazy(0, "daemon", "status"); !strings.Contains(out, "sandbox: bwrap: uid 1000") {
		t.Fatalf("after installing bwrap the status still says:\n%s", out)
	}
	p.lazy(0, "task", "new", "--code", "later", "-m", writeAndCommit)
	p.waitStatus("later", "blocked")

	// a daemon that started with no sandbox, and a turn asked for after
	// bwrap came: the turn itself probes again, and runs sandboxed
	p.lazy(0, "daemon", "stop")
	uninstall()
	p.lazy(0, "daemon", "start")
	install()
	p.lazy(0, "unblock", "later", "-m", "@write again.txt again\\n\n@commit again\n@answer again")
	ti := p.waitStatus("later", "blocked")
	if ti.Turns < 2 {
		t.Fatalf("the unblock's turn did not run: %+v", ti)
	}
	if out := p.lazy(0, "daemon", "status"); !strings.Contains(out, "sandbox: bwrap: uid 1000") {
		t.Fatalf("after the turn the status says:\n%s", out)
	}
}

// readmeLine is the line of the README that holds want (the test runs
// what a user copies).
func readmeLine(t *testing.T, want string) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, want) {
			return l
		}
	}
	t.Fatalf("the README has no line with %q", want)
	return ""
}

// TestFirstHourCredentialFiles (item 7): the README's recipe writes no
// file when the key's variable is unset; a credential file that is there
// but unusable (empty, whitespace, the claude CLI's own login file, no
// token, the wrong kind, expired) stops `lazy daemon start` with its path
// and the fix; a config change to a kind the file does not fit is not
// applied; a file broken under the running daemon is named by the status,
// by `task new` and by the turn it stops — never the proxy's bare
// "missing".
func TestFirstHourCredentialFiles(t *testing.T) {
	p := newProject(t, "process")
	cred := filepath.Join(p.home, "credentials", "provider")
	if err := os.Remove(cred); err != nil {
		t.Fatal(err)
	}
	recipe := readmeLine(t, "install -m 600 /dev/stdin ~/.lazy/credentials/provider")
	recipe = strings.ReplaceAll(recipe, "~/.lazy", p.home)
	if strings.Contains(recipe, "#") {
		recipe = recipe[:strings.Index(recipe, "#")]
	}
	sh := func(key string) {
		t.Helper()
		c := exec.Command("bash", "-c", recipe)
		c.Env = withEnv(p.env, "ANTHROPIC_API_KEY", key)
		if key == "" {
			var env []string
			for _, kv := range c.Env {
				if !strings.HasPrefix(kv, "ANTHROPIC_API_KEY=") {
					env = append(env, kv)
				}
			}
			c.Env = env
		}
		_ = c.Run()
	}
	sh("")
	if _, err := os.Stat(cred); !os.IsNotExist(err) {
		b, _ := os.ReadFile(cred)
		t.Fatalf("the README recipe with ANTHROPIC_API_KEY unset wrote %s (%q)", cred, b)
	}
	sh(p.real)
	if b, err := os.ReadFile(cred); err != nil || strings.TrimSpace(string(b)) != p.real {
		t.Fatalf("the README recipe with the key set wrote %q (%v)", b, err)
	}

	cfgPath := filepath.Join(p.root, ".lazy", "config.toml")
	base, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	setKind := func(kind string) {
		t.Helper()
		body := string(base) + "[credentials.provider]\nkind = \"" + kind + "\"\n"
		if err := os.WriteFile(cfgPath, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(cred, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ name, kind, body, want string }{
		{"empty", "api_key", "", "is empty"},
		{"whitespace", "api_key", " \n\t\n", "holds only whitespace"},
		{"claude login file", "oauth", `{"claudeAiOauth":{"accessToken":"sk-ant-oat01-abc","expiresAt":1}}`, "claude setup-token"},
		{"json without token", "api_key", `{"expires_at":"2030-01-01T00:00:00Z"}`, `has no "token"`},
		{"oauth token as api_key", "api_key", "sk-ant-oat01-abcdef", `set kind = "oauth"`},
		{"api key as oauth", "oauth", p.real, `set kind = "api_key"`},
		{"expired", "api_key", `{"token":"` + p.real + `","expires_at":"2020-01-01T00:00:00Z"}`, "expired at 2020-01-01T00:00:00Z"},
	} {
		setKind(c.kind)
		write(c.body)
		out, errs, code := p.run("daemon", "start")
		if code != 1 || !strings.Contains(errs, cred) || !strings.Contains(errs, c.want) {
			t.Fatalf("%s: daemon start exit %d, want 1 naming %s and %q\nstdout: %s\nstderr: %s", c.name, code, cred, c.want, out, errs)
		}
		if st := p.lazy(0, "daemon", "status"); !strings.Contains(st, "daemon: not running") {
			t.Fatalf("%s: a daemon runs after the refusal:\n%s", c.name, st)
		}
	}

	setKind("api_key")
	write(p.real + "\n")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "c1", "-m", writeAndCommit)
	p.waitStatus("c1", "blocked")

	// a config change the file does not fit: not applied, and said so
	setKind("oauth")
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, errs, _ := p.run("daemon", "status")
		if strings.Contains(errs, "config not applied") && strings.Contains(errs, `set kind = "api_key"`) && strings.Contains(errs, cred) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the status does not say the oauth config was not applied:\n%s", errs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	setKind("api_key")

	// the file broken under the running daemon
	write("   \n")
	if _, errs, _ := p.run("daemon", "status"); !strings.Contains(errs, cred) || !strings.Contains(errs, "holds only whitespace") {
		t.Fatalf("the status does not name the broken file:\n%s", errs)
	}
	if _, errs, code := p.run("task", "new", "--code", "c2", "-m", writeAndCommit); code != 1 || !strings.Contains(errs, cred) {
		t.Fatalf("task new with a broken credential: exit %d, want 1 naming %s: %s", code, cred, errs)
	}
	p.lazy(0, "unblock", "c1", "-m", "@answer again")
	ti := p.waitStatus("c1", "failed")
	if !strings.Contains(ti.FailReason, cred) || !strings.Contains(ti.FailReason, "holds only whitespace") || strings.Contains(ti.FailReason, `"missing"`) || strings.Contains(ti.FailReason, `{"`) {
		t.Fatalf("the turn's failure does not name the file and the fix: %q", ti.FailReason)
	}
	write(p.real + "\n")
	p.lazy(0, "unblock", "c1", "-m", "@answer fixed")
	p.waitStatus("c1", "blocked")
}

// TestFirstHourNoCommitsTyposCompletion (item 13): `task new` in a
// repository with no commits says to make one (not "parent main is not a
// branch"); a mistyped command or task ref gets "did you mean"; the shell
// completion offers the running daemon's task refs, and nothing (no error)
// with no daemon.
func TestFirstHourNoCommitsTyposCompletion(t *testing.T) {
	root := artifactDir(t, "root")
	if out, err := exec.Command("git", "init", "-q", "-b", "main", root).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	p := newProjectIn(t, "process", root)
	p.lazy(0, "daemon", "start")
	out, errs, code := p.run("task", "new", "--code", "fix-login", "-m", writeAndCommit)
	want := "this repository has no commits yet: make a first commit (git commit --allow-empty -m init), then run lazy task new again"
	if code != 1 || !strings.Contains(errs, want) || strings.Contains(errs, "not a branch") {
		t.Fatalf("task new with no commits: exit %d\nstdout: %s\nstderr: %s\nwant exit 1 and %q", code, out, errs, want)
	}
	commit := exec.Command("git", "-C", root, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "--allow-empty", "-m", "init")
	if out, err := commit.CombinedOutput(); err != nil {
		t.Fatalf("the first commit: %v %s", err, out)
	}
	p.lazy(0, "task", "new", "--code", "fix-login", "-m", writeAndCommit)
	p.waitStatus("fix-login", "blocked")

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"tsak", "list"}, 2, `did you mean "task"`},
		{[]string{"task", "lsit"}, 2, `did you mean "list"?`},
		{[]string{"task", "show", "fix-logn"}, 1, `no task matches "fix-logn": did you mean fix-login?`},
		{[]string{"unblock", "fxi-login"}, 1, "did you mean fix-login?"},
	} {
		_, errs, code := p.run(c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("lazy %s: exit %d %q, want exit %d and %q", strings.Join(c.args, " "), code, errs, c.code, c.want)
		}
	}

	// as a shell asks: in the project, the word being completed last
	complete := func(args ...string) (string, string, int) {
		t.Helper()
		c := exec.Command(lazyBin, append([]string{"__complete"}, args...)...)
		c.Env, c.Dir = p.env, root
		var out, errb strings.Builder
		c.Stdout, c.Stderr = &out, &errb
		err := c.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return out.String(), errb.String(), code
	}
	for _, args := range [][]string{{"task", "show", ""}, {"unblock", "fix"}, {"watch", "--task", "f"}} {
		out, errs, code := complete(args...)
		if code != 0 || !strings.Contains(out, "fix-login\tblocked: add a file") {
			t.Errorf("lazy %s: exit %d, stdout %q, stderr %q: want the task's ref", strings.Join(args, " "), code, out, errs)
		}
	}
	if out := p.lazy(0, "completion", "bash"); !strings.Contains(out, "__start_lazy") {
		t.Errorf("lazy completion bash printed no script:\n%.300s", out)
	}
	p.lazy(0, "daemon", "stop")
	out, errs, code = complete("task", "show", "")
	if code != 0 || strings.Contains(out, "fix-login") || strings.Contains(errs, "lazy:") || strings.Contains(errs, "daemon") {
		t.Errorf("completion with no daemon: exit %d, stdout %q, stderr %q: want nothing and no error", code, out, errs)
	}
}

// TestFirstHourDemoWithoutBwrap (item 12): `lazy demo` on a machine
// without bubblewrap says it runs the agents unsandboxed and why, works,
// and its dashboard's banner tells how to sandbox them (install bubblewrap
// first), never to set "auto" alone, which would refuse every turn. The
// reviewer's thread shows the demo's question as asked, with no directive
// of the scripted agent in it, and the model's answer.
func TestFirstHourDemoWithoutBwrap(t *testing.T) {
	_, path := pathWithout(t, "bwrap")
	cmd := exec.Command(lazyBin, "demo")
	cmd.Env = withEnv(withEnv(os.Environ(), "PATH", path), "LAZY_HOME", t.TempDir())
	stdout, _ := cmd.StdoutPipe()
	var said strings.Builder
	cmd.Stderr = &lockedWriter{w: &said}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGINT); _ = cmd.Wait() }()
	deadline := time.AfterFunc(3*time.Minute, func() { _ = cmd.Process.Kill() })
	defer deadline.Stop()
	var reviewURL, cli string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if l, ok := strings.CutPrefix(sc.Text(), "review: "); ok {
			reviewURL = l
		}
		if l, ok := strings.CutPrefix(sc.Text(), "cli: "); ok {
			cli = l
			break
		}
	}
	stderr := said.String()
	if cli == "" {
		t.Fatalf("the demo did not come up:\n%s", stderr)
	}
	if !strings.Contains(stderr, "running unsandboxed because bwrap is not installed") || !strings.Contains(stderr, "apt-get install bubblewrap") {
		t.Fatalf("the demo does not say it runs unsandboxed and why:\n%s", stderr)
	}
	f := strings.Fields(cli) // LAZY_HOME=<home> lazy --project <root> task list
	home, root := strings.TrimPrefix(f[0], "LAZY_HOME="), f[3]
	p := &project{t: t, root: root, home: home, paths: api.StatePaths(home, root), env: withEnv(withEnv(os.Environ(), "PATH", path), "LAZY_HOME", home)}
	pl := p.waitThreads("greeting", "the demo's question answered", func(pl review.Payload) bool {
		for _, th := range pl.Threads {
			for _, m := range th.Messages {
				if m.Intent == review.Ask && m.AskState == review.AskAnswered {
					return true
				}
			}
		}
		return false
	})
	sawAnswer := false
	for _, th := range pl.Threads {
		for _, m := range th.Messages {
			if strings.Contains(m.Body, "@answer") || strings.Contains(m.Body, "@write") {
				t.Errorf("a directive shows in the thread: %q", m.Body)
			}
			if strings.Contains(m.Body, "A greeting should never fail") {
				sawAnswer = true
			}
		}
	}
	if !sawAnswer {
		t.Errorf("the model's answer is not in the thread: %+v", pl.Threads)
	}

	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	get := func(u string) string {
		t.Helper()
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d\n%s", u, resp.StatusCode, b)
		}
		return string(b)
	}
	get(reviewURL) // logs in
	base := reviewURL[:strings.Index(reviewURL, "/review")]
	page := html.UnescapeString(get(base + "/review/greeting"))
	if !strings.Contains(page, demoQuestionText) || strings.Contains(page, "@answer") {
		t.Errorf("the review page does not show the question as asked (or shows a directive)")
	}
	if !strings.Contains(page, "install bubblewrap") || strings.Contains(page, `reach the network; set agent.runner = "auto" to sandbox them`) {
		t.Errorf("the banner advises a setting that would refuse every demo turn, or not how to sandbox:\n%s", bannerOf(page))
	}
	if out := p.lazy(0, "task", "list"); !strings.Contains(out, "blocked") {
		t.Errorf("the demo's tasks: %s", out)
	}
}

// demoQuestionText is the demo's question as the page shows it.
const demoQuestionText = `Why default to "world" instead of returning an error?`

// bannerOf is the part of a page around its runner warning, for a message.
func bannerOf(page string) string {
	i := strings.Index(page, "agent.runner")
	if i < 0 {
		return "(no runner banner)"
	}
	return page[max(0, i-200):min(len(page), i+300)]
}

// lockedWriter is a writer several goroutines may use.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
