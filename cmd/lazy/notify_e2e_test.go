package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"lazy/proxy"
)

// notice is one request the test's webhook got.
type notice struct {
	at   time.Time
	body []byte
	m    map[string]any
	code int
}

// noticeHook is the test's webhook: it records every request; the notices
// of task "flaky" fail twice, those of "stuck" hang until release closes.
type noticeHook struct {
	mu      sync.Mutex
	got     []notice
	flaky   int
	release chan struct{}
	hung    chan struct{} // closed when a notice of "stuck" arrives
	once    sync.Once
}

func (h *noticeHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	code := http.StatusNoContent
	if r.Method != http.MethodPost || r.URL.Path != "/hooks/T0/s3cret" || r.Header.Get("Content-Type") != "application/json" {
		code = http.StatusBadRequest
	}
	switch m["task"] {
	case "flaky":
		h.mu.Lock()
		if h.flaky < 2 {
			code = http.StatusServiceUnavailable
		}
		h.flaky++
		h.mu.Unlock()
	case "stuck":
		h.once.Do(func() { close(h.hung) })
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
	}
	h.mu.Lock()
	h.got = append(h.got, notice{at: time.Now(), body: b, m: m, code: code})
	h.mu.Unlock()
	w.WriteHeader(code)
}

// wait polls for the requests about task ref with event ev.
func (h *noticeHook) wait(t *testing.T, ref, ev string, n int) []notice {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var out []notice
		h.mu.Lock()
		for _, x := range h.got {
			if x.m["task"] == ref && x.m["event"] == ev {
				out = append(out, x)
			}
		}
		h.mu.Unlock()
		if len(out) >= n {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("the webhook got %d %s notices of %s within 30 s, want %d", len(out), ev, ref, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNotify (issue 29): a webhook and a command configured in [notify]
// hear of a task that blocked (within 2 s of its block), of a crashed
// turn and of a tripwire; the JSON is exactly event, task, status and url
// (the review page, no token) with no secret in it; a webhook that fails
// twice gets it the third time after backoff; one that hangs holds no
// turn; the command gets the same JSON on its standard input and none of
// the daemon's settings in its environment.
func TestNotify(t *testing.T) {
	requireBwrap(t) // the tripwire: the decoy a sandboxed agent steals
	p := newProject(t, "")
	hook := &noticeHook{release: make(chan struct{}), hung: make(chan struct{})}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-hook.release:
		default:
			close(hook.release)
		}
	})
	dir := t.TempDir()
	lines, envFile := filepath.Join(dir, "notices"), filepath.Join(dir, "env")
	cfg, _ := os.ReadFile(filepath.Join(p.root, ".lazy", "config.toml"))
	cfgText := string(cfg) + fmt.Sprintf("[notify]\nwebhook = %q\ncommand = %q\n", srv.URL+"/hooks/T0/s3cret", "cat >> "+lines+"; echo >> "+lines+"; env > "+envFile)
	if err := os.WriteFile(filepath.Join(p.root, ".lazy", "config.toml"), []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	p.env = append(p.env, "LAZY_AGENT__ASK_TIMEOUT=9m") // a setting the command must not see
	p.lazy(0, "daemon", "start")
	base := p.info().BaseURL

	// blocked → needs_review, within 2 s of the block
	p.lazy(0, "task", "new", "-m", writeAndCommit, "--code", "ok")
	ok := p.waitStatus("ok", "blocked")
	n := hook.wait(t, "ok", "needs_review", 1)[0]
	took := n.at.Sub(ok.LastActivity)
	t.Logf("needs_review reached the webhook %v after the task blocked", took)
	if took > 2*time.Second {
		t.Errorf("needs_review took %v, want < 2 s", took)
	}
	grants, err := proxy.LoadGrants(p.paths.ProxyTokens)
	if err != nil || len(grants) == 0 {
		t.Fatalf("grants: %v %v", grants, err)
	}

	// a webhook failing twice: tried again after 0.5 s, then 1 s
	p.lazy(0, "task", "new", "-m", "@answer done", "--code", "flaky")
	p.waitStatus("flaky", "blocked")
	tries := hook.wait(t, "flaky", "needs_review", 3)
	if tries[0].code != 503 || tries[1].code != 503 || tries[2].code != 204 {
		t.Errorf("flaky: answers %d %d %d", tries[0].code, tries[1].code, tries[2].code)
	}
	d1, d2 := tries[1].at.Sub(tries[0].at), tries[2].at.Sub(tries[1].at)
	t.Logf("flaky: tried again after %v, then %v", d1, d2)
	if d1 < 500*time.Millisecond || d2 < time.Second {
		t.Errorf("backoff: %v then %v, want ≥ 500ms then ≥ 1s", d1, d2)
	}

	// a crashed turn → failed
	p.lazy(0, "task", "new", "-m", "@crash boom-from-the-agent", "--code", "crash")
	p.waitStatus("crash", "failed")
	hook.wait(t, "crash", "failed", 1)

	// a tripwire (the agent sends the SSH decoy of its home) → tripwire, and
	// the failed turn it ends in
	p.lazy(0, "task", "new", "-m", "summarise my key\n@readsend ~/.ssh/id_ed25519\n@answer sent", "--code", "thief")
	p.waitStatus("thief", "failed")
	trip := hook.wait(t, "thief", "tripwire", 1)[0]
	hook.wait(t, "thief", "failed", 1)
	if s := trip.m["status"]; s != "running" && s != "failed" {
		t.Errorf("the tripwire notice's status %v: want the task's, running or failed", s)
	}

	// a webhook that hangs holds no turn: while it hangs on stuck's notice,
	// another task runs its turn to blocked
	p.lazy(0, "task", "new", "-m", "@answer done", "--code", "stuck")
	p.waitStatus("stuck", "blocked")
	select {
	case <-hook.hung:
	case <-time.After(30 * time.Second):
		t.Fatal("stuck's notice never reached the webhook")
	}
	began := time.Now()
	p.lazy(0, "task", "new", "-m", writeAndCommit, "--code", "after")
	after := p.waitStatus("after", "blocked")
	select {
	case <-hook.release:
		t.Fatal("the hang was released before the check")
	default:
	}
	t.Logf("with the webhook hanging, task after reached blocked in %v", time.Since(began))
	close(hook.release)
	hook.wait(t, "stuck", "needs_review", 1)
	hook.wait(t, "after", "needs_review", 1)

	// every notice: exactly the four fields, the review page, no secret
	tokens := []string{p.real}
	for ph := range grants {
		tokens = append(tokens, ph)
	}
	for _, f := range []string{p.paths.AuthToken, p.paths.DashboardToken} {
		b, _ := os.ReadFile(f)
		tokens = append(tokens, strings.TrimSpace(string(b)))
	}
	ids := map[string]string{"ok": ok.ID, "after": after.ID}
	for _, ref := range []string{"flaky", "crash", "thief", "stuck"} {
		ids[ref] = p.show(ref).ID
	}
	hook.mu.Lock()
	got := append([]notice(nil), hook.got...)
	hook.mu.Unlock()
	var bodies []string
	for _, x := range got {
		if x.code == http.StatusBadRequest {
			t.Errorf("a request the webhook refused: %s", x.body)
		}
		keys := []string{}
		for k := range x.m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		ref, _ := x.m["task"].(string)
		if strings.Join(keys, ",") != "event,status,task,url" || x.m["url"] != base+"/review/"+ids[ref] {
			t.Errorf("notice %s: want exactly event, status, task and url (%s)", x.body, base+"/review/"+ids[ref])
		}
		for _, s := range append(tokens, "boom-from-the-agent", "token=", "tripwire:") {
			if s != "" && strings.Contains(string(x.body), s) {
				t.Errorf("notice %s carries %.12q…", x.body, s)
			}
		}
		if x.code == http.StatusNoContent {
			bodies = append(bodies, string(x.body))
		}
	}
	// the command got the same notices on its standard input
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(lines)
		var cmdGot []string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l != "" {
				cmdGot = append(cmdGot, l)
			}
		}
		sort.Strings(cmdGot)
		sort.Strings(bodies)
		if strings.Join(cmdGot, "\n") == strings.Join(bodies, "\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command got:\n%s\nthe webhook delivered:\n%s", strings.Join(cmdGot, "\n"), strings.Join(bodies, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	env, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(env), "LAZY_") || strings.Contains(string(env), p.real) || !strings.Contains(string(env), "PATH=") {
		t.Errorf("the command's environment holds lazy's settings, or no PATH:\n%s", env)
	}
	t.Logf("%d notices delivered to the webhook and the command", len(bodies))
}
