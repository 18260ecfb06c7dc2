package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"lazy/api"
)

// TestBrowserTaskPageFollowsUnblock (issue 25, item 11): an unblock from
// the review page lands on the task page while the work turn waits behind
// an ask; without a reload the page moves to running, then back to blocked
// with the new turn's result as text, and the client's raw JSON is nowhere
// in view.
func TestBrowserTaskPageFollowsUnblock(t *testing.T) {
	p, url := reviewProject(t)
	// an ask that takes a while holds the task's one job: the unblock's
	// work turn waits behind it, queued
	ask := p.post("rv", api.PostCommentArgs{Body: "Why four lines?\n@sleep 3s\n@answer Four is enough.", File: "a.go", Line: 2, Side: "new", Intent: "ask"})
	ctx := browser(t, 1280, 900, true)
	do(t, ctx, chromedp.Navigate(p.login(url)), chromedp.WaitVisible(".toolbar"))
	do(t, ctx,
		chromedp.SendKeys(`(//form[contains(@class,"unblock-form")])[2]//textarea`, "Go on.\n@sleep 2s\n@answer Second pass: kept the four lines."),
		chromedp.Submit(`(//form[contains(@class,"unblock-form")])[2]`),
		chromedp.WaitVisible("#task-status"))
	notice := eval[string](t, ctx, `document.querySelector('.notice').textContent`)
	m := regexp.MustCompile(`work turn (\d+) is queued`).FindStringSubmatch(notice)
	if m == nil || !strings.HasPrefix(eval[string](t, ctx, `location.pathname`), "/tasks/") {
		t.Fatalf("after the unblock: %s, notice %q", eval[string](t, ctx, `location.href`), notice)
	}
	turn := "#turn-" + m[1]
	if got := eval[string](t, ctx, `document.querySelector('`+turn+` .badge').textContent`); got == "done" {
		t.Fatalf("work turn %s is done before the ask %s ended: the test proves nothing", m[1], ask.ID)
	}
	// a mark that a reload would wipe
	eval[bool](t, ctx, `window.__stillHere = true`)
	var seen []string
	deadline := time.Now().Add(90 * time.Second)
	for {
		state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#task-status').textContent + '/' + ((document.querySelector('`+turn+` .badge') || {}).textContent || '-')`))
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) == 0 || seen[len(seen)-1] != state {
			seen = append(seen, state)
		}
		if state == "blocked/done" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page did not reach blocked/done; it showed %v", seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the task page showed, without a reload: %v", seen)
	if seen[0] != "blocked/queued" || !contains(seen, "running/running") {
		t.Errorf("the page showed %v: want blocked/queued first, then running/running, then blocked/done", seen)
	}
	if !eval[bool](t, ctx, `window.__stillHere === true`) {
		t.Error("the page was reloaded")
	}
	if got := eval[string](t, ctx, `document.querySelector('`+turn+` .result').textContent`); got != "Second pass: kept the four lines." {
		t.Errorf("turn %s result %q", m[1], got)
	}
	if now := eval[string](t, ctx, `document.querySelector('#task-now').textContent`); !strings.Contains(now, "waiting for you") {
		t.Errorf("Now: %q", now)
	}
	// what is in view is text: the raw JSON only inside a closed disclosure
	visible := eval[string](t, ctx, `document.body.innerText`)
	if strings.Contains(visible, `"session_id"`) || strings.Contains(visible, `{"`) {
		t.Errorf("raw JSON in view:\n%s", visible)
	}
	if !eval[bool](t, ctx, `document.querySelector('`+turn+` details.raw-output pre').textContent.includes('"session_id"')`) {
		t.Error("the raw client output is not kept behind its disclosure")
	}
	screenshot(t, ctx, "task-page")
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

