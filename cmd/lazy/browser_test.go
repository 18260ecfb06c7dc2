package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"lazy/api"
	"lazy/gitx/gitxtest"
	"lazy/review"
)

// chromium finds Debian's chromium (make test installs it).
func chromium(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is missing on CI: make test installs it")
	}
	t.Skip("chromium is not installed (apt-get install chromium)")
	return ""
}

// browser starts headless Chromium with a fresh profile; script false runs
// the page with JavaScript disabled.
func browser(t testing.TB, width, height int, script bool) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(width, height))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	tctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	if err := chromedp.Do(tctx, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if !script {
		if _, err := chromedp.Call(tctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
			t.Fatalf("disable scripts: %v", err)
		}
	}
	return tctx
}

func do(t testing.TB, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// screenshot saves a full-page PNG under docs/screenshots for the README,
// only when asked (LAZY_SCREENSHOTS=1): make test leaves the tree clean.
func screenshot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv("LAZY_SCREENSHOTS") == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "..", "docs", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// eval runs a JavaScript expression and returns its value.
func eval[T any](t testing.TB, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// waitJS checks a JavaScript condition every 100 ms until it is true; an
// evaluation that fails because the page is navigating is tried again.
func waitJS(t testing.TB, ctx context.Context, what, js string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		if err == nil && ok {
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("waiting for %s: timed out (last error: %v)", what, last)
}

// reviewProject is a started daemon with one blocked task "rv" whose diff has
// a four-line file.
func reviewProject(t *testing.T) (*project, string) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "rv", "-m", fourLines)
	ti := p.waitStatus("rv", "blocked")
	return p, p.info().BaseURL + "/review/" + ti.ID
}

// TestBrowserAskAnsweredByPolling: the fallback where the browser has no
// EventSource (review.js follows the task's stream otherwise).
func TestBrowserAskAnsweredByPolling(t *testing.T) {
	p, url := reviewProject(t)
	ctx := browser(t, 1280, 900, true)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `delete window.EventSource;`}); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, chromedp.Navigate(p.login(url)), chromedp.WaitVisible(".toolbar"))
	if got := eval[string](t, ctx, `document.body.dataset.pollMs || ''`); got != "10000" && got != "" {
		t.Errorf("idle poll interval %q, want 10000", got)
	}
	// open the comment box on line 2 and ask
	do(t, ctx,
		chromedp.Evaluate[chromedp.Void](`document.querySelector('td.code[data-line="2"][data-side="new"] a.comment-link').click()`),
		chromedp.WaitVisible("tr.comment-row textarea"),
		chromedp.SendKeys("tr.comment-row textarea", "What is two for?\n@sleep 4s\n@answer Two is the second line."),
		chromedp.Click(`tr.comment-row button[value="ask"]`))
	waitJS(t, ctx, "the ask in flight", `document.querySelector('[data-sb="asks_in_flight"]').textContent === '1'`)
	waitJS(t, ctx, "fast polling while the ask is pending", `document.body.dataset.pollMs === '3000'`)
	waitJS(t, ctx, "the answer, without a reload", `!!document.querySelector('.msg.from-agent') && document.querySelector('.msg.from-agent .body').textContent.includes('Two is the second line.')`)
	waitJS(t, ctx, "slow polling again", `document.body.dataset.pollMs === '10000'`)
	if n := eval[int](t, ctx, `document.querySelectorAll('tr.thread-row').length`); n != 1 {
		t.Errorf("thread rows: %d", n)
	}
	// a queued comment alone never triggers the fast poll
	do(t, ctx,
		chromedp.Evaluate[chromedp.Void](`document.querySelector('td.code[data-line="3"] a.comment-link').click()`),
		chromedp.WaitVisible("tr.comment-row textarea"),
		chromedp.SendKeys("tr.comment-row textarea", "Please keep three."),
		chromedp.Click(`tr.comment-row button[value="comment"]`))
	waitJS(t, ctx, "the queued comment listed", `document.querySelector('.queued-count').textContent === '1'`)
	waitJS(t, ctx, "status bar queued count", `document.querySelector('[data-sb="queued"]').textContent === '1'`)
	if got := eval[string](t, ctx, `document.body.dataset.pollMs`); got != "10000" {
		t.Errorf("poll interval with only a queued comment: %s, want 10000", got)
	}
	screenshot(t, ctx, "review-unified")
	if !strings.Contains(eval[string](t, ctx, `document.querySelector('.queued-list').textContent`), "Please keep three.") {
		t.Error("the queued list lacks the comment")
	}
}

