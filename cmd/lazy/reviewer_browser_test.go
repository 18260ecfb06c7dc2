package main

import (
	"lazy/api"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// The reviewer's tool in Chromium: the file list and keys, viewed marks that
// last and reset, changed words, threads that follow their text, more
// context, and the merge dry run before Accept.

const parentA = "package a\n\nfunc f(ctx int) int { return ctx }\n\nvar alpha = 1\nvar beta = 2\n"

// turn 1 renames ctx and adds b.go
const renameTurn = "rename\n@write a.go package a\\n\\nfunc f(rctx int) int { return rctx }\\n\\nvar alpha = 1\\nvar beta = 2\\n\n" +
	"@write b.go package a\\n\\nvar two = 2\\n\n@commit rename ctx\n@answer Renamed ctx to rctx and added b.go."

// turn 2 moves alpha down a line and changes beta
const moveTurn = "@write a.go package a\\n\\nfunc f(rctx int) int { return rctx }\\n\\n// values\\nvar alpha = 1\\nvar beta = 3\\n\n@commit move alpha, beta is 3\n@answer Moved alpha and set beta to 3."

// parentAProject is a started daemon on a project whose main holds a.go
// (parentA): the reviewer's tests' turns change it.
func parentAProject(t *testing.T) *project {
	t.Helper()
	p := newProject(t, "process")
	if err := os.WriteFile(filepath.Join(p.root, "a.go"), []byte(parentA), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, p.root, "add", "a.go")
	runGit(t, p.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "add a.go")
	p.lazy(0, "daemon", "start")
	return p
}

func TestBrowserReviewerTool(t *testing.T) {
	p := parentAProject(t)
	p.lazy(0, "task", "new", "--code", "rt", "-m", renameTurn)
	ti := p.waitStatus("rt", "blocked")
	url := p.info().BaseURL + "/review/" + ti.ID
	ctx := browser(t, 1400, 1000, true)
	do(t, ctx, chromedp.Navigate(p.login(url)), chromedp.WaitVisible(".toolbar"))

	// the file list, and the renamed identifier marked as a word
	if got := eval[string](t, ctx, `Array.from(document.querySelectorAll('nav.file-nav li .nav-path')).map(e => e.textContent).join(',')`); got != "a.go,b.go" {
		t.Fatalf("file list: %q", got)
	}
	if got := eval[string](t, ctx, `Array.from(document.querySelectorAll('td.code del, td.code ins')).map(e => e.tagName + ':' + e.textContent).join(' ')`); got != "DEL:ctx DEL:ctx INS:rctx INS:rctx" {
		t.Errorf("word marks: %q", got)
	}
	if eval[int](t, ctx, `document.querySelectorAll('td.code .text span.kd, td.code .text span.k').length`) == 0 {
		t.Error("no highlighted keyword")
	}
	screenshot(t, ctx, "review-files-words")

	// j and k walk the files; the list follows
	current := func() string {
		return eval[string](t, ctx, `(document.querySelector('nav.file-nav li.current .nav-path') || {}).textContent || ''`)
	}
	press := func(key string) { do(t, ctx, chromedp.KeyEvent(key)) }
	// the file at the top of the window is the current one; j and k move
	waitJS(t, ctx, "a.go current at the top", `document.querySelector('details.file.focused') && document.querySelector('details.file.focused').dataset.path === 'a.go'`)
	press("j")
	waitJS(t, ctx, "j to b.go", `document.querySelector('details.file.focused').dataset.path === 'b.go'`)
	if c := current(); c != "b.go" {
		t.Errorf("the list marks %q current", c)
	}
	press("k")
	waitJS(t, ctx, "k back to a.go", `document.querySelector('details.file.focused').dataset.path === 'a.go'`)

	// viewed: collapses the file, lasts across a reload
	do(t, ctx, chromedp.Click(`details.file[data-path="a.go"] .viewed-box`))
	waitJS(t, ctx, "a.go viewed and closed", `!document.querySelector('details.file[data-path="a.go"]').open && document.querySelector('li[data-nav-file="a.go"]').classList.contains('viewed')`)
	waitJS(t, ctx, "the mark saved", `document.body.dataset.rvPending === '0'`)
	do(t, ctx, chromedp.Reload(), chromedp.WaitVisible(".toolbar"))
	waitJS(t, ctx, "viewed after a reload", `!document.querySelector('details.file[data-path="a.go"]').open && document.querySelector('details.file[data-path="a.go"] .viewed-box').checked`)
	if eval[bool](t, ctx, `document.querySelector('li[data-nav-file="b.go"]').classList.contains('viewed')`) {
		t.Error("b.go is marked viewed")
	}

	// two review comments, then a turn that moves alpha and changes beta
	for _, c := range []struct{ line int }{{5}, {6}} {
		p.post(ti.ID, api.PostCommentArgs{Body: "about line " + strconv.Itoa(c.line), File: "a.go", Line: c.line, Side: "new", Intent: "comment"})
	}
	p.lazy(0, "unblock", "rt", "-m", moveTurn)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if ti := p.show("rt"); ti.Turns == 2 && ti.Status == "blocked" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("turn 2 did not end: %+v", p.show("rt"))
		}
	}
	do(t, ctx, chromedp.Reload(), chromedp.WaitVisible(".toolbar"))
	// a.go changed: its viewed mark is void
	waitJS(t, ctx, "a.go open again", `document.querySelector('details.file[data-path="a.go"]').open && !document.querySelector('details.file[data-path="a.go"] .viewed-box').checked`)
	threads := eval[string](t, ctx, `Array.from(document.querySelectorAll('tr.thread-row')).map(r => r.dataset.threadFor + '|' + r.querySelector('summary').textContent.replace(/\s+/g, ' ').trim()).join('\n')`)
	if !strings.Contains(threads, "l-a.go-new-6|") || !strings.Contains(threads, "moved from line 5") {
		t.Errorf("the alpha thread did not follow its line:\n%s", threads)
	}
	if !strings.Contains(threads, "outdated") {
		t.Errorf("the beta thread is not outdated:\n%s", threads)
	}
	if eval[int](t, ctx, `document.querySelectorAll('details.thread[open]').length`) != 0 {
		t.Error("delivered threads must start collapsed")
	}
	// n walks the threads (and opens what it lands on)
	press("n")
	waitJS(t, ctx, "n to the first thread", `!!document.querySelector('.thread.focused')`)
	screenshot(t, ctx, "review-threads-ported")
	// resolve: folds the thread and marks it, across a reload
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('.thread.focused > button.resolve').click()`))
	id := eval[string](t, ctx, `document.querySelector('.thread.focused').dataset.thread`)
	waitJS(t, ctx, "the resolve saved", `document.body.dataset.rvPending === '0' && document.querySelector('.thread.focused').classList.contains('resolved')`)
	do(t, ctx, chromedp.Reload(), chromedp.WaitVisible(".toolbar"))
	waitJS(t, ctx, "the thread resolved after a reload", `(() => { const d = document.querySelector('details.thread[data-thread="`+id+`"]'); return d.classList.contains('resolved') && !d.open && d.querySelector('summary').textContent.includes('resolved'); })()`)

	// more context: the whole of a.go, loaded in place
	do(t, ctx, chromedp.Click(`details.file[data-path="a.go"] a.whole-file`))
	waitJS(t, ctx, "the whole file", `document.querySelectorAll('details.file[data-path="a.go"] tr.ln-ctx').length >= 3 && document.querySelector('details.file[data-path="a.go"] a.whole-file').textContent === 'changes only'`)
	if n := eval[int](t, ctx, `document.querySelectorAll('details.file[data-path="a.go"] td.code[data-side="new"]').length`); n != 7 {
		t.Errorf("the whole file shows %d new-side lines, want 7", n)
	}

	// the merge dry run: clean, then a conflict once the parent changes a.go
	do(t, ctx, chromedp.Navigate(url), chromedp.WaitVisible(".toolbar"))
	if got := eval[string](t, ctx, `document.querySelector('.accept-block').dataset.merge`); got != "clean" {
		t.Errorf("data-merge %q, want clean", got)
	}
	if err := os.WriteFile(filepath.Join(p.root, "a.go"), []byte(strings.Replace(parentA, "beta = 2", "beta = 4", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, p.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "parent: beta is 4")
	do(t, ctx, chromedp.Reload(), chromedp.WaitVisible(".toolbar"))
	if got := eval[string](t, ctx, `document.querySelector('.accept-block').dataset.merge + ' ' + document.querySelector('.merge-panel').textContent.replace(/\s+/g, ' ')`); !strings.HasPrefix(got, "conflict") || !strings.Contains(got, "a.go") {
		t.Errorf("merge panel: %q", got)
	}
	screenshot(t, ctx, "review-merge-conflict")

	// the keys are listed
	press("?")
	waitJS(t, ctx, "the keys dialog", `!!document.querySelector('dialog.keys-help[open]')`)
}

// BenchmarkBrowserLargeReview measures the review page of a 5,000-line task
// (100 files of 50 lines, 200 threads) in headless Chromium, through the
// DevTools protocol: the load until the page is interactive (its script has
// run: DOMContentLoaded handlers done), and a j keypress until the frame
// that shows the next file. Each iteration loads the page afresh.
func BenchmarkBrowserLargeReview(b *testing.B) {
	p := newProject(b, "process")
	p.lazy(0, "daemon", "start")
	// issue 30's large change: 300 files, 15,000 added lines, 200 threads
	const files = 300
	ti := p.manyFiles("big", files)
	for i := 0; i < 200; i++ {
		p.post(ti.ID, api.PostCommentArgs{Body: "note " + strconv.Itoa(i), File: "pkg/f" + strconv.Itoa(i%files) + ".go", Line: 1 + i%49, Side: "new", Intent: "comment"})
	}
	url := p.info().BaseURL + "/review/" + ti.ID
	ctx := browser(b, 1400, 1000, true)
	do(b, ctx, chromedp.Navigate(p.login(url)), chromedp.WaitVisible(".toolbar"))
	// the first files are open with their rows; the rest load when opened
	if n, got := eval[int](b, ctx, `document.querySelectorAll('td.code[data-line]').length`), eval[int](b, ctx, `document.querySelectorAll('details.file').length`); n < 1000 || got != files {
		b.Fatalf("%d lines of %d files on the page", n, got)
	}
	const measure = `document.addEventListener('keydown', (e) => {
		if (e.key !== 'j') return;
		const t0 = e.timeStamp;
		requestAnimationFrame(() => requestAnimationFrame(() => { window.__jms = performance.now() - t0; }));
	}, true); true`
	// interactive: the first frame after the page's script ran, and a task
	// after it (a key pressed then is handled at once)
	var load, ready, jms, server float64
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `
		document.addEventListener('DOMContentLoaded', () => requestAnimationFrame(() => setTimeout(() => { window.__ready = performance.now(); }, 0)));
