package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"lazy/api"
	"lazy/gitx/gitxtest"
	"lazy/stubmodel"
)

// TestFirstHourFromTheREADME (issue 25's "first hour" script): every step
// of the README's "Using it on a project", run as written on a repository
// the test makes, with the scripted agent against the stub model, and the
// default runner (bwrap). It fails on any step that prints "internal
// error", answers a browser with a raw JSON body, or exits 0 after a
// failure (each step's effect is checked, not only its exit code). A step
// added to the README without a case here fails the test.
func TestFirstHourFromTheREADME(t *testing.T) {
	runner := ""
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("bwrap is not installed: make test installs bubblewrap")
		}
		runner = "process" // a developer machine without bubblewrap
	}
	steps := readmeSteps(t)
	if len(steps) < 10 {
		t.Fatalf("the README's \"Using it on a project\" has %d steps: %q", len(steps), steps)
	}

	root := gitxtest.NewRepoIn(t, artifactDir(t, "root"), map[string]string{"README.md": "# app\n", "main.go": "package main\n"})
	stub := stubmodel.New()
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	home := artifactDir(t, "home")
	p := &project{t: t, root: root, home: home, stub: stub, real: "sk-ant-api03-REALSECRET" + strings.Repeat("y", 20),
		paths: api.StatePaths(home, root), upstream: srv.URL}
	// only what the test must say differently from a user: the stub model,
	// the scripted agent, and a runner where bwrap is missing off CI
	p.env = append(os.Environ(), "LAZY_HOME="+home, "LAZY_AGENT__DRIVER=script", "LAZY_PROXY__UPSTREAM="+srv.URL, "LAZY_PROXY__CREDENTIAL=provider")
	if runner != "" {
		p.env = append(p.env, "LAZY_AGENT__RUNNER="+runner)
	}
	t.Cleanup(func() {
		cmd := exec.Command(lazyBin, "daemon", "stop", "--project", root)
		cmd.Env = p.env
		_ = cmd.Run()
	})

	// what the scripted agent does on each step that talks to it: the
	// README's own words first, then the agent's directives
	directives := map[string]string{
		"task new": "\n@write login.go package main\\n\\nfunc login() {}\\n\n@commit fix the login redirect loop\n@answer fixed",
		"comment":  "\n@write login_test.go package main\\n\n@commit add a test\n@answer test added",
		"unblock":  "\n@write login.go package main\\n\\n// login signs in.\\nfunc login() {}\\n\n@commit clean up\n@answer cleaned up",
	}
	var watch *exec.Cmd
	var watchOut strings.Builder
	var openURL string
	checked := map[string]bool{}
	for _, step := range steps {
		args := step.args
		t.Logf("step: %s", step.line)
		if args[0] != "lazy" {
			runShellStep(t, p, step)
			checked[args[0]] = true
			continue
		}
		name := args[1]
		if len(args) > 2 && !strings.HasPrefix(args[2], "-") && (name == "daemon" || name == "task" || name == "passphrase") {
			name += " " + args[2]
		}
		checked[name] = true
		cmdArgs := append([]string(nil), args[1:]...)
		if d, ok := directives[name]; ok {
			for i, a := range cmdArgs {
				if a == "-m" {
					cmdArgs[i+1] += d
				}
			}
		}
		switch name {
		case "watch":
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			watch = exec.CommandContext(ctx, lazyBin, append(cmdArgs, "--project", root)...)
			watch.Env, watch.Stdout, watch.Stderr = p.env, &lockedWriter{w: &watchOut}, &lockedWriter{w: &watchOut}
			if err := watch.Start(); err != nil {
				t.Fatal(err)
			}
			continue
		case "passphrase set":
			c := exec.Command(lazyBin, append(cmdArgs, "--project", root)...)
			c.Env, c.Stdin = p.env, strings.NewReader("first hour passphrase\n")
			out, err := c.CombinedOutput()
			noFailureWords(t, step.line, string(out))
			if err != nil || !strings.Contains(string(out), "passphrase set") {
				t.Fatalf("%s: %v\n%s", step.line, err, out)
			}
			continue
		}
		out, errOut, code := p.run(cmdArgs...)
		noFailureWords(t, step.line, out+errOut)
		if code != 0 {
			t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", step.line, code, out, errOut)
		}
		// each step did what it says (an exit 0 after a failure fails here)
		switch name {
		case "init":
			if _, err := os.Stat(filepath.Join(root, ".lazy", "config.toml")); err != nil {
				t.Fatalf("lazy init wrote no config: %v", err)
			}
		case "daemon start":
			for _, want := range []string{"daemon: running", "dashboard: http://127.0.0.1:", "sandbox: "} {
				if !strings.Contains(out, want) {
					t.Fatalf("lazy daemon start printed no %q:\n%s", want, out)
				}
			}
			if runner == "" && strings.Contains(out, "sandbox: unavailable") {
				t.Fatalf("bwrap is installed but the sandbox is unavailable:\n%s", out)
			}
		case "open":
			m := regexp.MustCompile(`http://127\.0\.0\.1:\d+/\?token=[0-9a-f]+`).FindString(out)
			if m == "" {
				t.Fatalf("lazy open printed no login address:\n%s", out)
			}
			openURL = m
			browserSees(t, openURL, "/", filepath.Base(root))
		case "task new":
			if !strings.Contains(out, "fix-login") {
				t.Fatalf("task new printed no task ref:\n%s", out)
			}
			ti := p.waitStatus("fix-login", "blocked")
			if ti.Turns != 1 {
				t.Fatalf("after the first work turn: %d turns", ti.Turns)
			}
		case "task list":
			if !strings.Contains(out, "fix-login") || !strings.Contains(out, "blocked") {
				t.Fatalf("task list:\n%s", out)
			}
			id := p.show("fix-login").ID
			browserSees(t, openURL, "/review/"+id, "login.go")
			browserSees(t, openURL, "/tasks/"+id, "fix-login")
			browserFormErrorIsHTML(t, openURL, "/review/"+id)
		case "comment":
			waitTurns(p, "fix-login", 2)
			if !gitHas(t, root, "lazy/fix-login", "login_test.go") {
				t.Fatal("the comment's work turn left no login_test.go on the task branch")
			}
		case "unblock":
			waitTurns(p, "fix-login", 3)
		case "sync":
			if st := p.show("fix-login").Status; st != "blocked" {
				t.Fatalf("after a clean sync the task is %s", st)
			}
		case "accept":
			if st := p.show("fix-login").Status; st != "accepted" {
				t.Fatalf("accept exited 0 but the task is %s", st)
			}
			if !gitHas(t, root, "main", "login_test.go") {
				t.Fatal("accept exited 0 but main lacks the task's files")
			}
			// a refusal after the fact: exit 1, a sentence, no internal error
			for _, again := range [][]string{{"accept", "fix-login", "--reason", "again"}, {"sync", "fix-login"}, {"unblock", "fix-login", "-m", "more"}} {
				out, errOut, code := p.run(again...)
				noFailureWords(t, strings.Join(again, " "), out+errOut)
				if code != 1 || strings.TrimSpace(errOut) == "" {
					t.Fatalf("lazy %s on an accepted task: exit %d, stderr %q", strings.Join(again, " "), code, errOut)
				}
			}
		case "daemon stop":
			if !strings.Contains(p.lazy(0, "daemon", "status"), "daemon: not running") {
				t.Fatal("lazy daemon stop exited 0 but the daemon runs")
			}
		}
	}
	if watch != nil {
		_ = watch.Wait() // the daemon stopped: the stream ends
		if w := watchOut.String(); !strings.Contains(w, "fix-login") {
			t.Fatalf("lazy watch showed nothing of the task:\n%s", w)
		}
		noFailureWords(t, "lazy watch", watchOut.String())
	}
	for _, want := range []string{"init", "daemon start", "open", "task new", "watch", "task list", "comment", "unblock", "sync", "passphrase set", "accept", "daemon stop"} {
		if !checked[want] {
			t.Errorf("the README's first hour no longer runs lazy %s", want)
		}
	}
}

