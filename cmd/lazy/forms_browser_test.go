package main

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// The dashboard's forms in Chromium (issue 25, items 4 and 5): every POST
// answers 303 to a GET page, so a reload never posts again; a refusal comes
// back as a notice with the typed text kept; a second login in the same
// browser leaves its other tabs working; a form error is a page for a
// browser and JSON for a client.

// posts is how many times the daemon answered POST route (its own count,
// from /metrics).
func (p *project) posts(route string) int {
	p.t.Helper()
	resp, err := p.get("/metrics")
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	n := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "lazy_http_requests_total{") || !strings.Contains(line, `method="POST"`) || !strings.Contains(line, `route="`+route+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			p.t.Fatalf("metrics line %q: %v", line, err)
		}
		n += int(v)
	}
	return n
}

// TestBrowserSyncAndRefusedAcceptEndOnAGetPage: (a) and (b). The parent
// changes the task's file; an accept is refused (it would conflict: sync
// first) and lands on the review page's GET address with the notice and the
// reason typed; a reload posts nothing; the sync form lands on the GET
// address too, with the merge panel after the sync (the task in conflict:
// next, unblock), and a reload posts nothing.
func TestBrowserSyncAndRefusedAcceptEndOnAGetPage(t *testing.T) {
	p, url := reviewProject(t)
	// the parent writes the task's file its own way: the merge conflicts
	if err := os.WriteFile(filepath.Join(p.root, "a.go"), []byte("uno\ndos\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, p.root, "add", "a.go")
	runGit(t, p.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "parent writes a.go")

	ctx := browser(t, 1280, 900, false) // no script: the plain forms
	do(t, ctx, chromedp.Navigate(p.login(url)), chromedp.WaitVisible(".accept-form"))
	if got := eval[string](t, ctx, `document.querySelector('.merge-panel .next').dataset.next`); got != "sync" {
		t.Fatalf("the merge panel's next step before the sync: %q", got)
	}
	reason := "Looks right <b>to me</b> & ready"
	do(t, ctx,
		chromedp.SendKeys(`(//form[contains(@class,"accept-form")])[1]//textarea[@name="reason"]`, reason),
		chromedp.Submit(`(//form[contains(@class,"accept-form")])[1]`),
		chromedp.WaitVisible(".refusal"))
	// (b) on the GET address, the notice, the reason kept
	if path := eval[string](t, ctx, `location.pathname`); !strings.HasPrefix(path, "/review/") || !strings.Contains(eval[string](t, ctx, `location.search`), "flash=") {
		t.Fatalf("after the refused accept the browser is at %s%s", path, eval[string](t, ctx, `location.search`))
	}
	if got := eval[string](t, ctx, `document.querySelector('.notice').textContent`); !strings.Contains(got, "Not accepted") {
		t.Errorf("notice: %q", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('.accept-form [name=reason]').value`); got != reason {
		t.Errorf("the typed reason: %q, want %q", got, reason)
	}
	if got := eval[string](t, ctx, `document.querySelector('.refusal-message').textContent`); !strings.Contains(got, "a.go") {
		t.Errorf("refusal: %q", got)
	}
	if n := p.posts("/review/:task/accept"); n != 1 {
		t.Fatalf("the daemon answered %d accept POSTs, want 1", n)
	}
	do(t, ctx, chromedp.Reload(), chromedp.WaitVisible(".refusal"))
	if n := p.posts("/review/:task/accept"); n != 1 {
		t.Errorf("a reload posted the accept again: %d accept POSTs", n)
	}
	if got := eval[string](t, ctx, `document.querySelector('.accept-form [name=reason]').value`); got != reason {
		t.Errorf("the reason after a reload: %q", got)
	}
	screenshot(t, ctx, "refused-accept-notice")

	// the sync form: a GET page after it, the merge panel after the sync
	do(t, ctx, chromedp.Submit(".sync-form"))
	waitJS(t, ctx, "the page after the sync", `!!document.querySelector('.notice') && document.querySelector('.notice').textContent.includes('conflicts')`)
	if got := eval[string](t, ctx, `location.pathname + location.search`); !strings.Contains(got, "flash=") || strings.HasSuffix(eval[string](t, ctx, `location.pathname`), "/sync") {
		t.Errorf("after the sync the browser is at %s", got)
	}
	if n := p.posts("/review/:task/sync"); n != 1 {
		t.Fatalf("sync POSTs: %d", n)
	}
	if got := eval[string](t, ctx, `document.querySelector('.merge-panel .next').dataset.next + ' ' + document.querySelector('.badge').textContent`); got != "unblock conflict" {
		t.Errorf("the merge panel after the sync is stale: next step and status %q, want \"unblock conflict\"", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('.accept-form [name=reason]').value`); got != reason {
		t.Errorf("the reason after the sync: %q", got)
	}
	do(t, ctx, chromedp.Reload(), chromedp.WaitVisible(".accept-form"))
	if n := p.posts("/review/:task/sync"); n != 1 {
		t.Errorf("a reload posted the sync again: %d sync POSTs", n)
	}
	if n := p.posts("/review/:task/accept"); n != 1 {
		t.Errorf("accept POSTs after all: %d", n)
	}
	if st := p.show("rv").Status; st != "conflict" {
		t.Errorf("task status after the sync: %s", st)
	}
}

// TestBrowserSecondLoginKeepsOtherTabs: (c). Opening the `lazy open`
// address again in one tab leaves the other tab's forms working; a form
// token truly stale (the browser's session was replaced) gets a page that
// says to reload and shows what was typed, never JSON.
func TestBrowserSecondLoginKeepsOtherTabs(t *testing.T) {
	p, url := reviewProject(t)
	tab1 := browser(t, 1280, 900, false)
	do(t, tab1, chromedp.Navigate(p.login(url)), chromedp.WaitVisible(".unblock-form"))
	tab2, cancel := chromedp.NewContext(tab1) // another tab of the same browser
	defer cancel()
	do(t, tab2, chromedp.Navigate(p.login(p.info().BaseURL+"/")), chromedp.WaitVisible("main"))
	// tab 1's form, loaded before the second login
	do(t, tab1,
		chromedp.SendKeys(`(//form[contains(@class,"unblock-form")])[1]//textarea`, "Carry on."),
		chromedp.Submit(`(//form[contains(@class,"unblock-form")])[1]`))
	waitJS(t, tab1, "the page after the submit", `!!document.querySelector('.turns, .error-page') || document.contentType !== 'text/html'`)
	if got := eval[string](t, tab1, `location.pathname + ' ' + document.querySelector('.notice').textContent`); !strings.HasPrefix(got, "/tasks/") || !strings.Contains(got, "Unblocked") {
		t.Fatalf("tab 1 after a second login in tab 2: %q", got)
	}
	p.waitStatus("rv", "blocked")

	// truly stale: the browser's session is replaced (cookies cleared,
	// then a login) while tab 1 shows a page of the old one
	do(t, tab1, chromedp.Navigate(url), chromedp.WaitVisible(".unblock-form"))
	if _, err := chromedp.Call(tab2, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	do(t, tab2, chromedp.Navigate(p.login(p.info().BaseURL+"/")), chromedp.WaitVisible("main"))
	typed := "Please <keep> this & that"
	do(t, tab1,
		chromedp.SendKeys(`(//form[contains(@class,"unblock-form")])[1]//textarea`, typed),
		chromedp.Submit(`(//form[contains(@class,"unblock-form")])[1]`),
		chromedp.WaitVisible(".error-page"))
	if got := eval[string](t, tab1, `document.contentType`); got != "text/html" {
		t.Errorf("the stale-token answer is %s", got)
	}
	body := eval[string](t, tab1, `document.body.innerText`)
	for _, want := range []string{"Reload the page and send it again", typed, "Back to the review page"} {
		if !strings.Contains(body, want) {
			t.Errorf("the stale-token page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, `{"error"`) {
		t.Error("the stale-token page is JSON")
	}
	screenshot(t, tab1, "stale-token")
	if out := p.lazy(0, "task", "show", "rv"); strings.Contains(out, "turn 3") {
		t.Errorf("a stale form ran a turn:\n%s", out)
	}
	// back, reloaded: the form works again
	do(t, tab1, chromedp.Click("a.back"), chromedp.WaitVisible(".unblock-form"),
		chromedp.SendKeys(`(//form[contains(@class,"unblock-form")])[1]//textarea`, "Once more."),
		chromedp.Submit(`(//form[contains(@class,"unblock-form")])[1]`),
		chromedp.WaitVisible(".turns"))
}

// TestBrowserFormErrorIsAPage: (d). A form that fails (an unknown task) is a
// page with the fix and the typed text for a browser; the same failure
// asked for JSON (the page's script, a client) is JSON.
func TestBrowserFormErrorIsAPage(t *testing.T) {
	p, url := reviewProject(t)
	ctx := browser(t, 1280, 900, true)
	do(t, ctx, chromedp.Navigate(p.login(url)), chromedp.WaitVisible(".toolbar"))
	// a form of the page, pointed at a task that does not exist
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`(() => {
		const f = document.querySelector('.unblock-form');
		f.action = '/review/nosuch/unblock';
		f.querySelector('textarea').value = 'words I typed';
		f.submit();
	})()`), chromedp.WaitVisible(".error-page"))
	if got := eval[string](t, ctx, `document.contentType`); got != "text/html" {
		t.Errorf("a form error is %s", got)
	}
	body := eval[string](t, ctx, `document.body.innerText`)
	if !strings.Contains(body, "nosuch") || !strings.Contains(body, "words I typed") || !strings.Contains(body, "Back to the review page") {
		t.Errorf("the error page:\n%s", body)
	}
	// the same failure as a JSON client (the page's own fetch)
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => {
		const r = await fetch('/review/nosuch/comment', {method: 'POST', headers: {'Content-Type': 'application/json', Accept: 'application/json', 'X-Lazy-CSRF': document.body.dataset.csrf || ''},
			body: JSON.stringify({body: 'x', file: 'a.go', line: 1, side: 'new', intent: 'comment'})});
		return r.status + ' ' + r.headers.get('Content-Type') + ' ' + (await r.json()).error;
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "404 application/json") || !strings.Contains(got, "nosuch") {
		t.Errorf("as a JSON client: %q", got)
	}
	// and over the CLI's own HTTP (bearer, JSON)
	resp, err := p.request("POST", "/review/nosuch/comment", "application/json", `{"body":"x","file":"a.go","line":1,"side":"new","intent":"comment"}`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Errorf("bearer JSON: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
}
