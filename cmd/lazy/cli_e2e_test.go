package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"lazy/api"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCLIAnswers: a mistyped subcommand is a usage error (2), not help and
// success; with --json a refusal is a JSON object on stdout (exit 1);
// accept refuses an empty reason; task show --json carries the turns.
func TestCLIAnswers(t *testing.T) {
	p := newProject(t, "process")
	for _, args := range [][]string{{"task", "lst"}, {"daemn", "start"}, {"lst"}} {
		if _, errOut, code := p.run(args...); code != 2 || !strings.Contains(errOut, "unknown command") {
			t.Errorf("lazy %v: exit %d, %s", args, code, errOut)
		}
	}
	if _, _, code := p.run("task"); code != 0 {
		t.Errorf("lazy task alone (help): exit %d", code)
	}
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "cli", "-m", writeAndCommit)
	p.waitStatus("cli", "blocked")
	out, _, code := p.run("accept", "cli", "--reason", " ", "--json")
	var refusal struct {
		Error string `json:"error"`
	}
	if code != 1 || json.Unmarshal([]byte(out), &refusal) != nil || !strings.Contains(refusal.Error, "say why you accept") {
		t.Fatalf("accept with an empty reason: exit %d, %q", code, out)
	}
	if st := p.show("cli").Status; st != "blocked" {
		t.Fatalf("an accept with no reason merged: %s", st)
	}
	out, _, code = p.run("task", "show", "nope", "--json")
	if code != 1 || json.Unmarshal([]byte(out), &refusal) != nil || refusal.Error == "" {
		t.Fatalf("a refusal with --json: exit %d, %q", code, out)
	}
	var shown struct {
		Turns       int `json:"turns"`
		TurnRecords []struct {
			Number int    `json:"number"`
			Status string `json:"status"`
		} `json:"turn_records"`
	}
	if err := json.Unmarshal([]byte(p.lazy(0, "task", "show", "cli", "--json")), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.Turns != 1 || len(shown.TurnRecords) != 1 || shown.TurnRecords[0].Number != 1 {
		t.Fatalf("task show --json: %+v", shown)
	}
}

// TestAskFromTheCLI: lazy ask posts the question on a line and, with
// --wait, prints the agent's answer when it lands.
func TestAskFromTheCLI(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "q", "-m", fourLines)
	p.waitStatus("q", "blocked")
	out := p.lazy(0, "ask", "q", "--file", "a.go", "--line", "2", "-m", "why two?\n@answer Because two follows one.", "--wait")
	if strings.TrimSpace(out) != "Because two follows one." {
		t.Fatalf("lazy ask --wait: %q", out)
	}
	if _, errOut, code := p.run("ask", "q", "--file", "a.go", "-m", "no line"); code != 2 || !strings.Contains(errOut, "--line") {
		t.Fatalf("an ask without a line: exit %d %s", code, errOut)
	}
	pl := p.threads("q")
	if len(pl.Threads) != 1 || len(pl.Threads[0].Messages) != 2 || pl.Threads[0].Line != 2 {
		t.Fatalf("threads: %+v", pl.Threads)
	}
}

// TestStopEndsWatchers: lazy daemon stop with watchers attached ends their
// streams at once; each watcher says "daemon stopped" and exits 0.
func TestStopEndsWatchers(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	var watchers []*watcher
	for _, args := range [][]string{{}, {"--net"}} {
		watchers = append(watchers, p.startWatch(context.Background(), args...))
	}
	start := time.Now()
	p.lazy(0, "daemon", "stop")
	took := time.Since(start)
	for i, w := range watchers {
		var out []string
		timeout := time.After(5 * time.Second)
	read:
		for {
			select {
			case l, ok := <-w.lines:
				if !ok {
					break read
				}
				out = append(out, l)
			case <-timeout:
				t.Fatalf("watcher %d still running after the daemon stopped", i)
			}
		}
		if err := <-w.done; err != nil || !strings.Contains(strings.Join(out, "\n"), "daemon stopped") {
			t.Errorf("watcher %d: %v, output %q", i, err, out)
		}
	}
	if took > 5*time.Second {
		t.Fatalf("lazy daemon stop took %s with watchers attached", took)
	}
	t.Logf("lazy daemon stop with 2 watchers attached: %s", took)
}