// readmeStep is one command line of the README's first hour.
type readmeStep struct {
	line string
	args []string
}

// readmeSteps are the command lines of the README's "Using it on a
// project" block, comments and optional [..] parts removed.
func readmeSteps(t *testing.T) []readmeStep {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "## Using it on a project")
	if i < 0 {
		t.Fatal(`the README has no "## Using it on a project"`)
	}
	s = s[i:]
	start := strings.Index(s, "```sh\n")
	end := strings.Index(s[start+6:], "```")
	if start < 0 || end < 0 {
		t.Fatal("the README's first hour has no ```sh block")
	}
	var steps []readmeStep
	for _, l := range strings.Split(s[start+6:start+6+end], "\n") {
		l = strings.TrimSpace(stripComment(l))
		l = regexp.MustCompile(`\s*\[[^\]]*\]`).ReplaceAllString(l, "")
		if l == "" {
			continue
		}
		steps = append(steps, readmeStep{line: l, args: shellWords(l)})
	}
	return steps
}

// stripComment cuts a shell comment (a # after a blank, outside quotes).
func stripComment(l string) string {
	quote := byte(0)
	for i := 0; i < len(l); i++ {
		switch c := l[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t'):
			return l[:i]
		}
	}
	return l
}

// shellWords splits a simple command line (quotes kept together).
func shellWords(l string) []string {
	var words []string
	var cur strings.Builder
	quote, in := byte(0), false
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '"' || c == '\'':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// runShellStep runs the README's non-lazy lines that concern the test's
// project (the credential recipe), and passes over the ones about the
// machine (building, installing packages, cd).
func runShellStep(t *testing.T, p *project, step readmeStep) {
	t.Helper()
	switch step.args[0] {
	case "go", "cd", "apt-get":
		return // the test's binary is built, bwrap is what the machine has, the project is p.root
	case "mkdir", "install":
		line := strings.ReplaceAll(step.line, "~/.lazy", p.home)
		c := exec.Command("bash", "-c", line)
		c.Env = withEnv(p.env, "ANTHROPIC_API_KEY", p.real)
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", step.line, err, out)
		}
	default:
		t.Fatalf("the README's first hour has a step the test does not know: %s", step.line)
	}
}

