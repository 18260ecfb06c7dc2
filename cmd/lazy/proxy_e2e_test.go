package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lazy/api"
	"lazy/client"
	"lazy/proxy"
)

// watchNet runs `lazy watch --net` with args and returns a line channel,
// once the daemon has subscribed it.
func (p *project) watchNet(ctx context.Context, args ...string) <-chan string {
	return p.watch(ctx, append([]string{"--net"}, args...)...)
}

// watch runs `lazy watch` with args and returns its stdout lines, once the
// stream is open (its "watching:" line on stderr): every event published
// from then on is in the channel.
func (p *project) watch(ctx context.Context, args ...string) <-chan string {
	p.t.Helper()
	return p.startWatch(ctx, args...).lines
}

// watcher is a running `lazy watch`: its stdout lines, and its exit once
// the lines are done.
type watcher struct {
	lines <-chan string
	done  <-chan error
}

func (p *project) startWatch(ctx context.Context, args ...string) *watcher {
	p.t.Helper()
	cmd := exec.CommandContext(ctx, lazyBin, append([]string{"watch", "--project", p.root}, args...)...)
	cmd.Env = p.env
	out, _ := cmd.StdoutPipe()
	errOut, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	opened := make(chan string, 1)
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		sc := bufio.NewScanner(errOut)
		var said []string
		for sc.Scan() {
			said = append(said, sc.Text())
			if strings.HasPrefix(sc.Text(), "watching:") {
				opened <- ""
			}
		}
		opened <- strings.Join(said, "\n")
	}()
	ch := make(chan string, 1000)
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			ch <- sc.Text()
		}
		<-stderrDone // Wait closes the pipes: read them out first
		done <- cmd.Wait()
		close(ch)
	}()
	select {
	case why := <-opened:
		if why != "" {
			p.t.Fatalf("lazy watch %v ended before its stream opened: %s", args, why)
		}
	case <-time.After(15 * time.Second):
		p.t.Fatalf("lazy watch %v: no stream after 15s", args)
	}
	return &watcher{lines: ch, done: done}
}

func collect(ch <-chan string, d time.Duration) []string {
	var out []string
	deadline := time.After(d)
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, l)
		case <-deadline:
			return out
		}
	}
}

func TestTrafficStreamFilters(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// the agents sleep before calling the model, so the watchers (whose
	// filter must name existing tasks) are up before any traffic
	p.lazy(0, "task", "new", "--code", "fix", "-m", "@sleep 2s\n@answer a")
	p.lazy(0, "task", "new", "--code", "fix-login", "-m", "@sleep 2s\n@answer b")
	fixOnly := p.watchNet(ctx, "--task", "fix")
	all := p.watchNet(ctx)
	p.waitStatus("fix", "blocked")
	p.waitStatus("fix-login", "blocked")
	got := strings.Join(collect(fixOnly, 1500*time.Millisecond), "\n")
	if !strings.Contains(got, "net> ") || !strings.Contains(got, " fix - POST /v1/messages -> 200 ") {
		t.Errorf("the fix watcher shows no traffic of fix:\n%s", got)
	}
	if strings.Contains(got, "fix-login") {
		t.Errorf("codes share prefixes: fix must not match fix-login:\n%s", got)
	}
	everything := strings.Join(collect(all, 500*time.Millisecond), "\n")
	if !strings.Contains(everything, " fix-login - POST /v1/messages") || !strings.Contains(everything, "fix-login status blocked") {
		t.Errorf("the unfiltered watcher misses traffic or task events:\n%s", everything)
	}

	// a full id is accepted, an empty filter refused, not read as "no filter"
	var tl []api.TaskInfo
	_ = json.Unmarshal([]byte(p.lazy(0, "task", "list", "--json")), &tl)
	c, _, err := client.Discover(p.paths)
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer scancel()
	if err := c.StreamOpened(sctx, "watch", api.WatchArgs{Tasks: []string{tl[0].ID}, Net: true}, nil, func([]byte) error { return nil }); err != nil {
		t.Errorf("a full id filter: %v", err)
	}
	for _, bad := range [][]string{{}, {""}, {"nosuchtask"}} {
		err := c.StreamOpened(context.Background(), "watch", api.WatchArgs{Tasks: bad, Net: true}, nil, func([]byte) error { return nil })
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Status/100 != 4 {
			t.Errorf("filter %q: got %v, want a 4xx refusal", bad, err)
		}
	}
	if _, errs, code := p.run("watch", "--task", ""); code != 1 || !strings.Contains(errs, "names no task") {
		t.Errorf("watch --task '': exit %d %q", code, errs)
	}
}