// TestTryOffline: the GUIDE's "Try it offline" — lazy stub-upstream by
// itself, a project configured as it prints, a task with the scripted agent.
func TestTryOffline(t *testing.T) {
	p := newProject(t, "process")
	stub := exec.Command(lazyBin, "stub-upstream")
	stub.Env = p.env
	out, _ := stub.StdoutPipe()
	if err := stub.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stub.Process.Kill(); stub.Wait() }()
	sc := bufio.NewScanner(out)
	var url string
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "stub model upstream on "); ok {
			url, _, _ = strings.Cut(rest, " ")
			break
		}
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("stub-upstream printed %q", url)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	cfg := fmt.Sprintf("[agent]\ndriver = \"script\"\nrunner = \"process\"\n[proxy]\nupstream = %q\ncredential = \"provider\"\n", url)
	if err := os.WriteFile(filepath.Join(p.root, ".lazy", "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "off", "-m", writeAndCommit)
	p.waitStatus("off", "blocked")
	if _, _, code := p.run("stub-upstream", "--listen", "0.0.0.0:0"); code != 2 {
		t.Errorf("a stub on all interfaces: exit %d", code)
	}
}

// TestUnreachableUpstreamNamed: with the model unreachable, the cause is on
// task show within seconds, the failed turn's reason carries it, and watch
// says so — not only "the agent exited with status 1".
func TestUnreachableUpstreamNamed(t *testing.T) {
	p := newProject(t, "process")
	cfg, _ := os.ReadFile(filepath.Join(p.root, ".lazy", "config.toml"))
	dead := strings.Replace(string(cfg), p.upstream, "http://127.0.0.1:1", 1) // nothing listens on port 1
	if err := os.WriteFile(filepath.Join(p.root, ".lazy", "config.toml"), []byte(dead), 0o644); err != nil {
		t.Fatal(err)
	}
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "down", "-m", writeAndCommit)
	ti := p.waitStatus("down", "failed")
	if !strings.Contains(ti.ModelError, "model upstream unreachable") || !strings.Contains(ti.ModelError, "connection refused") {
		t.Errorf("task show: model_error %q", ti.ModelError)
	}
	if !strings.Contains(ti.FailReason, "model upstream unreachable") {
		t.Errorf("the failed turn's reason does not name the cause: %q", ti.FailReason)
	}
	if out := p.lazy(0, "task", "show", "down"); !strings.Contains(out, "model: model upstream unreachable") {
		t.Errorf("task show text: %s", out)
	}
}

// TestTasksMadeTogether: tasks made in the same second without a code get
// short ids (and branches) of their own; a branch left by hand is never
// answered with advice to delete another task's branch.
func TestTasksMadeTogether(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	const n = 3
	outs := make(chan string, n)
	for i := 0; i < n; i++ {
		go func() {
			out, errOut, code := p.run("task", "new", "-m", "@answer hi", "--json")
			if code != 0 {
				out = "exit " + errOut
			}
			outs <- out
		}()
	}
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		var res api.TaskInfo
		out := <-outs
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("task new: %s", out)
		}
		short := res.ShortID
		if seen[short] {
			t.Fatalf("short id %s given to two tasks", short)
		}
		seen[short] = true
		if got := p.show(short); got.ID != res.ID || got.Branch != "lazy/"+short {
			t.Fatalf("%s resolves to %s on %s", short, got.ID, got.Branch)
		}
	}
	runGit(t, p.root, "branch", "lazy/mine")
	_, errOut, code := p.run("task", "new", "--code", "mine", "-m", "@answer hi")
	if code == 0 || !strings.Contains(errOut, "no task owns it") {
		t.Fatalf("a branch left by hand: exit %d, %s", code, errOut)
	}
}

