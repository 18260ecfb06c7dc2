package main

import (
	"lazy/api"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// contrastJS lists every visible text on the page whose colour is too close
// to the background it is drawn on: each element holding text of its own,
// its colour composed over the backgrounds below it (up to the canvas),
// against the WCAG contrast ratio. It is an inventory, not a list of known
// places: a part added later with a light colour written as a literal fails
// here in dark mode (and the reverse).
const contrastJS = `(() => {
  const parse = (c) => { const m = c.match(/rgba?\(([^)]+)\)/); if (!m) return null; const p = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const over = (top, under) => { const a = top[3]; return [0, 1, 2].map((i) => top[i] * a + under[i] * (1 - a)).concat([1]); };
  const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); }; return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const canvas = parse(getComputedStyle(document.documentElement).colorScheme === 'dark' ? 'rgb(18,18,18)' : 'rgb(255,255,255)');
  const bgOf = (el) => {
    const stack = [];
    for (let e = el; e; e = e.parentElement) {
      const b = parse(getComputedStyle(e).backgroundColor);
      if (b && b[3] > 0) { stack.push(b); if (b[3] >= 1) break; }
    }
    let c = stack.length && stack[stack.length - 1][3] >= 1 ? stack.pop() : canvas;
    while (stack.length) c = over(stack.pop(), c);
    return c;
  };
  const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : '');
  const bad = [];
  for (const el of document.body.querySelectorAll('*')) {
    if (!Array.from(el.childNodes).some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
    if (!el.checkVisibility({ opacityProperty: true, visibilityProperty: true, contentVisibilityAuto: true })) continue;
    if (el.closest('[aria-hidden="true"], option')) continue;
    const cs = getComputedStyle(el);
    const bg = bgOf(el);
    const fg = over(parse(cs.color), bg);
    const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
    const ratio = (hi + 0.05) / (lo + 0.05);
    // WCAG AA: 4.5 for text, 3 for large (24 px, or 18.66 px bold);
    // a disabled control is exempt
    const px = parseFloat(cs.fontSize), bold = parseInt(cs.fontWeight, 10) >= 600;
    const need = px >= 24 || (bold && px >= 18.66) ? 3 : 4.5;
    if (el.closest(':disabled')) continue;
    if (ratio < need) bad.push(name(el.parentElement) + ' > ' + name(el) + ' "' + el.textContent.trim().slice(0, 30) + '" ' + ratio.toFixed(2) + ' (' + cs.color + ' on rgb(' + bg.slice(0, 3).map(Math.round).join(',') + '))');
  }
  return bad;
})()`

// TestBrowserDarkModeContrast: with the system preferring dark, the pages
// are dark (the canvas, the diff, highlighted code) and every text on them
// is readable against its background; the same inventory holds in light.
func TestBrowserDarkModeContrast(t *testing.T) {
	p := parentAProject(t)
	// highlighted code of several kinds: keywords, strings, comments, numbers
	code := `package a\n\n// f doubles ctx.\nfunc f(rctx int) int { return rctx * 2 }\n\nvar alpha = "one" + /* two */ "2"\nconst beta = 3.5\n`
	p.lazy(0, "task", "new", "--code", "dk", "-m", "dark\n@write a.go "+code+"\n@write b.md # b\\n\\n*notes*\\n\n@commit dark mode\n@answer Changed a.go and added b.md.")
	ti := p.waitStatus("dk", "blocked")
	p.post(ti.ID, api.PostCommentArgs{Body: "why double?", File: "a.go", Line: 4, Side: "new", Intent: "ask"})
	p.post(ti.ID, api.PostCommentArgs{Body: "keep the comment", File: "a.go", Line: 3, Side: "new", Intent: "comment"})
	p.post(ti.ID, api.PostCommentArgs{Body: "old alpha was fine", File: "a.go", Line: 5, Side: "old", Intent: "comment"})
	base := p.info().BaseURL
	pages := map[string]string{
		"review": base + "/review/" + ti.ID, "queue": base + "/", "tasks": base + "/tasks", "task": base + "/tasks/" + ti.ID,
	}
	for _, scheme := range []string{"dark", "light"} {
		ctx := browser(t, 1400, 1000, true)
		if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}}); err != nil {
			t.Fatalf("emulate prefers-color-scheme: %v", err)
		}
		do(t, ctx, chromedp.Navigate(p.login(pages["queue"])), chromedp.WaitVisible("body"))
		for _, name := range []string{"queue", "review", "tasks", "task"} {
			do(t, ctx, chromedp.Navigate(pages[name]), chromedp.WaitVisible("body"))
			if name == "review" {
				waitJS(t, ctx, "the ask's answer", `document.querySelectorAll('.msg.from-agent').length > 0`)
			}
			bg := eval[string](t, ctx, `getComputedStyle(document.body).backgroundColor`)
			if dark := bg == "rgb(13, 17, 23)"; dark != (scheme == "dark") {
				t.Errorf("%s, %s: the page's background is %s", scheme, name, bg)
			}
			layouts := []string{""}
			if name == "review" {
				// the diff high on the page: its first line within the
				// window's first 620 px (the process runner's banner above)
				if top := eval[float64](t, ctx, `document.querySelector('td.code[data-line]').getBoundingClientRect().top + window.scrollY`); top > 620 {
					t.Errorf("%s: the diff's first line is %.0f px down the page, want <= 620", scheme, top)
				}
				if n := eval[int](t, ctx, `document.querySelectorAll('td.code .text span').length`); n == 0 {
					t.Errorf("%s: no highlighted token on the review page", scheme)
				}
				layouts = []string{"unified", "split"}
			}
			for _, lay := range layouts {
				if lay != "" {
					do(t, ctx, chromedp.Click(`.toolbar button[data-value="`+lay+`"]`))
				}
				if bad := eval[[]string](t, ctx, contrastJS); len(bad) > 0 {
					t.Errorf("%s, %s %s: %d texts too faint for their background:\n  %s", scheme, name, lay, len(bad), strings.Join(bad, "\n  "))
				}
			}
			if scheme == "dark" {
				screenshot(t, ctx, name+"-dark")
			}
		}
	}
}