`}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		do(b, ctx, chromedp.Reload(), chromedp.WaitVisible(".toolbar"))
		waitJS(b, ctx, "the first frame", `window.__ready !== undefined`)
		ready += eval[float64](b, ctx, `window.__ready`)
		load += eval[float64](b, ctx, `performance.getEntriesByType('navigation')[0].loadEventEnd`)
		// the server's answer: the request sent to the page's first byte
		// (the daemon renders the whole page before it answers)
		server += eval[float64](b, ctx, `(() => { const n = performance.getEntriesByType('navigation')[0]; return n.responseStart - n.requestStart; })()`)
		eval[bool](b, ctx, measure)
		before := eval[string](b, ctx, `(document.querySelector('details.file.focused') || {dataset: {}}).dataset.path || ''`)
		do(b, ctx, chromedp.KeyEvent("j"))
		waitJS(b, ctx, "the j frame", `window.__jms !== undefined`)
		if after := eval[string](b, ctx, `document.querySelector('details.file.focused').dataset.path`); after == before {
			b.Fatalf("j stayed on %s", after)
		}
		jms += eval[float64](b, ctx, `window.__jms`)
	}
	// opening a file sent without its rows: until its rows are on the page
	var openMS float64
	for i := 0; i < b.N; i++ {
		path := "pkg/f" + strconv.Itoa(files-1-i) + ".go"
		ms, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`(async () => {
			const d = document.querySelector('details.file[data-path="`+path+`"]');
			if (!d.dataset.lazy) throw new Error('not lazy');
			const t0 = performance.now();
			d.open = true;
			while (!d.querySelector('td.code[data-line]')) await new Promise((r) => setTimeout(r, 5));
			await new Promise((r) => requestAnimationFrame(r));
			return performance.now() - t0;
		})()`, chromedp.EvalAwaitPromise))
		if err != nil {
			b.Fatal(err)
		}
		openMS += ms
	}
	if n := eval[int](b, ctx, `document.querySelectorAll('details.file[data-path="pkg/f`+strconv.Itoa(files-1)+`.go"] td.code[data-line]').length`); n != 50 {
		b.Fatalf("the opened file shows %d lines, want 50", n)
	}
	// switching to split and back: the click until the frame after the
	// split tables are built
	var splitMS float64
	for i := 0; i < b.N; i++ {
		for _, to := range []string{"split", "unified"} {
			ms, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`(async () => {
				const btn = document.querySelector('.toolbar [data-mode="lazy:difflayout"] button[data-value="`+to+`"]');
				const t0 = performance.now();
				btn.click();
				await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
				if (document.querySelectorAll('details.file table.split-table').length === 0 && '`+to+`' === 'split') throw new Error('no split table');
				return performance.now() - t0;
			})()`, chromedp.EvalAwaitPromise))
			if err != nil {
				b.Fatal(err)
			}
			if to == "split" {
				splitMS += ms
			}
		}
	}
	b.ReportMetric(splitMS/float64(b.N), "split-ms")
	b.ReportMetric(openMS/float64(b.N), "open-file-ms")
	b.ReportMetric(ready/float64(b.N), "interactive-ms")
	b.ReportMetric(load/float64(b.N), "load-ms")
	b.ReportMetric(server/float64(b.N), "server-ms")
	b.ReportMetric(jms/float64(b.N), "j-ms")
}

// TestBrowserLazyFiles: past the page's budget, files come without their
// rows; opening one loads them (with script), and without script its link
// shows the page with that file in it.
func TestBrowserLazyFiles(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	ti := p.manyFiles("many", 40)
	p.post(ti.ID, api.PostCommentArgs{Body: "a note on <f39>", File: "pkg/f39.go", Line: 2, Side: "new", Intent: "comment"})
	url := p.info().BaseURL + "/review/" + ti.ID

	ctx := browser(t, 1400, 1000, true)
	do(t, ctx, chromedp.Navigate(p.login(url)), chromedp.WaitVisible(".toolbar"))
	if n := eval[int](t, ctx, `document.querySelectorAll('details.file[data-lazy]').length`); n != 10 {
		t.Fatalf("%d files sent without rows, want 10 (30 fit the budget)", n)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('details.file[data-path="pkg/f39.go"] td.code').length`); n != 0 {
		t.Fatalf("a lazy file came with %d rows", n)
	}
	openFile := func(path string) {
		do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('details.file[data-path="`+path+`"] > summary').click()`))
	}
	openFile("pkg/f39.go")
	waitJS(t, ctx, "f39's rows", `document.querySelectorAll('details.file[data-path="pkg/f39.go"] td.code[data-line]').length === 50`)
	if got := eval[string](t, ctx, `document.querySelector('details.file[data-path="pkg/f39.go"] tr.thread-row .body').textContent`); got != "a note on <f39>" {
		t.Errorf("the loaded file's thread: %q", got)
	}
	// j onto a lazy file loads it too
	openFile("pkg/f37.go")
	waitJS(t, ctx, "f37's rows", `document.querySelectorAll('details.file[data-path="pkg/f37.go"] td.code[data-line]').length === 50`)
	do(t, ctx, chromedp.KeyEvent("j"))
	waitJS(t, ctx, "f38 loaded by j", `document.querySelectorAll('details.file[data-path="pkg/f38.go"] td.code[data-line]').length === 50`)

	// split on a page of 1,650 rows: the files in view at once, a far one
	// when it comes near the view, each with its unified rows until then
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`),
		chromedp.Click(`.toolbar button[data-value="split"]`), chromedp.WaitVisible("table.split-table"))
	const far = `details.file[data-path="pkg/f29.go"]`
	if eval[bool](t, ctx, `!!document.querySelector('`+far+` table.split-table')`) || eval[int](t, ctx, `document.querySelectorAll('`+far+` td.code[data-line]').length`) != 50 {
		t.Fatalf("a file far below the view: split built at once, or its unified rows gone")
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('details.file[data-path="pkg/f0.go"] table.split-table').length`); n != 1 {
		t.Fatalf("the first file has %d split tables, want 1", n)
	}
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('`+far+`').scrollIntoView()`))
	waitJS(t, ctx, "f29 split once near the view", `!!document.querySelector('`+far+` table.split-table') && document.querySelectorAll('`+far+` table.diff-table:not(.split-table) tbody').length === 0`)
	do(t, ctx, chromedp.Click(`.toolbar button[data-value="unified"]`))
	if n := eval[int](t, ctx, `document.querySelectorAll('table.split-table').length`); n != 0 {
		t.Fatalf("back to unified, %d split tables left", n)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('details.file td.code[data-line]').length`); n != 33*50 {
		t.Fatalf("back to unified: %d lines on the page, want %d", n, 33*50)
	}

	noScript := browser(t, 1400, 1000, false)
	do(t, noScript, chromedp.Navigate(p.login(url)), chromedp.WaitVisible("nav.file-nav"))
	link := eval[string](t, noScript, `document.querySelector('details.file[data-path="pkg/f39.go"] .lazy-note a').href`)
	do(t, noScript, chromedp.Navigate(link), chromedp.WaitVisible("nav.file-nav"))
	if n := eval[int](t, noScript, `document.querySelectorAll('details.file[data-path="pkg/f39.go"][open] td.code[data-line]').length`); n != 50 {
		t.Fatalf("without script the link shows %d lines of f39", n)
	}
}

// manyFiles makes a task whose one commit adds n Go files of 50 lines each
// (pkg/f0.go ...), and waits until it is blocked.
func (p *project) manyFiles(code string, n int) api.TaskInfo {
	p.t.Helper()
	var prompt strings.Builder
	prompt.WriteString("many files\n")
	for f := 0; f < n; f++ {
		path := "pkg/f" + strconv.Itoa(f) + ".go"
		prompt.WriteString("@write " + path + " package pkg\\n\n")
		prompt.WriteString("@lines " + path + " 49 var v" + strconv.Itoa(f) + "_# = \"line #\"\n")
	}
	prompt.WriteString("@commit many\n@answer done")
	p.lazy(0, "task", "new", "--code", code, "-m", prompt.String())
	return p.waitStatus(code, "blocked")
}
