package main

import (
	"html"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lazy/gitx/gitxtest"
)

// withSetup adds a [setup] section to the project's config.
func withSetup(t *testing.T, p *project, commands ...string) {
	t.Helper()
	cfgPath := filepath.Join(p.root, ".lazy", "config.toml")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var q []string
	for _, c := range commands {
		q = append(q, `'`+c+`'`) // TOML literal strings
	}
	cfg = append(cfg, []byte("[setup]\nrun = ["+strings.Join(q, ", ")+"]\n")...)
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
}

// taskPage is the task's page as the dashboard renders it, unescaped.
func (p *project) taskPage(ref string) string {
	p.t.Helper()
	resp, err := p.request("GET", "/tasks/"+ref, "", "")
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		p.t.Fatalf("task page: %d %s", resp.StatusCode, b)
	}
	return html.UnescapeString(string(b))
}

// TestSetupTurn: under the default runner, [setup] run runs in the task's
// sandbox and worktree before the first work turn, recorded as a turn of
// kind setup with its output; what it made the work turn sees and commits.
// It runs once: a later work turn gets no setup.
func TestSetupTurn(t *testing.T) {
	requireBwrap(t)
	p := newProject(t, "")
	withSetup(t, p, `mkdir -p gen && echo "made by setup as $(id -u) in $(pwd)" > gen/ready.txt`, `echo setup says hi; test -r "$HOME/.ssh/id_ed25519"`)
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "-m", "commit what setup made\n@commit take the generated file\n@answer done", "--code", "prep")
	ti := p.waitStatus("prep", "blocked")
	got := gitxtest.Git(t, p.root, "show", "lazy/prep:gen/ready.txt")
	if !strings.HasPrefix(got, "made by setup as 1000 in "+ti.Worktree) {
		t.Fatalf("gen/ready.txt on the branch: %q (worktree %s)", got, ti.Worktree)
	}
	page := p.taskPage("prep")
	for _, want := range []string{"setup 1 (start)", "$ echo setup says hi", "setup says hi\n", "work turn 1 (start)"} {
		if !strings.Contains(page, want) {
			t.Errorf("the task page lacks %q", want)
		}
	}
	p.lazy(0, "comment", "prep", "-m", "again\n@answer ok")
	p.waitTurns("prep", 2)
	p.waitStatus("prep", "blocked")
	if n := strings.Count(p.taskPage("prep"), "setup 1 (start)"); n != 1 {
		t.Errorf("%d setup turns after a second work turn, want 1", n)
	}
	// setup is counted apart from the work turns, and named
	if ti := p.show("prep"); ti.Turns != 2 || ti.Setup != 1 {
		t.Errorf("counts: turns %d setup %d, want 2 work turns and setup 1", ti.Turns, ti.Setup)
	}
	if out := p.lazy(0, "task", "show", "prep"); !strings.Contains(out, "turns: 2 (setup 1)") {
		t.Errorf("task show does not name the setup count:\n%s", out)
	}
}

// TestSetupFails: a failing setup command fails the task, naming the
// command; no work turn runs (the agent never called the model), and the
// commands after it never run.
func TestSetupFails(t *testing.T) {
	requireBwrap(t)
	p := newProject(t, "")
	withSetup(t, p, `echo first ran`, `echo oops >&2; exit 7`, `touch never-ran`)
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "-m", "@write x.txt x\n@commit x\n@answer done", "--code", "bad")
	ti := p.waitStatus("bad", "failed")
	if !strings.Contains(ti.FailReason, "setup command `echo oops >&2; exit 7`") || !strings.Contains(ti.FailReason, "status 7: oops") {
		t.Fatalf("fail reason %q does not name the command and its end", ti.FailReason)
	}
	if out := p.lazy(0, "task", "show", "bad"); !strings.Contains(out, "exit 7") {
		t.Errorf("lazy task show does not name the command:\n%s", out)
	}
	if n := len(p.stub.Requests()); n != 0 {
		t.Fatalf("the agent ran: %d model calls", n)
	}
	if _, err := os.Stat(filepath.Join(ti.Worktree, "never-ran")); err == nil {
		t.Fatal("the command after the failing one ran")
	}
	page := p.taskPage("bad")
	for _, want := range []string{"setup 1 (start)", "first ran", "oops", "not run: the setup failed"} {
		if !strings.Contains(page, want) {
			t.Errorf("the task page lacks %q", want)
		}
	}
}