// TestBrowserDashboardNamesItsProject (item 15): two daemons on two
// projects; each dashboard's title and header name its own.
func TestBrowserDashboardNamesItsProject(t *testing.T) {
	a, b := newProject(t, "process"), newProject(t, "process")
	a.lazy(0, "daemon", "start")
	b.lazy(0, "daemon", "start")
	if a.info().BaseURL == b.info().BaseURL {
		t.Fatal("the two daemons share a dashboard")
	}
	ctx := browser(t, 1280, 900, true)
	for _, p := range []*project{a, b} {
		name := filepath.Base(p.info().Root)
		for _, path := range []string{"/", "/review"} {
			do(t, ctx, chromedp.Navigate(p.login(p.info().BaseURL+path)), chromedp.WaitVisible("header.top .project"))
			title := eval[string](t, ctx, `document.title`)
			head := eval[string](t, ctx, `document.querySelector('header.top .project').textContent`)
			root := eval[string](t, ctx, `document.querySelector('header.top .project').title`)
			if !strings.Contains(title, name) || head != name || root != p.info().Root {
				t.Errorf("%s%s: title %q, header %q (title attribute %q), want the project %s at %s", p.info().BaseURL, path, title, head, root, name, p.info().Root)
			}
		}
	}
}

// TestBrowserTaskFormsAndFilter (items 15 and 14): a task made, messaged
// and cancelled from the web, as the CLI would; a cross-site post and one
// without a login refused; the Tasks page hides ended tasks and shows them
// on asking.
func TestBrowserTaskFormsAndFilter(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	base := p.info().BaseURL
	ctx := browser(t, 1280, 900, true)
	do(t, ctx, chromedp.Navigate(p.login(base+"/")), chromedp.WaitVisible("form.new-task-form textarea"))

	// a refused form keeps what was typed
	p.lazy(0, "task", "new", "--code", "taken", "-m", "@answer first")
	do(t, ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible("details.new-task summary"), chromedp.Click("details.new-task summary"),
		chromedp.SendKeys("form.new-task-form textarea", "Make <b>bold</b> work\n@answer done from the web"),
		chromedp.SendKeys(`form.new-task-form input[name="code"]`, "taken"),
		chromedp.Submit("form.new-task-form"), chromedp.WaitVisible(".notice.notice-alert"))
	if n := eval[string](t, ctx, `document.querySelector('.notice').textContent`); !strings.Contains(n, "Task not created") || !strings.Contains(n, "taken") {
		t.Errorf("refused notice %q", n)
	}
	if v := eval[string](t, ctx, `document.querySelector('form.new-task-form textarea').value`); v != "Make <b>bold</b> work\n@answer done from the web" {
		t.Errorf("the typed prompt was not kept: %q", v)
	}
	// then made
	do(t, ctx, chromedp.SetValue(`form.new-task-form input[name="code"]`, "web1"), chromedp.Submit("form.new-task-form"), chromedp.WaitVisible("#task-status"))
	if n := eval[string](t, ctx, `document.querySelector('.notice').textContent`); !strings.Contains(n, "Task web1 created") {
		t.Errorf("notice after new task: %q", n)
	}
	if out := p.lazy(0, "task", "list"); !strings.Contains(out, "web1") {
		t.Fatalf("lazy task list lacks the task made from the web:\n%s", out)
	}
	web1 := p.waitStatus("web1", "blocked")
	if !strings.Contains(eval[string](t, ctx, `location.pathname`), web1.ID) {
		t.Errorf("after new task the browser is at %s", eval[string](t, ctx, `location.href`))
	}
	// the page followed the turn to its end; the prompt is text
	waitJS(t, ctx, "the first turn's result", `(document.querySelector('#turn-1 .result') || {}).textContent === 'done from the web'`)
	if eval[int](t, ctx, `document.querySelectorAll('main b').length`) != 0 {
		t.Error("the prompt's markup was rendered")
	}

	// a message, stored as a task comment
	eval[bool](t, ctx, `document.querySelector('.notice').remove() || true`)
	do(t, ctx, chromedp.SendKeys("form.message-form textarea", "Also <i>this</i>, please."), chromedp.Submit("form.message-form"),
		chromedp.WaitVisible(".notice"))
	if n := eval[string](t, ctx, `document.querySelector('.notice').textContent`); !strings.Contains(n, "Message") {
		t.Errorf("notice after message: %q", n)
	}
	var d api.TaskDetail
	if err := p.rpc().Call(context.Background(), "taskShow", map[string]string{"task": "web1"}, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Comments) != 1 || d.Comments[0].Body != "Also <i>this</i>, please." {
		t.Errorf("task comments: %+v", d.Comments)
	}
	waitJS(t, ctx, "the message on the page", `document.querySelector('#task-messages').textContent.includes('Also <i>this</i>, please.')`)
	if eval[int](t, ctx, `document.querySelectorAll('#task-messages i').length`) != 0 {
		t.Error("the message's markup was rendered")
	}

	// refused from another site (a page on another port of 127.0.0.1 is
	// same-site: the browser sends the session cookie) and without a login
	codes := func() string {
		var ts []api.TaskInfo
		if err := json.Unmarshal([]byte(p.lazy(0, "task", "list", "--json")), &ts); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ti := range ts {
			out = append(out, ti.Ref)
		}
		return strings.Join(out, " ")
	}
	before := codes()
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/tasks"><input name="prompt" value="evil"><input name="code" value="evil"></form><script>document.getElementById('f').submit()</script>`, base)
	}))
	defer evil.Close()
	do(t, ctx, chromedp.Navigate(evil.URL), chromedp.WaitReady("body"))
	waitJS(t, ctx, "the cross-site post's answer", `location.href.endsWith('/tasks')`)
	if body := eval[string](t, ctx, `document.body.innerText`); !strings.Contains(body, "another site") {
		t.Errorf("the cross-site post's answer: %q", body)
	}
	for name, hdr := range map[string]map[string]string{
		"cross-site with the bearer": {"Authorization": "Bearer " + strings.TrimSpace(readFile(t, p.paths.AuthToken)), "Sec-Fetch-Site": "cross-site"},
		"no login":                   {},
	} {
		req, _ := http.NewRequest("POST", base+"/tasks", strings.NewReader("prompt=evil&code=evil2"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := http.StatusForbidden
		if name == "no login" {
			want = http.StatusUnauthorized
		}
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", name, resp.StatusCode, want)
		}
	}
	if after := codes(); after != before {
		t.Errorf("a refused post made a task: %s, before %s", after, before)
	}

	// cancel from the web
	do(t, ctx, chromedp.Navigate(base+"/tasks/"+web1.ID), chromedp.WaitVisible("details.cancel-task summary"),
		chromedp.Click("details.cancel-task summary"), chromedp.Submit("form.cancel-form"), chromedp.WaitVisible(".notice"))
	if n := eval[string](t, ctx, `document.querySelector('.notice').textContent`); !strings.Contains(n, "Cancelled") {
		t.Errorf("notice after cancel: %q", n)
	}
	if st := p.show("web1").Status; st != "cancelled" {
		t.Errorf("web1 after cancel from the web: %s", st)
	}
	if eval[int](t, ctx, `document.querySelectorAll('main form').length`) != 0 {
		t.Error("the cancelled task's page still offers forms")
	}

	// the Tasks page: ended tasks hidden and counted, shown on asking
	rows := func() string {
		return eval[string](t, ctx, `Array.from(document.querySelectorAll('table.tasks tbody td:first-child code')).map(c => c.textContent).join(' ')`)
	}
	do(t, ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible("nav.filters"))
	if got := rows(); got != "taken" {
		t.Errorf("default Tasks page: %q, want only the live task", got)
	}
	if h := eval[string](t, ctx, `document.querySelector('.hidden-count').textContent`); !strings.HasPrefix(h, "1 ended task ") {
		t.Errorf("hidden count: %q", h)
	}
	screenshot(t, ctx, "tasks-page")
	do(t, ctx, chromedp.Click(`//p[@class="hidden-count"]/a[text()="Show ended"]`), chromedp.WaitVisible("nav.filters a.current"))
	if got := rows(); got != "web1" || !strings.HasSuffix(eval[string](t, ctx, `location.href`), "?status=ended") {
		t.Errorf("ended filter: %q at %s", got, eval[string](t, ctx, `location.href`))
	}
	do(t, ctx, chromedp.Click(`//nav[@class="filters"]/a[starts-with(normalize-space(.),"All")]`), chromedp.WaitVisible("nav.filters a.current"))
	if got := rows(); got != "taken web1" {
		t.Errorf("all: %q, want the task that needs you first", got)
	}
	do(t, ctx, chromedp.Navigate(base+"/?status=blocked"), chromedp.WaitVisible("nav.filters"))
	if got := rows(); got != "taken" {
		t.Errorf("?status=blocked: %q", got)
	}
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
