package main

import (
	"strings"
	"testing"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
)

// TestBrowserTasksTitleCounts (issue 29): the Tasks page's title counts the
// tasks that need the reviewer and follows a task that blocks without a
// reload; "Notify me" is opt-in: a task that blocks before the click shows
// no notification, one after it does, naming the task.
func TestBrowserTasksTitleCounts(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "one", "-m", "@answer done")
	p.waitStatus("one", "blocked")
	base := p.info().BaseURL

	ctx := browser(t, 1280, 900, true)
	if _, err := chromedp.Call(ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
		Permission: &cdpbrowser.PermissionDescriptor{Name: "notifications"}, Setting: cdpbrowser.PermissionSettingGranted, Origin: base}); err != nil {
		t.Fatalf("grant notifications: %v", err)
	}
	do(t, ctx, chromedp.Navigate(p.login(base+"/")), chromedp.WaitVisible("#tasks-live"))
	if title := eval[string](t, ctx, `document.title`); !strings.HasPrefix(title, "(1) Tasks · ") {
		t.Fatalf("title %q: want (1) Tasks · …", title)
	}
	// a spy on the Notification API, and a mark a reload would wipe
	eval[bool](t, ctx, `(function () {
		var N = window.Notification; window.__notes = [];
		var Spy = function (title, opts) { window.__notes.push(title); return new N(title, opts); };
		Object.defineProperty(Spy, 'permission', { get: function () { return N.permission; } });
		Spy.requestPermission = function () { return N.requestPermission(); };
		window.Notification = Spy; window.__stillHere = true; return true;
	})()`)
	waitJS(t, ctx, "the Notify me button", `!document.getElementById('notify-me').hidden && document.getElementById('notify-button').textContent === 'Notify me'`)

	// before the click: the title follows, no notification
	p.lazy(0, "task", "new", "--code", "pre", "-m", "@sleep 1s\n@answer done")
	p.waitStatus("pre", "blocked")
	waitJS(t, ctx, "the title to count two", `document.title.indexOf('(2) Tasks · ') === 0`)
	if n := eval[int](t, ctx, `window.__notes.length`); n != 0 {
		t.Fatalf("%d notifications before the reviewer asked for any", n)
	}

	do(t, ctx, chromedp.Click("#notify-button"))
	waitJS(t, ctx, "notifications on", `document.getElementById('notify-button').textContent === 'Stop notifying'`)
	p.lazy(0, "task", "new", "--code", "two", "-m", "@sleep 1s\n@answer done")
	p.waitStatus("two", "blocked")
	waitJS(t, ctx, "the title to count three", `document.title.indexOf('(3) Tasks · ') === 0`)
	waitJS(t, ctx, "a notification for two", `window.__notes.some(function (n) { return n.indexOf('lazy: two needs you') === 0; })`)
	if !eval[bool](t, ctx, `window.__stillHere === true`) {
		t.Error("the page was reloaded")
	}
	rows := eval[string](t, ctx, `Array.from(document.querySelectorAll('table.tasks code')).map(function (c) { return c.textContent; }).join(' ')`)
	if !strings.Contains(rows, "two") {
		t.Errorf("the table did not follow: %q", rows)
	}
	t.Logf("title %q, notifications %v", eval[string](t, ctx, `document.title`), eval[[]string](t, ctx, `window.__notes`))
}
