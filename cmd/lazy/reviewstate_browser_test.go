package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"lazy/api"
)

// TestBrowserReviewStateSecondBrowser: the review state lives on the
// daemon. One browser marks a file viewed and resolves a thread whose
// comment is still queued (resolving keeps it queued, and says so); a
// second browser — its own profile: no cookie, no storage of the first —
// opens the page and sees the same marks, and "changes since your last
// review" offers the head the first one reviewed once the branch moved.
func TestBrowserReviewStateSecondBrowser(t *testing.T) {
	p, url := reviewProject(t)
	ti := p.show("rv")
	c := p.post(ti.ID, api.PostCommentArgs{Body: "call it two", File: "a.go", Line: 2, Side: "new", Intent: "comment"})
	thread := `document.querySelector('details.thread[data-thread="` + c.ThreadID + `"]')`
	settled := `(document.body.dataset.rvPending || '0') === '0'`

	first := browser(t, 1280, 900, true)
	do(t, first, chromedp.Navigate(p.login(url)), chromedp.WaitVisible(".toolbar"))
	head := eval[string](t, first, `document.querySelector('.review-head').dataset.head`)
	waitJS(t, first, "the head recorded as reviewed", settled)
	do(t, first, chromedp.Click(`details.file[data-path="a.go"] .viewed-box`))
	waitJS(t, first, "a.go viewed and saved", settled+` && document.querySelector('li[data-nav-file="a.go"]').classList.contains('viewed')`)
	do(t, first, chromedp.Evaluate[chromedp.Void](thread+`.querySelector(':scope > button.resolve').click()`))
	waitJS(t, first, "the thread resolved and saved", settled+` && `+thread+`.classList.contains('resolved')`)
	// the queued comment still goes with the next unblock, and the page says so
	if got := eval[string](t, first, `document.querySelector('.rv-state-notice').textContent`); !strings.Contains(got, "queued comment still goes to the agent with the next unblock") {
		t.Errorf("the resolve's notice: %q", got)
	}
	if !eval[bool](t, first, thread+`.open && !!`+thread+`.querySelector('.resolved-queued')`) {
		t.Error("a resolved thread with a queued comment must stay open and say the comment still goes")
	}
	if pl := p.threads(ti.ID); len(pl.Queued) != 1 || pl.Queued[0].ID != c.ID {
		t.Errorf("resolving changed the queue: %+v", pl.Queued)
	}

	// a second browser of its own sees the same state, from the server
	second := browser(t, 1280, 900, true)
	do(t, second, chromedp.Navigate(p.login(url)), chromedp.WaitVisible(".toolbar"))
	if n := eval[int](t, second, `Object.keys(localStorage).filter(k => /^lazy:(viewed|resolved|seen)/.test(k)).length`); n != 0 {
		t.Fatalf("the second browser's storage holds %d review marks: it is not fresh", n)
	}
	waitJS(t, second, "a.go viewed in the second browser", `document.querySelector('details.file[data-path="a.go"] .viewed-box').checked && !document.querySelector('details.file[data-path="a.go"]').open && document.querySelector('li[data-nav-file="a.go"]').classList.contains('viewed')`)
	waitJS(t, second, "the thread resolved in the second browser", thread+`.classList.contains('resolved') && `+thread+`.querySelector('summary').textContent.includes('resolved') && !!`+thread+`.querySelector('.resolved-queued') && `+thread+`.querySelector(':scope > button.resolve').textContent === 'Unresolve'`)
	screenshot(t, second, "review-state-second-browser")

	// the second browser takes the viewed mark off; the first, reloaded, follows
	do(t, second, chromedp.Click(`details.file[data-path="a.go"] .viewed-box`))
	waitJS(t, second, "a.go not viewed, saved", settled+` && !document.querySelector('details.file[data-path="a.go"] .viewed-box').checked`)
	do(t, first, chromedp.Reload(), chromedp.WaitVisible(".toolbar"))
	waitJS(t, first, "a.go not viewed in the first browser", `!document.querySelector('details.file[data-path="a.go"] .viewed-box').checked && document.querySelector('details.file[data-path="a.go"]').open`)

	// the branch moves: the second browser is offered the changes since
	// the head the reviewer last reviewed
	p.lazy(0, "unblock", "rv", "-m", "@write b.go bee\n@commit add b.go\n@answer wrote b.go")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if ti := p.show("rv"); ti.Turns == 2 && ti.Status == "blocked" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("turn 2 did not end: %+v", p.show("rv"))
		}
	}
	do(t, second, chromedp.Reload(), chromedp.WaitVisible(".toolbar"))
	if now := eval[string](t, second, `document.querySelector('.review-head').dataset.head`); now == head {
		t.Fatalf("the head did not move: %s", now)
	}
	waitJS(t, second, "changes since the last review", `!document.querySelector('.since-link').hidden && document.querySelector('.since-link a').getAttribute('href') === '?since=`+head+`'`)
	// the unblock delivered the resolved thread's comment: still resolved
	// (no message came), now folded, with nothing left to say
	waitJS(t, second, "the delivered thread resolved and folded", thread+`.classList.contains('resolved') && !`+thread+`.open && !`+thread+`.querySelector('.resolved-queued')`)
}
