package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"lazy/review"
)

// devServer runs the dev web server for p on a free port and returns its URL.
func (p *project) devServer(t *testing.T, extra ...string) (string, *exec.Cmd) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	args := append([]string{"--project", p.root, "--port", fmt.Sprint(port), "--assets", filepath.Join("..", "..", "views", "static", "css")}, extra...)
	cmd := exec.Command(devserverBin, args...)
	cmd.Env = p.env
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "dev:server: http://127.0.0.1:") {
		t.Fatalf("dev server did not start: %q %v", line, err)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", port), cmd
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// bearerReq is a request with the auth token, as the CLI sends it (the dev
// server takes the daemon's logins).
func (p *project) bearerReq(method, u, ctype string, body io.Reader) *http.Request {
	p.t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		p.t.Fatal(err)
	}
	tok, err := os.ReadFile(p.paths.AuthToken)
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	return req
}

func get(t *testing.T, p *project, u string) (int, string, http.Header) {
	t.Helper()
	resp, err := noRedirect.Do(p.bearerReq("GET", u, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func postForm(t *testing.T, p *project, u string, v url.Values) (int, string, http.Header) {
	t.Helper()
	resp, err := noRedirect.Do(p.bearerReq("POST", u, "application/x-www-form-urlencoded", strings.NewReader(v.Encode())))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestDevServerDrivesTheReviewLoop(t *testing.T) {
	p := newProject(t, "process")
	cfgPath := filepath.Join(p.root, ".lazy", "config.toml")
	b, _ := os.ReadFile(cfgPath)
	_ = os.WriteFile(cfgPath, append(b, []byte("\n[protect]\npaths = [\".github/**\"]\n")...), 0o644)
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "dev", "-m", "@write .github/a.yml x\\ny\n@commit ci")
	ti := p.waitStatus("dev", "blocked")
	base, _ := p.devServer(t)

	// the same pages, served by the dev server from the daemon's data
	// the dev server takes the daemon's logins, and nothing else
	if resp, err := http.Get(base + "/review"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the dev server without a login: %v %v", resp.StatusCode, err)
	}
	for _, path := range []string{"/", "/review", "/review/dev", "/tasks/dev"} {
		if code, body, _ := get(t, p, base+path); code != 200 || !strings.Contains(body, "dev") {
			t.Fatalf("GET %s: %d", path, code)
		}
	}
	// post an ask (JSON) and a comment (form) through the dev server
	resp, err := noRedirect.Do(p.bearerReq("POST", base+"/review/dev/comment", "application/json", strings.NewReader(`{"body":"why y?\n@answer because","file":".github/a.yml","line":2,"side":"new","intent":"ask"}`)))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("ask through the dev server: %v %v", resp.StatusCode, err)
	}
	var ask review.ReviewComment
	_ = json.NewDecoder(resp.Body).Decode(&ask)
	resp.Body.Close()
	p.waitThreads("dev", "the ask answered", func(pl review.Payload) bool { return find(pl, ask.ID).AskState == review.AskAnswered })
	// a refused accept shows the remedy panel, served by the dev server
	code, _, hdr := postForm(t, p, base+"/review/dev/accept", url.Values{"reason": {"fine"}, "draft_feedback": {"kept"}, "head": {p.pageHead("dev")}})
	if code != 303 {
		t.Fatalf("refused accept through the dev server: %d, want 303 to the page", code)
	}
	_, body, _ := get(t, p, base+hdr.Get("Location"))
	if !strings.Contains(body, `class="remedy"`) || !strings.Contains(body, "lazy accept dev --reason fine --approve-file .github/a.yml") || !strings.Contains(body, `name="draft_feedback" value="kept"`) {
		t.Fatalf("refused accept through the dev server: %d", code)
	}
	code, _, hdr = postForm(t, p, base+"/review/dev/comment", url.Values{"body": {"rename x"}, "file": {".github/a.yml"}, "line": {"1"}, "side": {"new"}, "intent": {"comment"}})
	if code != 303 || !strings.HasPrefix(hdr.Get("Location"), "/review/"+ti.ID) {
		t.Fatalf("form comment: %d %s", code, hdr.Get("Location"))
	}
	// the daemon's store changed
	p.waitThreads("dev", "the ask answered", func(pl review.Payload) bool {
		return find(pl, ask.ID).AskState == review.AskAnswered && pl.PendingDelivery == 1
	})
	// with a comment queued, an accept is refused until it is delivered
	code, _, hdr = postForm(t, p, base+"/review/dev/accept", url.Values{"reason": {"fine"}, "draft_feedback": {"kept"}, "head": {p.pageHead("dev")}})
	_, body, _ = get(t, p, base+hdr.Get("Location"))
	if code != 303 || !strings.Contains(body, "queued for the agent") || !strings.Contains(body, `name="draft_feedback" value="kept"`) {
		t.Fatalf("accept with a queued comment through the dev server: %d", code)
	}
	// unblock: 303 to the task page; the daemon delivers the comment
	code, _, hdr = postForm(t, p, base+"/review/dev/unblock", url.Values{"feedback": {"go on"}})
	if code != 303 || !strings.HasPrefix(hdr.Get("Location"), "/tasks/"+ti.ID) {
		t.Fatalf("unblock: %d %s", code, hdr.Get("Location"))
	}
	p.waitThreads("dev", "delivery", func(pl review.Payload) bool { return pl.PendingDelivery == 0 })
	p.waitStatus("dev", "blocked")
	if out := p.lazy(0, "task", "show", "dev"); !strings.Contains(out, "work turn 2 (unblock) done") {
		t.Errorf("the unblock did not run on the daemon:\n%s", out)
	}

	// the daemon stops: requests fail loudly with the fix; it comes back: they work
	p.lazy(0, "daemon", "stop")
	code, body, _ = get(t, p, base+"/review/dev")
	if code != 503 || !strings.Contains(body, "lazy daemon start") {
		t.Fatalf("with the daemon stopped: %d %q", code, body)
	}
	p.lazy(0, "daemon", "start")
	if code, _, _ := get(t, p, base+"/review/dev"); code != 200 {
		t.Fatalf("after the daemon came back: %d", code)
	}
	if code, _, _ := get(t, p, base+"/"); code != 200 {
		t.Fatalf("task list after the daemon came back: %d", code)
	}
}

func TestDevServerStylesheetAndRefusals(t *testing.T) {
	p := newProject(t, "process")
	// no daemon: refuses to start and names the fix
	cmd := exec.Command(devserverBin, "--project", p.root, "--port", "26999")
	cmd.Env = p.env
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "lazy daemon start") || !strings.Contains(string(out), "never opens the store") {
		t.Fatalf("without a daemon: %v %s", err, out)
	}
	if _, err := os.Stat(p.paths.DB); err == nil {
		t.Error("the dev server created a store")
	}
	p.lazy(0, "daemon", "start")
	// the stylesheet: parts composed in order, re-read per request, no-store
	parts := t.TempDir()
	src := filepath.Join("..", "..", "views", "static", "css")
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(src, e.Name()))
		_ = os.WriteFile(filepath.Join(parts, e.Name()), b, 0o644)
	}
	base, _ := p.devServer(t, "--assets", parts)
	code, css, hdr := get(t, p, base+"/assets/app.css")
	if code != 200 || hdr.Get("Cache-Control") != "no-store" || !strings.Contains(css, "/* --- base.css --- */") ||
		strings.Index(css, "--- base.css") > strings.Index(css, "--- statusbar.css") {
		t.Fatalf("app.css: %d %q", code, hdr.Get("Cache-Control"))
	}
	if err := os.WriteFile(filepath.Join(parts, "diff.css"), []byte(".edited-now { color: red; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, css, _ := get(t, p, base+"/assets/app.css"); !strings.Contains(css, ".edited-now") {
		t.Error("an edited part did not show on the next request")
	}
	// port busy: an error naming the port, no move to another
	port := strings.TrimPrefix(base, "http://127.0.0.1:")
	busy := exec.Command(devserverBin, "--project", p.root, "--port", port, "--assets", parts)
	busy.Env = p.env
	bout, berr := busy.CombinedOutput()
	if berr == nil || !strings.Contains(string(bout), "port "+port+" on 127.0.0.1 is busy") {
		t.Fatalf("busy port: %v %s", berr, bout)
	}
	// dev:server is a package script, not a lazy command
	pkg, _ := os.ReadFile(filepath.Join("..", "..", "package.json"))
	var pj struct{ Scripts map[string]string }
	if err := json.Unmarshal(pkg, &pj); err != nil || pj.Scripts["dev:server"] != "go run ./cmd/devserver" {
		t.Errorf("package.json dev:server script: %q %v", pj.Scripts["dev:server"], err)
	}
	if _, errs, code := p.run("dev:server"); code != 2 || !strings.Contains(errs, "unknown command") {
		t.Errorf("lazy dev:server must not exist: %d %s", code, errs)
	}
	comp, _ := exec.Command(lazyBin, "completion", "bash").Output()
	if strings.Contains(string(comp), "dev:server") || strings.Contains(string(comp), "devserver") {
		t.Error("the dev server is in the completion")
	}
}
