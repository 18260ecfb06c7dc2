package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// longLinesProject is a started daemon with one blocked task whose diff
// changes, adds and deletes lines far wider than any window.
func longLinesProject(t *testing.T) string {
	p := newProject(t, "process")
	long := func(tag string, n int) string { return "var " + tag + " = \"" + strings.Repeat(tag+" ", n) + "\"" }
	old := "package a\n\n" + long("kept", 60) + "\n" + long("gone", 80) + "\n" + long("same", 50) + "\nfunc f() {}\n"
	if err := os.WriteFile(filepath.Join(p.root, "a.go"), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, p.root, "add", "-A")
	runGit(t, p.root, "-c", "user.name=t", "-c", "user.email=t@l", "commit", "-q", "-m", "a.go")
	p.lazy(0, "daemon", "start")
	nu := `package a\n\n` + long("kept", 60) + `\n` + long("made", 120) + `\n` + long("same", 50) + `\n` + long("more", 90) + `\nfunc f() {}\n`
	p.lazy(0, "task", "new", "--code", "wide", "-m", "@write a.go "+nu+"\n@write "+strings.Repeat("deep/", 12)+"a_file_with_a_rather_long_name_for_a_phone.txt "+long("text", 70)+`\n`+"\n@commit long lines")
	ti := p.waitStatus("wide", "blocked")
	return p.login(p.info().BaseURL + "/review/" + ti.ID)
}

// TestBrowserSplitWidthsAndNarrowPages: in split the number columns are
// narrow, the two code panes share the width, and no code cell scrolls on its
// own; at 820 and 390 px the page never scrolls sideways, unified or split.
func TestBrowserSplitWidthsAndNarrowPages(t *testing.T) {
	url := longLinesProject(t)
	ctx := browser(t, 1280, 900, true)
	do(t, ctx, chromedp.Navigate(url), chromedp.WaitVisible(".toolbar"),
		chromedp.Click(`.toolbar button[data-value="split"]`), chromedp.WaitVisible("table.split-table"))
	for _, wrap := range []string{"scroll", "wrap"} {
		do(t, ctx, chromedp.Click(`.toolbar button[data-value="`+wrap+`"]`))
		nums := eval[[]float64](t, ctx, `Array.from(document.querySelector('table.split-table tr.ln').cells).filter(c => c.classList.contains('num')).map(c => c.getBoundingClientRect().width)`)
		if len(nums) != 2 {
			t.Fatalf("%s: number cells in a split row: %v, want 2", wrap, nums)
		}
		for _, w := range nums {
			if w >= 80 {
				t.Errorf("%s: a number column is %.0f px wide, want < 80 (widths %v)", wrap, w, nums)
			}
		}
		panes := eval[[]float64](t, ctx, `Array.from(document.querySelector('table.split-table tr.ln').cells).filter(c => c.classList.contains('code')).map(c => c.getBoundingClientRect().width)`)
		if len(panes) != 2 || panes[0] < 200 || panes[1] < 200 || panes[0]/panes[1] > 1.05 || panes[1]/panes[0] > 1.05 {
			t.Errorf("%s: code panes %v px: want two, within 5%% of each other", wrap, panes)
		}
		// a cell wider than its box with its own scrollbar
		scrolling := eval[int](t, ctx, `Array.from(document.querySelectorAll('table.split-table td.code')).filter(c => c.scrollWidth > c.clientWidth && /auto|scroll/.test(getComputedStyle(c).overflowX)).length`)
		if scrolling != 0 {
			t.Errorf("%s: %d code cells scroll on their own, want 0", wrap, scrolling)
		}
		if wide := eval[int](t, ctx, `document.querySelectorAll('table.split-table td.code').length`); wide < 6 {
			t.Errorf("%s: only %d split code cells: the diff did not render", wrap, wide)
		}
	}
	// without wrap the long lines are reachable: each pane has one scroller
	do(t, ctx, chromedp.Click(`.toolbar button[data-value="scroll"]`))
	bars := eval[int](t, ctx, `Array.from(document.querySelector('table.split-table').querySelectorAll('.pane-bar')).filter(b => b.scrollWidth > b.clientWidth).length`)
	if bars != 2 {
		t.Errorf("pane scrollers that scroll: %d, want 2 (old and new)", bars)
	} else {
		do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('table.split-table .pane-bar.pane-new').scrollLeft = 200`))
		waitJS(t, ctx, "the new pane's lines to move with its scroller", `(() => { const c = Array.from(document.querySelectorAll('table.split-table td.code:not(.pane-old)')).find(c => c.textContent.includes('made made')); return c.querySelector('.text').getBoundingClientRect().left < c.getBoundingClientRect().left - 100; })()`)
		if eval[bool](t, ctx, `(() => { const c = Array.from(document.querySelectorAll('table.split-table td.pane-old')).find(c => c.textContent.includes('gone gone')); return c.querySelector('.text').getBoundingClientRect().left < c.getBoundingClientRect().left; })()`) {
			t.Error("scrolling the new pane moved the old pane's lines too")
		}
	}
	screenshot(t, ctx, "review-split-long")
	for _, width := range []int{820, 390} {
		for _, lay := range []string{"unified", "split"} {
			do(t, ctx, chromedp.EmulateViewport(int64(width), 900),
				chromedp.Evaluate[chromedp.Void](`localStorage.setItem('lazy:difflayout', '`+lay+`'); localStorage.setItem('lazy:diffwrap', 'scroll')`),
				chromedp.Navigate(url), chromedp.WaitVisible("[data-diff] table.diff-table"))
			if width == 390 && lay == "unified" {
				screenshot(t, ctx, "review-narrow")
			}
			sw := eval[int](t, ctx, `document.scrollingElement.scrollWidth`)
			iw := eval[int](t, ctx, `innerWidth`)
			if sw > iw {
				wide := eval[string](t, ctx, `Array.from(document.querySelectorAll('body *')).filter(e => e.getBoundingClientRect().right > innerWidth + 1 && !e.closest('.scroller')).slice(0, 6).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right)).join('; ')`)
				t.Errorf("%d px, %s: the page is %d px wide, window %d (too wide: %s)", width, lay, sw, iw, wide)
			}
		}
	}
}
