package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserSuggestions: a range picked by dragging over the line
// numbers opens the range comment form; a ```suggestion in it shows as a
// small diff (the lines now → the suggested ones) under a Markdown
// message with its time; Apply commits it to the task branch as the
// reviewer of review.author; a second tab's Apply, made on the head before,
// is refused by the head rule. Line numbers are links to their lines.
func TestBrowserSuggestions(t *testing.T) {
	p := newProject(t, "process")
	cfgPath := filepath.Join(p.root, ".lazy", "config.toml")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, append(b, "[review]\nauthor = \"Rita Reviewer <rita@example.com>\"\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "rv", "-m", fourLines)
	ti := p.waitStatus("rv", "blocked")
	url := p.info().BaseURL + "/review/" + ti.ID
	ctx := browser(t, 1280, 900, true)
	do(t, ctx, chromedp.Navigate(p.login(url)), chromedp.WaitVisible(".toolbar"))

	// the new-side number of a line, its centre on the screen
	num := func(line string) (float64, float64) {
		t.Helper()
		xy := eval[[]float64](t, ctx, `(() => { const c = document.querySelector('td.code[data-side="new"][data-line="`+line+`"]');
			const n = c.closest('tr').cells[1]; const r = n.getBoundingClientRect();
			return [r.left + r.width / 2, r.top + r.height / 2]; })()`)
		return xy[0], xy[1]
	}

	// a number is a link to its line
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('td.code[data-side="new"][data-line="1"]').scrollIntoView({block: 'center'})`))
	x, y := num("3")
	do(t, ctx, chromedp.MouseEvent(chromedp.MouseMoved, x, y))
	waitJS(t, ctx, "line 3's number a link", `!!document.querySelector('a.line-link[href="#l-a.go-new-3"]')`)
	do(t, ctx, chromedp.MouseClickXY(x, y))
	waitJS(t, ctx, "the link followed", `location.hash === '#l-a.go-new-3'`)

	// a click on line 1's number, a shift-click on line 2's: the range form;
	// its Cancel lets the picked lines go
	x1, y1 := num("1")
	do(t, ctx, chromedp.MouseClickXY(x1, y1))
	xb, yb := num("2") // after the click: following its link may scroll
	do(t, ctx, chromedp.MouseClickXY(xb, yb, chromedp.ButtonModifiers(chromedp.ModifierShift)))
	waitJS(t, ctx, "the range form on line 2", `!!document.querySelector('tr.comment-row[data-comment-for="l-a.go-new-2"] textarea')`)
	if got := eval[string](t, ctx, `document.querySelector('tr.comment-row [name=start_line]').value + ' ' + document.querySelectorAll('td.code.range-pick').length`); got != "1 2" {
		t.Errorf("shift-click range: start_line and lines lit %q, want \"1 2\"", got)
	}
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll('tr.comment-row .buttons button[type=button]')].find((b) => b.textContent === 'Cancel').click()`))
	waitJS(t, ctx, "the form and the picked lines gone", `!document.querySelector('tr.comment-row') && !document.querySelector('td.range-pick')`)

	// one suggestion on line 1, posted the ordinary way
	do(t, ctx,
		chromedp.Evaluate[chromedp.Void](`document.querySelector('td.code[data-line="1"][data-side="new"] a.comment-link').click()`),
		chromedp.WaitVisible("tr.comment-row textarea"),
		chromedp.SendKeys("tr.comment-row textarea", "Capital **one**:\n```suggestion\nONE\n```"),
		chromedp.Click(`tr.comment-row button[value="comment"]`),
		chromedp.WaitNotPresent("tr.comment-row"))
	waitJS(t, ctx, "the first suggestion shown", `document.querySelectorAll('.suggestion').length === 1`)

	// drag from line 2's number to line 4's: the range form
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('td.code[data-side="new"][data-line="3"]').scrollIntoView({block: 'center'})`))
	x2, y2 := num("2")
	x4, y4 := num("4")
	do(t, ctx,
		chromedp.MouseEvent(chromedp.MousePressed, x2, y2, chromedp.ButtonLeft, chromedp.ClickCount(1)),
		chromedp.MouseEvent(chromedp.MouseMoved, (x2+x4)/2, (y2+y4)/2, chromedp.ButtonLeft),
		chromedp.MouseEvent(chromedp.MouseMoved, x4, y4, chromedp.ButtonLeft),
		chromedp.MouseEvent(chromedp.MouseReleased, x4, y4, chromedp.ButtonLeft, chromedp.ClickCount(1)))
	waitJS(t, ctx, "the range form on line 4", `!!document.querySelector('tr.comment-row[data-comment-for="l-a.go-new-4"] textarea')`)
	if got := eval[string](t, ctx, `document.querySelector('tr.comment-row [name=start_line]').value`); got != "2" {
		t.Fatalf("the range form starts at %q, want 2", got)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('td.code.range-pick').length`); n != 3 {
		t.Errorf("%d lines lit as picked, want 3", n)
	}
	do(t, ctx,
		chromedp.SendKeys("tr.comment-row textarea", "Shout these.\n```suggestion\nTWO\nTHREE\n```"),
		chromedp.Click(`tr.comment-row button[value="comment"]`),
		chromedp.WaitNotPresent("tr.comment-row"))
	waitJS(t, ctx, "the range suggestion shown", `document.querySelectorAll('.suggestion').length === 2`)
	rng := `[...document.querySelectorAll('.thread')].find((d) => d.querySelector('.range-tag'))`
	if got := eval[string](t, ctx, rng+`.querySelector('.range-tag').textContent`); got != "lines 2–4" {
		t.Errorf("range tag %q", got)
	}
	if got := eval[string](t, ctx, rng+`.querySelector('.suggestion-diff').innerText.replace(/\s+/g, ' ').trim()`); got != "− two − three − four + TWO + THREE" {
		t.Errorf("the suggestion's diff reads %q", got)
	}
	if eval[int](t, ctx, `document.querySelectorAll('.msg time.msg-time[datetime]').length`) != 2 {
		t.Error("every message shows its time")
	}
	if got := eval[string](t, ctx, `document.querySelector('.msg .body.md strong') ? document.querySelector('.msg .body.md strong').textContent : ''`); got != "one" {
		t.Errorf("Markdown not rendered: strong %q", got)
	}
	stale := eval[string](t, ctx, `document.querySelector('[data-suggestion] .apply-form').outerHTML`) // line 1's, at today's head
	screenshot(t, ctx, "review-suggestion")

	// apply the range's suggestion: a commit by the reviewer
	do(t, ctx, chromedp.Evaluate[chromedp.Void](rng+`.querySelector('.apply-form button').click()`))
	waitJS(t, ctx, "the applied notice", `!!document.querySelector('.notice') && document.querySelector('.notice').textContent.includes('Suggestion applied as commit')`)
	if got := runGit(t, p.root, "show", "lazy/rv:a.go"); got != "one\nTWO\nTHREE\n" {
		t.Fatalf("a.go on the task branch: %q", got)
	}
	if got := strings.TrimSpace(runGit(t, p.root, "log", "-1", "--format=%an <%ae>", "lazy/rv")); got != "Rita Reviewer <rita@example.com>" {
		t.Errorf("the commit's author %q, want the reviewer", got)
	}

	// line 1's Apply from a tab still showing the head before: refused
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`(() => { const d = document.createElement('div'); d.innerHTML = `+jsString(stale)+`;
		document.body.append(d); d.querySelector('form').submit(); })()`))
	waitJS(t, ctx, "the head rule's refusal", `!!document.querySelector('.notice') && document.querySelector('.notice').textContent.includes('the branch moved since you reviewed it')`)
	if got := runGit(t, p.root, "show", "lazy/rv:a.go"); got != "one\nTWO\nTHREE\n" {
		t.Fatalf("a refused suggestion changed a.go: %q", got)
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "`", "\\`", "$", `\$`)
	return "`" + r.Replace(s) + "`"
}
