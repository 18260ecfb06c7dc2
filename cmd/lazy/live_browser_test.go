package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserLiveTranscriptAndStatusBar (issue 29): the task page shows the
// stub model's text while the turn still runs (the agent sleeps after its
// model call), with no reload; the review page follows the task's stream
// (no poll timer) and its status bar moves to running sooner than the idle
// poll (10 s) would show it.
func TestBrowserLiveTranscriptAndStatusBar(t *testing.T) {
	p, url := reviewProject(t)
	id := url[strings.LastIndex(url, "/")+1:]
	ctx := browser(t, 1280, 900, true)
	do(t, ctx, chromedp.Navigate(p.login(p.info().BaseURL+"/tasks/"+id)), chromedp.WaitVisible("#task-status"))
	eval[bool](t, ctx, `window.__stillHere = true`)
	p.stub.Reply = func(string) string { return "the stub model says: watch me work" }
	p.lazy(0, "comment", "rv", "-m", "watch me work\n@then-sleep 4s\n@answer second")
	waitJS(t, ctx, "the stub's text in turn 2's transcript while it runs",
		`!!document.querySelector('#turn-2-transcript .call-text') && document.querySelector('#turn-2-transcript .call-text').textContent.includes('the stub model says: watch me work') && document.querySelector('#task-status').textContent === 'running'`)
	shown := eval[string](t, ctx, `document.querySelector('#turn-2-transcript').innerText`)
	t.Logf("turn 2 while running: %q", shown)
	if !eval[bool](t, ctx, `window.__stillHere === true`) {
		t.Error("the task page was reloaded")
	}
	waitJS(t, ctx, "blocked after the turn", `document.querySelector('#task-status').textContent === 'blocked'`)
	if got := eval[string](t, ctx, `document.querySelector('#turn-2-transcript .call-text').textContent`); strings.Count(got, "the stub model says: watch me work") != 1 {
		t.Errorf("turn 2's kept transcript: %q", got)
	}
	page := eval[string](t, ctx, `document.documentElement.outerHTML`)
	p.keep("task-live-browser.html", page)
	if strings.Contains(page, "svc-") || strings.Contains(page, "REALSECRET") {
		t.Error("a placeholder or the key on the task page")
	}

	// the review page: no poll timer while the stream is open
	do(t, ctx, chromedp.Navigate(url), chromedp.WaitVisible(".toolbar"))
	waitJS(t, ctx, "the review page on the stream", `document.body.dataset.pollMs === 'stream'`)
	if got := eval[string](t, ctx, `document.querySelector('[data-sb="status"]').textContent`); got != "blocked" {
		t.Fatalf("status bar %q before the turn", got)
	}
	t0 := time.Now()
	p.lazy(0, "comment", "rv", "-m", "again\n@then-sleep 3s\n@answer third")
	waitJS(t, ctx, "the status bar at running", `document.querySelector('[data-sb="status"]').textContent === 'running'`)
	took := time.Since(t0)
	waitJS(t, ctx, "the status bar back at blocked", `document.querySelector('[data-sb="status"]').textContent === 'blocked' && document.querySelector('[data-sb="turns"]').textContent === '3'`)
	t.Logf("the review page's status bar showed running %v after the comment (idle poll: 10 s)", took.Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("the status bar took %v: not from the stream", took)
	}
	if got := eval[string](t, ctx, `document.body.dataset.pollMs`); got != "stream" {
		t.Errorf("poll state %q, want stream (no poll timer)", got)
	}
}