func TestBrowserCommentUnblockWithdraw(t *testing.T) {
	p, url := reviewProject(t)
	ctx := browser(t, 1280, 900, true)
	do(t, ctx, chromedp.Navigate(p.login(url)), chromedp.WaitVisible(".toolbar"))
	post := func(line, text string) {
		do(t, ctx,
			chromedp.Evaluate[chromedp.Void](`document.querySelector('td.code[data-line="`+line+`"][data-side="new"] a.comment-link').click()`),
			chromedp.WaitVisible("tr.comment-row textarea"),
			chromedp.SendKeys("tr.comment-row textarea", text),
			chromedp.Click(`tr.comment-row button[value="comment"]`),
			chromedp.WaitNotPresent("tr.comment-row"))
	}
	post("1", "Uppercase this.\n@write a.go ONE\\ntwo\\nthree\\nfour\\n\n@commit upper")
	post("4", "Never mind this one.")
	waitJS(t, ctx, "two queued", `document.querySelector('.queued-count').textContent === '2'`)
	// withdraw the second: a plain form POST, back on the page with a notice
	do(t, ctx, chromedp.Click(`//div[contains(@class,"msg")][.//div[contains(@class,"body")][contains(.,"Never mind")]]//button[text()="Withdraw"]`),
		chromedp.WaitVisible(".notice"))
	if n := eval[string](t, ctx, `document.querySelector('.notice').textContent`); !strings.Contains(n, "Withdrawn") {
		t.Errorf("notice: %q", n)
	}
	if eval[int](t, ctx, `document.querySelectorAll('del.body').length`) != 1 || eval[string](t, ctx, `document.querySelector('.queued-count').textContent`) != "1" {
		t.Error("the withdrawn comment must stay struck through and leave the queue")
	}
	if txt := eval[string](t, ctx, `document.querySelector('.msg-withdrawn .why-not') ? 'has' : ''`); txt != "" {
		t.Error("a withdrawn message offers an explanation instead of nothing")
	}
	// unblock from the lower action block: lands on the task page
	do(t, ctx,
		chromedp.SendKeys(`(//form[contains(@class,"unblock-form")])[2]//textarea`, "Thanks, go ahead."),
		chromedp.Submit(`(//form[contains(@class,"unblock-form")])[2]`),
		chromedp.WaitVisible(".turns"))
	loc := eval[string](t, ctx, `location.pathname`)
	if !strings.HasPrefix(loc, "/tasks/") || !strings.Contains(eval[string](t, ctx, `document.querySelector('.notice').textContent`), "Unblocked") {
		t.Fatalf("after unblock: %s", loc)
	}
	p.waitStatus("rv", "blocked")
	if out := p.lazy(0, "task", "show", "rv"); !strings.Contains(out, "work turn 2 (unblock) done") {
		t.Errorf("task:\n%s", out)
	}
	if gitOut := runGit(t, p.root, "show", "lazy/rv:a.go"); !strings.HasPrefix(gitOut, "ONE") {
		t.Errorf("the queued comment did not reach the work turn: %q", gitOut)
	}
}

func runGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v %s", args, err, out)
	}
	return string(out)
}

