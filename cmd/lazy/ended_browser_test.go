package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"lazy/api"
	"lazy/review"
)

// TestBrowserEndedTaskPages: after an accept the review page is the task's
// record — what went in (the diff from the parent's head it was merged onto
// to the head merged, which stays so when the parent moves on), its commits
// and threads, a line saying where and at which commit it went in, and no
// form or button that acts. A cancelled task's page shows what was left on
// its branch the same way. reviewDiff answers the same diff, and a form
// posted all the same is refused with the reason.
func TestBrowserEndedTaskPages(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "rv", "-m", fourLines)
	rv := p.waitStatus("rv", "blocked")
	ask := p.post("rv", api.PostCommentArgs{Body: "What is two for?\n@answer Two is the second line.", File: "a.go", Line: 2, Side: "new", Intent: "ask"})
	p.waitThreads("rv", "the answer", func(pl review.Payload) bool { return find(pl, ask.ID).AskState == review.AskAnswered })
	before := strings.TrimSpace(runGit(t, p.root, "rev-parse", "main"))
	head := strings.TrimSpace(runGit(t, p.root, "rev-parse", "lazy/rv"))
	p.lazy(0, "accept", "rv", "--reason", "two is explained")
	if got := strings.TrimSpace(runGit(t, p.root, "rev-parse", "main")); got != head {
		t.Fatalf("main after accept: %s, want the task's head %s", got, head)
	}
	if ti := p.show("rv"); ti.Status != "accepted" || ti.EndBase != before || ti.EndHead != head {
		t.Fatalf("accepted task: status %s base %q head %q, want accepted %q %q", ti.Status, ti.EndBase, ti.EndHead, before, head)
	}

	// a second task, cancelled with a commit on its branch; main then moves
	// on, so a diff against main as it is now would show neither task's work
	p.lazy(0, "task", "new", "--code", "cx", "-m", "write b\n@write b.go left\\nbehind\\n\n@commit add b.go\n@answer wrote b.go")
	cx := p.waitStatus("cx", "blocked")
	cxHead := strings.TrimSpace(runGit(t, p.root, "rev-parse", "lazy/cx"))
	p.lazy(0, "task", "cancel", "cx")
	runGit(t, p.root, "-c", "user.name=t", "-c", "user.email=t@l", "commit", "-q", "--allow-empty", "-m", "main moves on")

	ctx := browser(t, 1280, 900, true)
	readOnly := func(page string) {
		t.Helper()
		// the search reads the record: the one form an ended task's page keeps
		if n := eval[int](t, ctx, `document.querySelectorAll('form:not(.diff-search), textarea, input[type=submit], a.comment-link, template.comment-form-tpl, .accept-open').length`); n != 0 {
			t.Errorf("%s: %d forms, boxes or comment links, want none", page, n)
		}
		acts := eval[string](t, ctx, `Array.from(document.querySelectorAll('button')).map(b => b.textContent).filter(s => /unblock|accept|sync|ask agent|add comment|withdraw|re-send|reply/i.test(s)).join('|')`)
		if acts != "" {
			t.Errorf("%s offers actions: %s", page, acts)
		}
	}

	// the accepted task
	do(t, ctx, chromedp.Navigate(p.login(p.info().BaseURL+"/review/"+rv.ID)), chromedp.WaitVisible(".ended-status"))
	status := eval[string](t, ctx, `document.querySelector('.ended-status').textContent.replace(/\s+/g, ' ')`)
	if !strings.Contains(status, "Accepted into main at "+head[:10]) || !strings.Contains(status, before[:10]) {
		t.Errorf("status line: %q, want \"Accepted into main at %s\" and the base %s", status, head[:10], before[:10])
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('td.code[data-file="a.go"][data-side="new"]').length`); n != 4 {
		t.Errorf("merged diff: %d new lines of a.go, want 4", n)
	}
	if !eval[bool](t, ctx, `!!document.querySelector('nav.file-nav li[data-nav-file="a.go"]') && !!document.getElementById('l-a.go-new-2')`) {
		t.Error("the merged diff lacks its file list entry or the fragment id of a.go line 2")
	}
	if c := eval[string](t, ctx, `Array.from(document.querySelectorAll('.commit-list li')).map(li => li.textContent).join('|')`); !strings.Contains(c, "add a.go") || strings.Count(c, "|") != 0 {
		t.Errorf("commits merged: %q, want the one commit add a.go", c)
	}
	if h := eval[string](t, ctx, `document.querySelector('.task-commits h2').textContent`); h != "Commits merged (1)" {
		t.Errorf("commits heading: %q", h)
	}
	thread := eval[string](t, ctx, `(document.querySelector('tr.thread-row[data-thread-for="l-a.go-new-2"]') || {textContent: ''}).textContent`)
	if !strings.Contains(thread, "What is two for?") || !strings.Contains(thread, "Two is the second line.") {
		t.Errorf("the thread on a.go line 2: %q", thread)
	}
	if body := eval[string](t, ctx, `document.body.textContent`); strings.Contains(body, "No changes against the parent branch yet") || strings.Contains(body, "Commits (0)") {
		t.Error("the accepted task's page still says it has no changes")
	}
	readOnly("the accepted task's page")
	screenshot(t, ctx, "review-accepted")

	// reviewDiff answers the same diff
	var d api.DiffResult
	if err := p.rpc().Call(context.Background(), "reviewDiff", map[string]string{"task": "rv"}, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Files) != 1 || d.Files[0].NewPath != "a.go" || d.Files[0].Added != 4 || len(d.Commits) != 1 || d.Commits[0].SHA != head || d.Merge != nil {
		t.Errorf("reviewDiff of the accepted task: %d files %+v, %d commits, merge %v", len(d.Files), d.Files, len(d.Commits), d.Merge)
	}

	// the file loaded into the page, the whole file and the raw file run
	// between the same commits
	for path, want := range map[string]string{
		"/review/" + rv.ID + "/file?path=a.go":         `data-file="a.go" data-side="new" data-line="4"`,
		"/review/" + rv.ID + "?full=a.go":              `data-file="a.go" data-side="new" data-line="4"`,
		"/review/" + rv.ID + "/raw?path=a.go":          "one\ntwo\nthree\nfour\n",
		"/review/" + rv.ID + "/raw?path=a.go&side=old": "a.go is new on this task",
	} {
		resp, err := p.get(path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), want) || strings.Contains(string(b), "comment-link") {
			t.Errorf("GET %s: %d %.300s, want %q and no comment link", path, resp.StatusCode, b, want)
		}
	}

	// a form posted all the same: refused, with the reason, and nothing queued
	for _, f := range []struct{ path, body string }{
		{"/unblock", "feedback=more"},
		{"/accept", url.Values{"reason": {"again"}, "head": {head}}.Encode()},
		{"/sync", ""},
		{"/comment", "body=more&file=a.go&line=2&side=new&intent=comment"},
	} {
		v, _ := url.ParseQuery(f.body)
		code, b := p.postForm("/review/"+rv.ID+f.path, v)
		if code != http.StatusSeeOther || !strings.Contains(b, "is accepted") {
			t.Errorf("POST %s to the accepted task: %d %.300s, want 303 to the page saying it is accepted", f.path, code, b)
		}
	}
	if pl := p.threads("rv"); pl.PendingDelivery != 0 || len(pl.Threads) != 1 {
		t.Errorf("after the refused posts: %d queued, %d threads", pl.PendingDelivery, len(pl.Threads))
	}

	// the cancelled task: what was left on its branch
	do(t, ctx, chromedp.Navigate(p.info().BaseURL+"/review/"+cx.ID), chromedp.WaitVisible(".ended-status"))
	status = eval[string](t, ctx, `document.querySelector('.ended-status').textContent.replace(/\s+/g, ' ')`)
	if !strings.Contains(status, "Cancelled") || !strings.Contains(status, "What was left on lazy/cx at "+cxHead[:10]) {
		t.Errorf("cancelled status line: %q", status)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('td.code[data-file="b.go"][data-side="new"]').length`); n != 2 {
		t.Errorf("what was left: %d new lines of b.go, want 2", n)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('td.code[data-file="a.go"]').length`); n != 0 {
		t.Error("the cancelled task's diff shows the accepted task's file: it is not against main as it was")
	}
	if c := eval[string](t, ctx, `document.querySelector('.commit-list').textContent`); !strings.Contains(c, "add b.go") {
		t.Errorf("commits left: %q", c)
	}
	readOnly("the cancelled task's page")
}