// TestConfigReload: an edit of .lazy/config.toml reaches the next turn with
// no restart; a change that needs one is named in `lazy daemon status` and on
// the dashboard; a file that does not load changes nothing and says why.
func TestConfigReload(t *testing.T) {
	p := newProject(t, "process")
	path := filepath.Join(p.root, ".lazy", "config.toml")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	save := func(text string) { // as editors save: a new file renamed over the old
		if err := os.WriteFile(path+".tmp", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	save(strings.Replace(string(good), "[agent]\n", "[agent]\ncommand = \"/nonexistent/agent-one\"\n", 1))
	p.lazy(0, "daemon", "start")
	// the script driver with a command of its own runs that command, and
	// says so (never silently)
	if _, errOut, _ := p.run("daemon", "status"); !strings.Contains(errOut, `agent.driver = "script" runs agent.command "/nonexistent/agent-one"`) {
		t.Fatalf("daemon status does not say the script driver runs agent.command:\n%s", errOut)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lines := p.watch(ctx)
	waitLine := func(want string) time.Duration {
		t.Helper()
		start := time.Now()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case l := <-lines:
				if strings.Contains(l, want) {
					return time.Since(start)
				}
			case <-deadline:
				t.Fatalf("watch never said %q", want)
			}
		}
	}
	p.lazy(0, "task", "new", "--code", "cfg", "-m", writeAndCommit)
	if ti := p.waitStatus("cfg", "failed"); !strings.Contains(ti.FailReason, "agent-one") {
		t.Fatalf("the first turn failed for another reason: %s", ti.FailReason)
	}

	save(string(good))
	took := waitLine("config applied: agent.command")
	p.lazy(0, "unblock", "cfg", "-m", writeAndCommit)
	p.waitStatus("cfg", "blocked")
	t.Logf("config saved → applied: %s", took)

	save(strings.Replace(string(good), "[daemon]\n", "[daemon]\ndashboard_listen = \"127.0.0.1:27198\"\n", 1))
	waitLine("config restart needed: daemon.dashboard_listen")
	if out := p.lazy(0, "daemon", "status"); !strings.Contains(out, "dashboard: "+p.info().BaseURL) {
		t.Fatalf("status: %s", out)
	}
	_, errOut, _ := p.run("daemon", "status")
	if !strings.Contains(errOut, "restart needed: daemon.dashboard_listen") {
		t.Fatalf("daemon status does not name the restart: %s", errOut)
	}
	resp, err := p.get("/review")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "restart needed: daemon.dashboard_listen") {
		t.Fatalf("the dashboard does not name the restart:\n%s", page)
	}

	save("[agent\n")
	waitLine("config not applied")
	var st struct {
		Daemon api.DaemonInfo `json:"daemon"`
	}
	if err := json.Unmarshal([]byte(p.lazy(0, "daemon", "status", "--json")), &st); err != nil || !strings.Contains(st.Daemon.ConfigError, "TOML") {
		t.Fatalf("status --json: config_error %q (%v)", st.Daemon.ConfigError, err)
	}
	p.lazy(0, "unblock", "cfg", "-m", writeAndCommit)
	p.waitStatus("cfg", "blocked") // the settings in force before the bad save

	save(string(good))
	waitLine("config applied")
	st.Daemon = api.DaemonInfo{} // omitted fields keep what Unmarshal finds
	if err := json.Unmarshal([]byte(p.lazy(0, "daemon", "status", "--json")), &st); err != nil || st.Daemon.ConfigError != "" || len(st.Daemon.RestartNeeded) != 0 {
		t.Fatalf("after the fix: %+v (%v)", st.Daemon, err)
	}
}