func TestGrantsSurviveRestartAndDieWithTask(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "g", "-m", "@answer one")
	p.waitStatus("g", "blocked")
	grants, err := proxy.LoadGrants(p.paths.ProxyTokens)
	if err != nil || len(grants) != 1 {
		t.Fatalf("grants after launch: %v %v", grants, err)
	}
	var ph string
	for k, g := range grants {
		ph = k
		if g.TaskRef != "g" || g.EnvVar != "ANTHROPIC_API_KEY" || !strings.HasPrefix(k, "sk-ant-api03-svc-") {
			t.Errorf("grant: %+v", g)
		}
	}
	p.lazy(0, "daemon", "stop")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "unblock", "g", "-m", "@answer two")
	p.waitStatus("g", "blocked")
	after, _ := proxy.LoadGrants(p.paths.ProxyTokens)
	if _, ok := after[ph]; !ok || len(after) != 1 {
		t.Fatalf("a live task's grant must survive a daemon restart and be reused: %v", after)
	}
	// a placeholder still works against the proxy while the task lives...
	proxyURL := p.info().ProxyURL
	post := func() *http.Response {
		req, _ := http.NewRequest("POST", proxyURL+"/v1/messages", strings.NewReader(`{"messages":[{"role":"user","content":"x"}]}`))
		req.Header.Set("x-api-key", ph)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := post(); resp.StatusCode != 200 {
		t.Fatalf("live placeholder: %d", resp.StatusCode)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lines := p.watchNet(ctx)
	// ...and is refused, with its cause on the stream, once the task ended
	p.lazy(0, "task", "cancel", "g")
	if left, _ := proxy.LoadGrants(p.paths.ProxyTokens); len(left) != 0 {
		t.Fatalf("grants after the task ended: %v", left)
	}
	if resp := post(); resp.StatusCode != 401 || resp.Header.Get("x-lazy-refused") != proxy.CauseUnknownPlaceholder {
		t.Fatalf("ended task's placeholder: %d %q", resp.StatusCode, resp.Header.Get("x-lazy-refused"))
	}
	got := strings.Join(collect(lines, time.Second), "\n")
	if !strings.Contains(got, "-> 401 - ") || !strings.Contains(got, "refused: "+proxy.CauseUnknownPlaceholder) {
		t.Errorf("the refusal is not flagged with its cause:\n%s", got)
	}
	if strings.Contains(got, ph) {
		t.Error("the stream shows a placeholder")
	}
}

func TestLocalRoleNeedsNoProviderCredential(t *testing.T) {
	p := newProject(t, "process")
	if err := os.Remove(filepath.Join(p.home, "credentials", "provider")); err != nil {
		t.Fatal(err)
	}
	local := p.stub // the stub plays the local model server
	cfgPath := filepath.Join(p.root, ".lazy", "config.toml")
	b, _ := os.ReadFile(cfgPath)
	upstream := strings.Split(strings.Split(string(b), "upstream = \"")[1], "\"")[0]
	cfg := strings.Replace(string(b), "upstream = \""+upstream+"\"", "upstream = \"https://api.anthropic.com\"", 1)
	cfg += "\n[models.roles.local]\nendpoint = \"" + upstream + "\"\ncredential = \"none\"\nlocal = true\n"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p.lazy(0, "daemon", "start")
	// the primary needs the provider credential: refused with the fix
	if _, errs, code := p.run("task", "new", "-m", "x"); code != 1 || !strings.Contains(errs, "no provider credential") {
		t.Fatalf("gate: exit %d %q", code, errs)
	}
	p.lazy(0, "task", "new", "--role", "local", "--code", "loc", "-m", "@answer local")
	p.waitStatus("loc", "blocked")
	reqs := local.Requests()
	if len(reqs) == 0 {
		t.Fatal("the local model was never called")
	}
	for _, r := range reqs {
		if r.Header.Get("x-api-key") != "" || r.Header.Get("Authorization") != "" {
			t.Errorf("a local upstream got a credential: %v", r.Header)
		}
	}
	grants, _ := proxy.LoadGrants(p.paths.ProxyTokens)
	for _, g := range grants {
		if !g.Local || g.Role != "local" {
			t.Errorf("grant: %+v", g)
		}
	}
}
