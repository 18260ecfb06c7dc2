package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"lazy/api"
)

// largeFiles and largeLines make the large generated diff: 300 new files
// of 50 lines, then zz/mod.go (200 lines in the parent) with one line
// changed, last in the diff: 15,002 changed lines, most files sent without
// their rows.
const largeFiles, largeLines = 300, 50

// largeDiffProject is a started daemon with one blocked task "huge" whose
// branch holds the large generated diff (committed into the task's
// worktree by hand and fetched into the project: a prompt that wrote 15,000
// lines would be one argument over the system's limit). One line of pkg/f287.go holds needle_in_287.
func largeDiffProject(t *testing.T) (*project, api.TaskInfo) {
	p := newProject(t, "process")
	var mod strings.Builder
	for i := 1; i <= 200; i++ {
		fmt.Fprintf(&mod, "var m%d = %d\n", i, i)
	}
	if err := os.MkdirAll(filepath.Join(p.root, "zz"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.root, "zz/mod.go"), []byte("package zz\n\n"+mod.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, p.root, "add", "-A")
	runGit(t, p.root, "-c", "user.name=t", "-c", "user.email=t@l", "commit", "-q", "-m", "zz/mod.go")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "huge", "-m", "seed\n@write seed.txt seed\\n\n@commit seed\n@answer done")
	ti := p.waitStatus("huge", "blocked")
	wt := ti.Worktree
	if head := strings.TrimSpace(runGit(t, wt, "rev-parse", "--abbrev-ref", "HEAD")); head != ti.Branch {
		t.Fatalf("the task's worktree %s is on %q, want %s", wt, head, ti.Branch)
	}
	for f := 0; f < largeFiles; f++ {
		var b strings.Builder
		b.WriteString("package pkg\n")
		for l := 2; l <= largeLines; l++ {
			if f == 287 && l == 33 {
				b.WriteString("var needle_in_287 = \"found\"\n")
				continue
			}
			fmt.Fprintf(&b, "var v%d_%d = \"line %d\"\n", f, l, l)
		}
		if err := os.MkdirAll(filepath.Join(wt, "pkg"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(wt, fmt.Sprintf("pkg/f%03d.go", f)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	changed := strings.Replace("package zz\n\n"+mod.String(), "var m100 = 100\n", "var m100 = 1000\n", 1)
	if err := os.WriteFile(filepath.Join(wt, "zz/mod.go"), []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, wt, "add", "-A")
	runGit(t, wt, "-c", "user.name=t", "-c", "user.email=t@l", "commit", "-q", "-m", "the large diff")
	// the worktree is a repository of its own: its branch is taken in as
	// the daemon does at a turn's end
	runGit(t, p.root, "fetch", "-q", wt, "+HEAD:refs/heads/"+ti.Branch)
	if stat := runGit(t, p.root, "diff", "--shortstat", ti.Parent+"..."+ti.Branch); !strings.Contains(stat, "302 files changed") {
		t.Fatalf("the large diff: %s", stat)
	}
	return p, ti
}

// TestBrowserLargeDiffReach: on a diff of 300+ files and 15,000 lines,
// most sent without rows, the search, a #l- link (typed, in the queue, in
// the file list) and n/p reach lines and threads of files not yet loaded;
// withdraw keeps the window where it was and context and the whole file
// load in place: no navigation.
func TestBrowserLargeDiffReach(t *testing.T) {
	p, ti := largeDiffProject(t)
	p.post(ti.ID, api.PostCommentArgs{Body: "first <b>look</b> & see", File: "pkg/f290.go", Line: 10, Side: "new", Intent: "comment"})
	p.post(ti.ID, api.PostCommentArgs{Body: "second <script>x()</script>", File: "pkg/f295.go", Line: 20, Side: "new", Intent: "comment"})
	url := p.info().BaseURL + "/review/" + ti.ID
	ctx := browser(t, 1280, 900, true)
	do(t, ctx, chromedp.Navigate(p.login(url)), chromedp.WaitVisible(".diff-search input"))
	files := eval[int](t, ctx, `document.querySelectorAll('details.file').length`)
	lazy := eval[int](t, ctx, `document.querySelectorAll('details.file[data-lazy]').length`)
	lines := eval[int](t, ctx, `Array.from(document.querySelectorAll('details.file')).reduce((n, d) => n + parseInt(d.dataset.rows, 10), 0)`)
	t.Logf("%d files, %d sent without rows, %d diff lines", files, lazy, lines)
	if files < 250 || lines < 15000 || lazy < 200 {
		t.Fatalf("%d files (%d without rows), %d lines: want >= 250 files, >= 15,000 lines, most without rows", files, lazy, lines)
	}
	// a line is reached when its cell is the target and in the window
	reached := func(what, id string) {
		t.Helper()
		waitJS(t, ctx, what, `(() => { const c = document.getElementById('`+id+`'); if (!c || !c.classList.contains('target')) return false;
			const r = c.getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; })()`)
	}
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`window.__stay = 'here'`))
	stayed := func(what string) {
		t.Helper()
		if !eval[bool](t, ctx, `window.__stay === 'here'`) {
			t.Fatalf("%s: the page was loaded again", what)
		}
	}

	// the queued comment's link, into a file sent without rows
	if eval[int](t, ctx, `document.querySelectorAll('details.file[data-path="pkg/f290.go"] td.code').length`) != 0 {
		t.Fatal("pkg/f290.go came with its rows: the test needs it sent without")
	}
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`Array.from(document.querySelectorAll('.queued-list a')).find(a => a.textContent.includes('f290')).click()`))
	reached("the queued comment's line", "l-pkg%2Ff290.go-new-10")
	// what a reviewer wrote stays text (Markdown makes it a paragraph, no <b>)
	textOnly := func(sel string) string {
		return eval[string](t, ctx, `(() => { const b = document.querySelector('`+sel+`'); return b ? (b.querySelector('b, i, script') ? 'markup: ' + b.innerHTML : b.textContent.trim()) : 'none'; })()`)
	}
	if got := textOnly(`details.file[data-path="pkg/f290.go"] tr.thread-row .msg .body`); got != "first <b>look</b> & see" {
		t.Errorf("the loaded thread's body: %q (must stay escaped)", got)
	}

	// the server-side search finds a line of an unloaded file; its hit loads and scrolls
	if eval[int](t, ctx, `document.querySelectorAll('details.file[data-path="pkg/f287.go"] td.code').length`) != 0 {
		t.Fatal("pkg/f287.go came with its rows")
	}
	do(t, ctx, chromedp.SendKeys(".diff-search input", "needle_in"), chromedp.Click(".diff-search button"),
		chromedp.WaitVisible(".search-results a.search-hit"))
	if n := eval[int](t, ctx, `document.querySelectorAll('.search-results a.search-hit').length`); n != 1 {
		t.Fatalf("%d hits for needle_in, want 1", n)
	}
	t.Logf("the search over %d lines answered in %.0f ms", lines, eval[float64](t, ctx, `performance.getEntriesByType('resource').filter(e => e.name.includes('/search?')).pop().duration`))
	if os.Getenv("LAZY_SCREENSHOTS") != "" { // the window only: the whole page is 300 files long
		if shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err == nil {
			_ = os.WriteFile(filepath.Join("..", "..", "docs", "screenshots", "review-search.png"), shot, 0o644)
		}
	}
	do(t, ctx, chromedp.Click(".search-results a.search-hit"))
	reached("the search hit", "l-pkg%2Ff287.go-new-33")
	if h := eval[string](t, ctx, `location.hash`); h != "#l-pkg%2Ff287.go-new-33" {
		t.Errorf("after the hit the address says %q", h)
	}

	// a fragment link typed into the address of this page, then of a fresh one
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`location.hash = '#l-pkg%2Ff270.go-new-5'`))
	reached("a typed fragment", "l-pkg%2Ff270.go-new-5")
	stayed("links")
	do(t, ctx, chromedp.Navigate(url+"#l-pkg%2Ff280.go-new-7"))
	reached("a fragment link opened", "l-pkg%2Ff280.go-new-7")

	// the file list's link
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('.file-nav li[data-nav-file="pkg/f260.go"] a').click()`))
	waitJS(t, ctx, "the listed file's rows, at the top", `(() => { const d = document.querySelector('details.file[data-path="pkg/f260.go"]');
		return d.open && d.querySelectorAll('td.code[data-line]').length === `+fmt.Sprint(largeLines)+` && Math.abs(d.getBoundingClientRect().top) < 20; })()`)

	// n and p reach the threads of unloaded files, in order
	do(t, ctx, chromedp.Navigate(url), chromedp.WaitVisible(".diff-search input"), chromedp.Evaluate[chromedp.Void](`window.__stay = 'here'`))
	focused := `(() => { const t = document.querySelector('.thread.focused'); if (!t) return ''; const r = t.getBoundingClientRect();
		return (r.top < innerHeight && r.bottom > 0 ? '' : 'offscreen:') + t.closest('details.file').dataset.path; })()`
	for i, step := range []struct{ key, want string }{{"n", "pkg/f290.go"}, {"n", "pkg/f295.go"}, {"p", "pkg/f290.go"}, {"n", "pkg/f295.go"}} {
		do(t, ctx, chromedp.KeyEvent(step.key))
		waitJS(t, ctx, fmt.Sprintf("key %d (%s) on %s", i, step.key, step.want), focused+` === '`+step.want+`'`)
	}

	// withdraw in place: the window stays, the thread and the queue change
	// scrollY once the window has stopped moving (n's scroll, the file
	// list following it)
	settled := func() float64 {
		t.Helper()
		y, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`(async () => {
			let last = -1, same = 0;
			while (same < 10) { await new Promise((r) => requestAnimationFrame(r)); if (scrollY === last) same++; else { same = 0; last = scrollY; } }
			return scrollY;
		})()`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		return y
	}
	y := settled()
	if y < 1000 {
		t.Fatalf("scrollY %v: the thread should be far down the page", y)
	}
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('.thread.focused .msg-actions form[action$="/withdraw"] button').click()`))
	waitJS(t, ctx, "the withdrawn message", `!!document.querySelector('details.file[data-path="pkg/f295.go"] .msg-withdrawn del.body') && !!document.querySelector('.notice.toast')`)
	stayed("withdraw")
	if after := settled(); after != y {
		t.Errorf("scrollY %v before withdraw, %v after", y, after)
	}
	if q := eval[string](t, ctx, `document.querySelector('.queued-count').textContent`); q != "1" {
		t.Errorf("queued after withdraw: %s, want 1", q)
	}
	if got := textOnly(`details.file[data-path="pkg/f295.go"] del.body`); got != "second <script>x()</script>" {
		t.Errorf("the withdrawn body: %q (must stay escaped)", got)
	}

	// in split too: the other queued comment, withdrawn from its split row
	// (a file's split table is built when it comes near the window)
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('details.file[data-path="pkg/f290.go"] .msg').scrollIntoView({ block: 'center' }); document.querySelector('.toolbar button[data-value="split"]').click()`))
	waitJS(t, ctx, "pkg/f290.go split", `!!document.querySelector('details.file[data-path="pkg/f290.go"] table.split-table .msg')`)
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('details.file[data-path="pkg/f290.go"] table.split-table .msg').scrollIntoView({ block: 'center' })`))
	y = settled()
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('details.file[data-path="pkg/f290.go"] table.split-table .msg-actions form[action$="/withdraw"] button').click()`))
	waitJS(t, ctx, "the split row withdrawn", `!!document.querySelector('details.file[data-path="pkg/f290.go"] table.split-table .msg-withdrawn del.body') && document.querySelector('.queued-count').textContent === '0'`)
	stayed("withdraw in split")
	if after := settled(); after != y {
		t.Errorf("split: scrollY %v before withdraw, %v after", y, after)
	}
	do(t, ctx, chromedp.Click(`.toolbar button[data-value="unified"]`), chromedp.WaitNotPresent("table.split-table"))

	// context and the whole file of an unloaded file, in place
	rows := `document.querySelectorAll('details.file[data-path="zz/mod.go"] td.code[data-line]').length`
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('.file-nav li[data-nav-file="zz/mod.go"] a').click()`))
	waitJS(t, ctx, "zz/mod.go's rows", rows+` === 8`)
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('details.file[data-path="zz/mod.go"] a.expand').click()`))
	waitJS(t, ctx, "20 lines of context", rows+` === 42`)
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('details.file[data-path="zz/mod.go"] summary a.whole-file').click()`))
	waitJS(t, ctx, "the whole file", rows+` === 203 && document.querySelector('details.file[data-path="zz/mod.go"] summary a.whole-file').textContent === 'changes only'`)
	t.Logf("the whole file (203 rows) fetched in %.0f ms", eval[float64](t, ctx, `performance.getEntriesByType('resource').filter(e => e.name.includes('full=zz')).pop().duration`))
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('details.file[data-path="zz/mod.go"] summary a.whole-file').click()`))
	waitJS(t, ctx, "changes only again", rows+` === 8`)
	stayed("context and the whole file")

	// a comment posted from the page: its thread comes from the threads
	// fragment, never the whole page again
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`performance.clearResourceTimings(); document.querySelector('details.file[data-path="zz/mod.go"] td.code[data-side="new"][data-line="102"] a.comment-link').click()`),
		chromedp.WaitVisible("tr.comment-row textarea"), chromedp.SendKeys("tr.comment-row textarea", "why <i>1000</i>?"),
		chromedp.Click(`tr.comment-row button[value="comment"]`), chromedp.WaitNotPresent("tr.comment-row"))
	waitJS(t, ctx, "the new thread", `Array.from(document.querySelectorAll('details.file[data-path="zz/mod.go"] tr.thread-row .body')).some(b => b.textContent.trim() === 'why <i>1000</i>?' && !b.querySelector('i'))`)
	stayed("a comment")
	if got := eval[string](t, ctx, `performance.getEntriesByType('resource').map(e => new URL(e.name).pathname).filter(p => p === '/review/`+ti.ID+`').join(',')`); got != "" {
		t.Errorf("posting a comment fetched the page again: %s", got)
	}

	// split on the large diff: narrow number columns, the two panes
	// sharing the width, no code cell scrolling on its own
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`), chromedp.Click(`.toolbar button[data-value="split"]`), chromedp.WaitVisible("table.split-table"))
	widths := eval[[]float64](t, ctx, `Array.from(document.querySelector('table.split-table tr.ln').cells).map(c => c.getBoundingClientRect().width)`)
	if len(widths) != 4 || widths[0] >= 80 || widths[2] >= 80 || widths[1] < 300 || widths[1]/widths[3] > 1.05 || widths[3]/widths[1] > 1.05 {
		t.Errorf("split row cells %v px: want number columns < 80 and two code panes within 5%% of each other", widths)
	}
	if n := eval[int](t, ctx, `Array.from(document.querySelectorAll('table.split-table td.code')).filter(c => c.scrollWidth > c.clientWidth && /auto|scroll/.test(getComputedStyle(c).overflowX)).length`); n != 0 {
		t.Errorf("split: %d code cells scroll on their own", n)
	}
	do(t, ctx, chromedp.Click(`.toolbar button[data-value="unified"]`), chromedp.WaitNotPresent("table.split-table"))

	// viewed in this browser, seen from a second one (its own profile: no
	// cookie, no storage of the first), at a phone's width without
	// sideways scroll
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('details.file[data-path="pkg/f001.go"] input.viewed-box').click()`))
	waitJS(t, ctx, "the viewed mark saved", `document.querySelector('details.file[data-path="pkg/f001.go"] input.viewed-box').checked && (document.body.dataset.rvPending || '0') === '0'`)
	phone := browser(t, 390, 844, true)
	do(t, phone, chromedp.Navigate(p.login(url)), chromedp.WaitVisible("details.file"))
	if !eval[bool](t, phone, `document.querySelector('details.file[data-path="pkg/f001.go"] input.viewed-box').checked`) {
		t.Error("a second browser does not see pkg/f001.go viewed")
	}
	if w := eval[[]int](t, phone, `[document.documentElement.scrollWidth, innerWidth]`); w[0] > w[1] {
		t.Errorf("at 390 px the large review page is %d px wide: it scrolls sideways", w[0])
	}
}
