package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lazy/proxy"
)

// TestHostileAgent runs an agent of our own under the DEFAULT runner that
// tries every attack of issue 10 from inside: read the credential, the grant
// registry, the auth token, the daemon's environment; reach the dashboard,
// the RPC, the upstream, any loopback port, the outside; call the proxy with
// no key, a junk key, a revoked placeholder, another task's placeholder, the
// editor route with a model placeholder, as a web page; plant a git hook and
// config and then make the daemon run git. Nothing works; every refusal and
// the tripwire show on `lazy watch --net`; the task records the tripwire.
func TestHostileAgent(t *testing.T) {
	requireBwrap(t)
	bin := filepath.Join(t.TempDir(), "hostile")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/hostile").CombinedOutput(); err != nil {
		t.Fatalf("build the hostile agent: %v\n%s", err, out)
	}
	p := newProject(t, "") // the default runner
	p.lazy(0, "daemon", "start")
	// a live task (its placeholder is "another task's") and an ended one
	p.lazy(0, "task", "new", "-m", "@answer idle", "--code", "other")
	p.waitStatus("other", "blocked")
	p.lazy(0, "task", "new", "-m", "@answer idle", "--code", "gone")
	p.waitStatus("gone", "blocked")
	grants, err := proxy.LoadGrants(p.paths.ProxyTokens)
	if err != nil {
		t.Fatal(err)
	}
	phs := map[string]string{}
	for ph, g := range grants {
		phs[g.TaskRef] = ph
	}
	p.lazy(0, "task", "cancel", "gone")
	if phs["other"] == "" || phs["gone"] == "" {
		t.Fatalf("grants: %v", grants)
	}

	// the hostile agent takes over agent.command
	p.lazy(0, "daemon", "stop")
	cfg, _ := os.ReadFile(filepath.Join(p.root, ".lazy", "config.toml"))
	cfgText := strings.Replace(string(cfg), `driver = "script"`, fmt.Sprintf("driver = \"claude-code\"\ncommand = %q", bin), 1)
	if err := os.WriteFile(filepath.Join(p.root, ".lazy", "config.toml"), []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	out := p.lazy(0, "daemon", "start")
	if strings.Contains(out, "warning") {
		t.Fatalf("the default runner must sandbox without a warning: %s", out)
	}
	info := p.info()
	if info.Runner != "bwrap" {
		t.Fatalf("runner %q, want bwrap (auto)", info.Runner)
	}
	// status says what the agent gets and how its limits are enforced
	if st := p.lazy(0, "daemon", "status"); !strings.Contains(st, "sandbox: bwrap: uid 1000 in its own user namespace, no capabilities, seccomp; limits: open files 4096, processes 2048, memory 8 GiB per sandbox (cgroup v1), /tmp 512 MiB") {
		t.Errorf("daemon status lacks the sandbox line:\n%s", st)
	}
	anyPort, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer anyPort.Close()
	upPort := 0
	fmt.Sscanf(p.upstream[strings.LastIndex(p.upstream, ":")+1:], "%d", &upPort)
	marker := filepath.Join(p.home, "PWNED")
	plan, _ := json.Marshal(map[string]any{
		"files": []string{filepath.Join(p.home, "credentials", "provider"), p.paths.ProxyTokens, p.paths.AuthToken, p.paths.DB,
			p.paths.Log, p.paths.DaemonJSON, fmt.Sprintf("/proc/%d/environ", info.PID), fmt.Sprintf("/proc/%d/cmdline", info.PID)},
		"ports":        map[string]int{"dashboard and RPC": info.DashboardPort, "upstream": upPort, "a loopback service": anyPort.Addr().(*net.TCPAddr).Port},
		"placeholders": map[string]string{"other": phs["other"], "revoked": phs["gone"]},
		"marker":       marker,
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lines := p.watchNet(ctx)
	p.lazy(0, "task", "new", "-m", string(plan), "--code", "evil")
	ti := p.waitStatus("evil", "blocked")

	var report []struct {
		Name    string `json:"name"`
		Worked  bool   `json:"worked"`
		Status  int    `json:"status"`
		Refused string `json:"refused"`
		Detail  string `json:"detail"`
	}
	b, err := os.ReadFile(filepath.Join(ti.Worktree, "report.json"))
	if err != nil {
		t.Fatalf("no report from the hostile agent: %v (task %+v)", err, ti)
	}
	p.keep("hostile-report.json", string(b))
	if err := json.Unmarshal(b, &report); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // proxy attempt -> the refusal it must get
		"proxy: revoked placeholder":                   proxy.CauseUnknownPlaceholder,
		"proxy: editor route with a model placeholder": proxy.CauseWrongGrantKind,
		"proxy: as a web page":                         proxy.CauseCrossOrigin,
		"proxy: another task's placeholder":            proxy.CauseTripwire,
		"proxy: own placeholder after the tripwire":    proxy.CauseUnknownPlaceholder,
	}
	for _, a := range report {
		if a.Worked {
			t.Errorf("attack worked: %s (%s)", a.Name, a.Detail)
		}
		if cause, ok := want[a.Name]; ok && a.Refused != cause {
			t.Errorf("%s: refused %q (status %d), want %s", a.Name, a.Refused, a.Status, cause)
		}
	}
	names := map[string]bool{}
	for _, a := range report {
		names[a.Name] = true
	}
	for _, n := range []string{"find a daemon's proxy socket in /tmp", "connect an outside host", "plant .git/hooks/post-checkout", "write the project's .lazy/config.toml", "proxy: another task's placeholder",
		"mount escape: bind / and read the credential", "unshare a user namespace", "ptrace pid 1", "read a file in the user's home",
		"write the project's objects", "move the project's main"} {
		if !names[n] {
			t.Errorf("the report lacks %q", n)
		}
	}
	if len(report) < 24 {
		t.Errorf("only %d attempts reported", len(report))
	}
	// passthrough calls reached the upstream with what the agent presented:
	// never the real key
	for _, r := range p.stub.Requests() {
		if r.Header.Get("x-attack") != "" && strings.Contains(fmt.Sprint(r.Header), p.real) {
			t.Errorf("%s reached the upstream with the real key", r.Header.Get("x-attack"))
		}
	}
	got := strings.Join(collect(lines, 2*time.Second), "\n")
	p.keep("hostile-watch.txt", got)
	for _, s := range []string{"refused: " + proxy.CauseUnknownPlaceholder, "refused: " + proxy.CauseWrongGrantKind, "refused: " + proxy.CauseCrossOrigin, "tripwire: " + proxy.TripForeignPlaceholder} {
		if !strings.Contains(got, s) {
			t.Errorf("lazy watch --net lacks %q:\n%s", s, got)
		}
	}
	if ti := p.show("evil"); !strings.Contains(ti.Tripwire, proxy.TripForeignPlaceholder) {
		t.Errorf("the task must record the tripwire: %+v", ti)
	}
	if out := p.lazy(0, "task", "show", "evil"); !strings.Contains(out, "tripwire: ") {
		t.Errorf("task show must say so: %s", out)
	}
	// a live task's placeholder presented by a process in no sandbox (here:
	// the test, on the TCP listener) is refused: sandboxed agents come
	// through their own sockets
	req, _ := http.NewRequest(http.MethodPost, info.ProxyURL+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("x-api-key", phs["other"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("x-lazy-refused") != proxy.CauseNotFromSandbox {
		t.Errorf("a placeholder on the TCP listener under the default runner: %d %q, want 403 %s", resp.StatusCode, resp.Header.Get("x-lazy-refused"), proxy.CauseNotFromSandbox)
	}
	// the daemon runs git (a new worktree: post-checkout) and the planted
	// hook, had it been planted, would have written the marker
	p.lazy(0, "task", "new", "-m", "not a plan", "--code", "after")
	p.waitStatus("after", "failed") // the hostile agent refuses a prompt that is no plan
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a hook or config the agent planted ran on the host")
	}
	if b, _ := os.ReadFile(filepath.Join(p.root, ".lazy", "config.toml")); strings.Contains(string(b), "pwned") {
		t.Fatal("the agent wrote the project's config")
	}
	cfgNow, _ := os.ReadFile(filepath.Join(p.root, ".git", "config"))
	if strings.Contains(string(cfgNow), "pwned") {
		t.Fatal("the agent wrote the repository's config")
	}
}