// noFailureWords fails on output that hides a failure behind words.
func noFailureWords(t *testing.T, step, out string) {
	t.Helper()
	for _, bad := range []string{"internal error", "panic:", "goroutine "} {
		if strings.Contains(out, bad) {
			t.Fatalf("%s printed %q:\n%s", step, bad, out)
		}
	}
}

// browserSees opens path in a browser-like client logged in through the
// `lazy open` address: an HTML page naming want, never JSON.
func browserSees(t *testing.T, openURL, path, want string) {
	t.Helper()
	c := browserClient(t, openURL)
	u, _ := url.Parse(openURL)
	req, _ := http.NewRequest(http.MethodGet, u.Scheme+"://"+u.Host+path, nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(body), want) {
		t.Fatalf("GET %s as a browser: %d %s, want an HTML page naming %q:\n%.400s", path, res.StatusCode, res.Header.Get("Content-Type"), want, body)
	}
}

// browserFormErrorIsHTML posts a form the page would refuse (no form
// token) as a browser does: the answer is an HTML page, not JSON.
func browserFormErrorIsHTML(t *testing.T, openURL, reviewPath string) {
	t.Helper()
	c := browserClient(t, openURL)
	u, _ := url.Parse(openURL)
	origin := u.Scheme + "://" + u.Host
	req, _ := http.NewRequest(http.MethodPost, origin+reviewPath+"/unblock", strings.NewReader("feedback=keep+this+text"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	req.Header.Set("Origin", origin)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode < 400 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") || strings.HasPrefix(strings.TrimSpace(string(body)), "{") {
		t.Fatalf("a refused form as a browser: %d %s:\n%.400s", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	if !strings.Contains(string(body), "keep this text") {
		t.Fatalf("the refused form's page lost what was typed:\n%.600s", body)
	}
}

// browserClient is a cookie-keeping client logged in through openURL.
func browserClient(t *testing.T, openURL string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	res, err := c.Get(openURL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return c
}

// waitTurns waits for the task to be blocked after its n-th work turn.
func waitTurns(p *project, ref string, n int) {
	p.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		ti := p.show(ref)
		if ti.Turns >= n && ti.Status == "blocked" {
			return
		}
		if ti.Status == "failed" || time.Now().After(deadline) {
			p.t.Fatalf("task %s: %s after %d turns (%s), want blocked after turn %d", ref, ti.Status, ti.Turns, ti.FailReason, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// gitHas says whether rev's tree holds path in the repository at root.
func gitHas(t *testing.T, root, rev, path string) bool {
	t.Helper()
	return exec.Command("git", "-C", root, "cat-file", "-e", rev+":"+path).Run() == nil
}