func TestBrowserRefusedAcceptKeepsInput(t *testing.T) {
	p := newProject(t, "process")
	cfgPath := filepath.Join(p.root, ".lazy", "config.toml")
	b, _ := os.ReadFile(cfgPath)
	if err := os.WriteFile(cfgPath, append(b, []byte("\n[protect]\npaths = [\".github/**\"]\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	set := p.cmd("passphrase", "set")
	set.Stdin = strings.NewReader("correct horse battery\n")
	if out, err := set.CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "gh", "-m", "@write .github/ci.yml on: push\n@commit ci")
	ti := p.waitStatus("gh", "blocked")
	ctx := browser(t, 1280, 900, true)
	do(t, ctx, chromedp.Navigate(p.login(p.info().BaseURL+"/review/"+ti.ID)), chromedp.WaitVisible(".toolbar"),
		chromedp.SendKeys(`(//form[contains(@class,"unblock-form")])[1]//textarea`, "my unblock draft"),
		chromedp.Click(`(//button[contains(@class,"accept-open")])[1]`),
		chromedp.WaitVisible(`dialog[open] .accept-form textarea`),
		chromedp.SendKeys(`dialog[open] .accept-form textarea`, "CI change reviewed"),
		chromedp.Click(`dialog[open] .accept-form button[type=submit]`),
		chromedp.WaitVisible(".refusal"))
	if m := eval[string](t, ctx, `document.querySelector('.refusal-message').textContent`); !strings.Contains(m, "protected files: .github/ci.yml") {
		t.Fatalf("refusal message: %q", m)
	}
	if c := eval[string](t, ctx, `document.querySelector('.remedy .command').textContent`); c != "lazy accept gh --reason 'CI change reviewed' --approve-file .github/ci.yml" {
		t.Errorf("command: %q", c)
	}
	// the typed text is kept: in the boxes and in the passphrase form's hidden fields
	if v := eval[string](t, ctx, `document.querySelector('.passphrase-form [name=draft_reason]').value + '|' + document.querySelector('.passphrase-form [name=draft_feedback]').value`); v != "CI change reviewed|my unblock draft" {
		t.Errorf("drafts in the passphrase form: %q", v)
	}
	if v := eval[string](t, ctx, `document.querySelector('.unblock-form textarea').value`); v != "my unblock draft" {
		t.Errorf("unblock draft: %q", v)
	}
	screenshot(t, ctx, "remedy-panel")
	// a wrong passphrase: a retryable error, text kept, the attempt never echoed
	do(t, ctx, chromedp.SendKeys(".passphrase-form input[type=password]", "wrong horse battery"), chromedp.Submit(".passphrase-form"))
	waitJS(t, ctx, "the page of the wrong passphrase", `!!document.querySelector('.refusal-message') && document.querySelector('.refusal-message').textContent.includes('wrong approval passphrase')`)
	html := eval[string](t, ctx, `document.documentElement.outerHTML`)
	p.keep("wrong-passphrase.html", html)
	if !strings.Contains(html, "wrong approval passphrase") || strings.Contains(html, "wrong horse") ||
		eval[string](t, ctx, `document.querySelector('.passphrase-form [name=draft_reason]').value`) != "CI change reviewed" {
		t.Fatal("wrong passphrase: the form must come back with the error and the drafts, without the attempt")
	}
	do(t, ctx, chromedp.SendKeys(".passphrase-form input[type=password]", "correct horse battery"), chromedp.Submit(".passphrase-form"), chromedp.WaitVisible(".turns"))
	if !strings.Contains(eval[string](t, ctx, `document.querySelector('.notice').textContent`), "Accepted") || p.show("gh").Status != "accepted" {
		t.Fatal("the right passphrase must accept")
	}
	b, _ = os.ReadFile(p.paths.Log)
	if strings.Contains(string(b), "horse") {
		t.Error("a passphrase reached the daemon log")
	}
}

func TestBrowserLayoutToggleAndNarrowFallback(t *testing.T) {
	p := newProject(t, "process")
	if err := os.WriteFile(filepath.Join(p.root, "a.go"), []byte("package a\n\nfunc one() {}\nfunc two() {}\nfunc three() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, p.root, "add", "-A")
	runGit(t, p.root, "-c", "user.name=t", "-c", "user.email=t@l", "commit", "-q", "-m", "a.go")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "rv", "-m", `@write a.go package a\n\nfunc one() int { return 1 }\nfunc two() int { return 2 }\nfunc three() {}\nfunc four() {}\n`+"\n@commit rework")
	ti := p.waitStatus("rv", "blocked")
	url := p.info().BaseURL + "/review/" + ti.ID
	ctx := browser(t, 1280, 900, true)
	do(t, ctx, chromedp.Navigate(p.login(url)), chromedp.WaitVisible(".toolbar"),
		chromedp.Evaluate[chromedp.Void](`window.__layouts = []; document.addEventListener('rv:layout', e => window.__layouts.push(e.detail.layout))`),
		chromedp.Click(`.toolbar button[data-value="split"]`),
		chromedp.WaitVisible("table.split-table"))
	if got := eval[string](t, ctx, `localStorage.getItem('lazy:difflayout')`); got != "split" {
		t.Errorf("stored layout: %q", got)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('[id="l-a.go-new-3"]').length`); n != 1 {
		t.Errorf("the anchor of line 2 is in the document %d times while split, want once", n)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('table.diff-table:not(.split-table) tbody').length`); n != 0 {
		t.Error("the unified body must be detached while split shows")
	}
	if cols := eval[int](t, ctx, `document.querySelector('table.split-table tr.ln').cells.length`); cols != 4 {
		t.Errorf("split row cells: %d, want 4", cols)
	}
	// old lines 3-4 sit beside new lines 3-4; the added line 6 has blank filler on the left
	pairs := eval[string](t, ctx, `Array.from(document.querySelectorAll('table.split-table tr.ln')).map(r => (r.cells[0].textContent||'_')+':'+(r.cells[2].textContent||'_')).join(' ')`)
	if pairs != "1:1 2:2 3:3 4:4 5:5 _:6" {
		t.Errorf("split pairs (old:new): %q", pairs)
	}
	if got := eval[string](t, ctx, `document.getElementById('l-a.go-old-3').textContent`); !strings.Contains(got, "func one() {}") {
		t.Errorf("the old side's anchor in split: %q", got)
	}
	if got := eval[string](t, ctx, `window.__layouts.join(',')`); got != "split" {
		t.Errorf("rv:layout events: %q", got)
	}
	screenshot(t, ctx, "review-split")
	// a reload keeps the choice; long lines wrap on request
	do(t, ctx, chromedp.Navigate(p.login(url)), chromedp.WaitVisible("table.split-table"), chromedp.Click(`.toolbar button[data-value="wrap"]`))
	if !eval[bool](t, ctx, `document.querySelector('[data-diff]').classList.contains('wrap-wrap')`) {
		t.Error("wrap did not apply")
	}
	// below 900 px: unified, Split disabled, the stored preference kept
	do(t, ctx, chromedp.EmulateViewport(800, 900), chromedp.WaitNotPresent("table.split-table"))
	if !eval[bool](t, ctx, `document.querySelector('.toolbar button[data-value="split"]').disabled`) || eval[string](t, ctx, `localStorage.getItem('lazy:difflayout')`) != "split" {
		t.Error("narrow: want Split disabled and the stored preference kept")
	}
	do(t, ctx, chromedp.EmulateViewport(1280, 900), chromedp.WaitVisible("table.split-table"))
	// storage failing: the page still works, the choice lasts the page
	ctx2 := browser(t, 1280, 900, true)
	do(t, ctx2, chromedp.Navigate(p.login(url)), chromedp.WaitVisible(".toolbar"),
		chromedp.Evaluate[chromedp.Void](`void Object.defineProperty(window, 'localStorage', {get() { throw new Error('denied'); }})`),
		chromedp.Click(`.toolbar button[data-value="split"]`), chromedp.WaitVisible("table.split-table"))
}

func TestBrowserNoScriptLoop(t *testing.T) {
	p, url := reviewProject(t)
	ctx := browser(t, 1280, 900, false)
	do(t, ctx, chromedp.Navigate(p.login(p.info().BaseURL+"/review")), chromedp.WaitVisible("table.queue"))
	screenshot(t, ctx, "queue")
	do(t, ctx, chromedp.Navigate(p.login(url)), chromedp.WaitVisible("table.diff-table"))
	if !eval[bool](t, ctx, `document.querySelector('.toolbar').hidden`) {
		t.Error("the toolbar must stay hidden without script")
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('tr.ln').length`); n != 4 {
		t.Errorf("diff rows without script: %d", n)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('.actions').length`); n != 2 || eval[int](t, ctx, `document.querySelectorAll('.actions [id]').length`) != 0 {
		t.Error("actions render twice and carry no ids")
	}
	// the line link opens a server-rendered comment form
	do(t, ctx, chromedp.Click(`td.code[data-line="2"] a.comment-link`), chromedp.WaitVisible("tr.comment-row textarea"),
		chromedp.SendKeys("tr.comment-row textarea", "No-script question\n@answer It works without script."),
		chromedp.Click(`tr.comment-row button[value="ask"]`), chromedp.WaitVisible(".notice"))
	if !strings.Contains(eval[string](t, ctx, `document.querySelector('.notice').textContent`), "Question sent") {
		t.Error("notice after a no-script ask")
	}
	p.waitThreads("rv", "the no-script ask answered", func(pl review.Payload) bool {
		return pl.Pending == 0 && len(pl.Threads) == 1 && len(pl.Threads[0].Messages) == 2
	})
	do(t, ctx, chromedp.Navigate(p.login(url)), chromedp.WaitVisible(".msg.from-agent"))
	// the parent moves on with a change of its own to a.go: accept refused
	// (it would conflict), sync without script; the task is then in conflict
	gitxCommitOnMain(t, p)
	do(t, ctx, chromedp.Navigate(p.login(url)), chromedp.WaitVisible(".accept-form"),
		chromedp.SendKeys(`(//form[contains(@class,"accept-form")])[2]//textarea`, "ship"),
		chromedp.Submit(`(//form[contains(@class,"accept-form")])[2]`), chromedp.WaitVisible(".refusal .sync-form"))
	do(t, ctx, chromedp.Submit(".sync-form"))
	waitJS(t, ctx, "the page after the sync", `!!document.querySelector('.notice') && document.querySelector('.notice').textContent.includes('Sync')`)
	if !strings.Contains(eval[string](t, ctx, `document.querySelector('.notice').textContent`), "unblock") ||
		eval[string](t, ctx, `document.querySelector('.accept-form textarea').value`) != "ship" {
		t.Error("sync without script must report and keep the typed reason")
	}
	p.waitStatus("rv", "conflict")
	// a queued comment: accept refused until it is delivered, which the
	// refusal offers in-page; unblock without script
	do(t, ctx, chromedp.Navigate(p.login(url)), chromedp.WaitVisible("table.diff-table"),
		chromedp.Click(`td.code[data-line="3"] a.comment-link`), chromedp.WaitVisible("tr.comment-row textarea"),
		chromedp.SendKeys("tr.comment-row textarea", "No-script comment"), chromedp.Click(`tr.comment-row button[value="comment"]`), chromedp.WaitVisible(".notice"))
	if eval[string](t, ctx, `document.querySelector('.queued-count').textContent`) != "1" {
		t.Error("queued count after a no-script comment")
	}
	do(t, ctx, chromedp.Navigate(p.login(url)), chromedp.WaitVisible(".accept-form"),
		chromedp.SendKeys(`(//form[contains(@class,"accept-form")])[2]//textarea`, "ship"),
		chromedp.Submit(`(//form[contains(@class,"accept-form")])[2]`), chromedp.WaitVisible(".refusal .unblock-queued-form"))
	do(t, ctx, chromedp.Submit(".unblock-queued-form"), chromedp.WaitVisible(".turns"))
	p.waitStatus("rv", "blocked")
}

func gitxCommitOnMain(t *testing.T, p *project) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(p.root, "a.go"), []byte("moved on\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, p.root, "add", "-A")
	runGit(t, p.root, "-c", "user.name=t", "-c", "user.email=t@l", "commit", "-q", "-m", "parent moves")
}

// TestBrowserEscapesEverything: a <script> and an onerror image in a review
// comment, an agent answer and a diff line render as text and never run.
func TestBrowserEscapesEverything(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	payload := `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">`
	p.lazy(0, "task", "new", "--code", "x", "-m", "@write evil.html "+payload+"\n@commit evil")
	ti := p.waitStatus("x", "blocked")
	a := p.post("x", api.PostCommentArgs{Body: payload + "\n@answer " + payload, File: "evil.html", Line: 1, Side: "new", Intent: "ask"})
	p.waitThreads("x", "answer", func(pl review.Payload) bool { return find(pl, a.ID).AskState == review.AskAnswered })
	ctx := browser(t, 1280, 900, true)
	do(t, ctx, chromedp.Navigate(p.login(p.info().BaseURL+"/review/"+ti.ID)), chromedp.WaitVisible(".msg.from-agent"))
	if v := eval[int](t, ctx, `window.__pwned || 0`); v != 0 {
		t.Fatalf("injected script ran (%d)", v)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('main script, main img').length`); n != 0 {
		t.Errorf("%d injected elements in the page", n)
	}
	for _, sel := range []string{`td.code[data-line="1"] .text`, `.msg .body`, `.msg.from-agent .body`} {
		if got := eval[string](t, ctx, `document.querySelector('`+sel+`').textContent`); !strings.Contains(got, "<script>window.__pwned=1</script>") {
			t.Errorf("%s shows %q, want the literal text", sel, got)
		}
	}
}

// TestBrowserOnlyTheReviewerDecides: without the login the dashboard is a
// 401 naming lazy open; the tokened address logs the browser in with an
// HttpOnly SameSite=Strict cookie. Then a page on another loopback origin
// (same site: only the port differs) submits forms and fetches to accept,
// unblock, comment and ask on the logged-in dashboard: every one is refused
// and nothing changes.
func TestBrowserOnlyTheReviewerDecides(t *testing.T) {
	p, url := reviewProject(t)
	ti := p.show("rv")
	ctx := browser(t, 1280, 900, true)
	do(t, ctx, chromedp.Navigate(url), chromedp.WaitVisible("main"))
	if body := eval[string](t, ctx, `document.body.innerText`); !strings.Contains(body, "lazy open") {
		t.Fatalf("without the login: %s", body)
	}
	do(t, ctx, chromedp.Navigate(p.login(url)), chromedp.WaitVisible(".toolbar"))
	if got := eval[string](t, ctx, `location.search`); strings.Contains(got, "token=") {
		t.Errorf("the token stays in the address: %s", got)
	}
	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{p.info().BaseURL}})
	if err != nil {
		t.Fatal(err)
	}
	var session *network.Cookie
	for _, c := range cookies.Cookies {
		if strings.HasPrefix(c.Name, "lazy_session_") {
			session = c
		}
	}
	if session == nil || !session.HTTPOnly || session.SameSite != network.CookieSameSiteStrict {
		t.Fatalf("session cookie: %+v", session)
	}
	if got := eval[string](t, ctx, `document.cookie`); got != "" {
		t.Errorf("the page's script can read the cookie: %q", got)
	}

	// the other origin: every way a page can send a write
	base := p.info().BaseURL
	id := ti.ID
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		form := func(action, fields string) string {
			return `<form method="post" action="` + base + action + `">` + fields + `</form>`
		}
		switch r.URL.Path {
		case "/accept":
			io.WriteString(w, form("/review/"+id+"/accept", `<input name="reason" value="evil">`)+`<script>document.forms[0].submit()</script>`)
		case "/unblock":
			io.WriteString(w, form("/review/"+id+"/unblock", `<input name="feedback" value="@write pwned.txt x">`)+`<script>document.forms[0].submit()</script>`)
		case "/comment":
			io.WriteString(w, form("/review/"+id+"/comment", `<input name="body" value="evil comment"><input name="file" value="a.go"><input name="line" value="1"><input name="side" value="new"><input name="intent" value="comment">`)+`<script>document.forms[0].submit()</script>`)
		default: // fetches: a no-cors JSON ask and a form-encoded comment
			io.WriteString(w, `<script>
window.done = 0;
const ask = fetch('`+base+`/review/`+id+`/comment', {method: 'POST', mode: 'no-cors', credentials: 'include', headers: {'Content-Type': 'text/plain'}, body: JSON.stringify({body: 'evil ask', file: 'a.go', line: 1, side: 'new', intent: 'ask'})});
const com = fetch('`+base+`/review/`+id+`/comment', {method: 'POST', mode: 'no-cors', credentials: 'include', body: new URLSearchParams({body: 'evil fetch', file: 'a.go', line: '1', side: 'new', intent: 'comment'})});
const acc = fetch('`+base+`/review/`+id+`/accept', {method: 'POST', mode: 'no-cors', credentials: 'include', body: new URLSearchParams({reason: 'evil'})});
Promise.allSettled([ask, com, acc]).then(() => { window.done = 1 });
</script>`)
		}
	}))
	defer evil.Close()
	for _, path := range []string{"/accept", "/unblock", "/comment"} {
		do(t, ctx, chromedp.Navigate(evil.URL+path))
		waitJS(t, ctx, "the cross-origin form post to "+path+" to land", `location.href.startsWith('`+base+`')`)
		if body := eval[string](t, ctx, `document.body.innerText`); !strings.Contains(body, "refused") {
			t.Errorf("%s from another origin: %s", path, body)
		}
	}
	do(t, ctx, chromedp.Navigate(evil.URL+"/fetch"))
	waitJS(t, ctx, "the cross-origin fetches", `window.done === 1`)

	pl := p.threads("rv")
	if len(pl.Threads) != 0 || pl.PendingDelivery != 0 {
		t.Errorf("a cross-origin write reached the store: %+v", pl)
	}
	after := p.show("rv")
	if after.Status != "blocked" || after.Turns != ti.Turns {
		t.Errorf("a cross-origin unblock or accept changed the task: %+v", after)
	}
	if out := gitxtest.Git(t, p.root, "log", "--oneline", "main"); strings.Contains(out, "Merge") || strings.Contains(out, "write a") {
		t.Errorf("main moved: %s", out)
	}
	// and the reviewer's own page still works with the same cookie
	do(t, ctx, chromedp.Navigate(url), chromedp.WaitVisible(".toolbar"))
}
