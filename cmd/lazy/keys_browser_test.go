package main

import (
	"lazy/api"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestBrowserKeysAndTabStops: the review page's keys (GitHub's and Gerrit's
// common set, listed by ?) each do what the list says, and Tab stops once
// per hunk, with Up and Down along its lines.
func TestBrowserKeysAndTabStops(t *testing.T) {
	p := parentAProject(t)
	p.lazy(0, "task", "new", "--code", "keys", "-m", renameTurn)
	ti := p.waitStatus("keys", "blocked")
	p.post(ti.ID, api.PostCommentArgs{Body: "a note", File: "a.go", Line: 3, Side: "new", Intent: "comment"})
	ctx := browser(t, 1400, 1000, true)
	do(t, ctx, chromedp.Navigate(p.login(p.info().BaseURL+"/review/"+ti.ID)), chromedp.WaitVisible(".toolbar"))
	press := func(keys string) { do(t, ctx, chromedp.KeyEvent(keys)) }
	// each key's effect is waited for (a handler may fetch or post first)
	check := func(what, js string) {
		t.Helper()
		waitJS(t, ctx, what, js)
	}

	// one tab stop per hunk; Up and Down move along the hunk's lines
	stops, hunks := eval[int](t, ctx, `document.querySelectorAll('a.comment-link:not([tabindex="-1"])').length`), eval[int](t, ctx, `Array.from(document.querySelectorAll('table.diff-table > tbody')).filter(b => b.querySelector('a.comment-link')).length`)
	if links := eval[int](t, ctx, `document.querySelectorAll('a.comment-link').length`); stops != hunks || links <= hunks {
		t.Errorf("%d tab stops among %d line links, want one per hunk (%d)", stops, links, hunks)
	}
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('table.diff-table > tbody a.comment-link[tabindex="0"]').focus()`))
	first := eval[string](t, ctx, `document.activeElement.closest('td').id`)
	press(kb.ArrowDown)
	second := eval[string](t, ctx, `document.activeElement.closest('td') ? document.activeElement.closest('td').id : ''`)
	if second == "" || second == first || !eval[bool](t, ctx, `document.activeElement.tabIndex === 0 && document.querySelectorAll('a.comment-link:not([tabindex="-1"])').length === `+strconv.Itoa(hunks)) {
		t.Errorf("ArrowDown from %s went to %q (the hunk's stop must move with it)", first, second)
	}
	press(kb.ArrowUp)
	check("ArrowUp", `document.activeElement.closest('td').id === '`+first+`'`)
	// Enter comments on the focused line; Esc closes the empty form
	press(kb.Enter)
	waitJS(t, ctx, "the comment form", `!!document.querySelector('tr.comment-row textarea')`)
	check("the form has focus", `document.activeElement.matches('tr.comment-row textarea')`)
	press(kb.Escape)
	check("Esc closed the empty form", `!document.querySelector('tr.comment-row')`)
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`))

	press("?")
	listed := eval[string](t, ctx, `Array.from(document.querySelectorAll('dialog.keys-help dt')).map(d => d.textContent).join(' | ')`)
	for _, k := range []string{"j / k", "n / p", "o", "c", "v or r", "e / E", "s", "w", "a", "u", "?", "Esc"} {
		if !strings.Contains(" | "+listed+" | ", " | "+k+" | ") && !strings.Contains(listed, k+",") {
			t.Errorf("? does not list %q: %s", k, listed)
		}
	}
	press(kb.Escape)
	check("Esc closed the list", `!document.querySelector('dialog[open]')`)
	// the page's own keys act when no control has the focus (a key typed
	// into a field or on a button is that control's): the dialog's Close
	// button may keep it for a moment after the dialog closed
	key := func(k string) {
		t.Helper()
		do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.activeElement && document.activeElement !== document.body && document.activeElement.blur()`))
		press(k)
	}

	key("s")
	check("s splits", `!!document.querySelector('table.split-table')`)
	key("s")
	check("s again unifies", `!document.querySelector('table.split-table')`)
	key("w")
	check("w wraps", `document.querySelector('[data-diff]').classList.contains('wrap-wrap')`)
	key("w")
	check("w again scrolls", `document.querySelector('[data-diff]').classList.contains('wrap-scroll')`)
	key("E")
	check("E collapses every thread", `document.querySelectorAll('details.thread').length > 0 && document.querySelectorAll('details.thread[open]').length === 0`)
	key("e")
	check("e expands every thread", `document.querySelectorAll('details.thread:not([open])').length === 0`)
	key("]")
	current := eval[string](t, ctx, `document.querySelector('details.file.focused').dataset.path`)
	key("o")
	check("o closes the current file", `!document.querySelector('details.file[data-path="`+current+`"]').open`)
	key("o")
	check("o opens it again", `document.querySelector('details.file[data-path="`+current+`"]').open`)
	key("r")
	check("r marks it viewed", `document.querySelector('details.file[data-path="`+current+`"] input.viewed-box').checked`)
	key("a")
	check("a writes to the agent", `document.activeElement.matches('.unblock-form textarea')`)
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`))
	key("u")
	waitJS(t, ctx, "the review queue", `location.pathname === '/review'`)
}
