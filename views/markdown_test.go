package views

import (
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// unsafeHTML names what in rendered message HTML could run or load
// something: a script or other active element, an on* handler, a style, a
// link or source whose scheme is not http, https or mailto (javascript:,
// vbscript:, data:, however spelled), a raw "<script" anywhere. "" when the
// HTML is safe.
func unsafeHTML(out string) string {
	if strings.Contains(strings.ToLower(out), "<script") {
		return "a <script"
	}
	z := html.NewTokenizer(strings.NewReader(out))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return ""
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		tok := z.Token()
		switch tok.Data {
		case "script", "style", "iframe", "object", "embed", "img", "svg", "math", "form", "base", "link", "meta", "frame", "video", "audio", "textarea", "button", "select":
			return "element <" + tok.Data + ">"
		}
		for _, a := range tok.Attr {
			k := strings.ToLower(a.Key)
			if strings.HasPrefix(k, "on") || k == "style" || k == "srcdoc" || k == "formaction" || k == "src" {
				return "attribute " + a.Key + " on <" + tok.Data + ">"
			}
			if k == "href" {
				v := strings.Map(func(r rune) rune {
					if r <= ' ' || r == 0x7f {
						return -1
					}
					return r
				}, strings.ToLower(a.Val))
				if i := strings.IndexByte(v, ':'); i >= 0 && !strings.ContainsAny(v[:i], "/?#") {
					if s := v[:i]; s != "http" && s != "https" && s != "mailto" {
						return "link scheme " + s + ":"
					}
				}
			}
			if k == "target" && !strings.Contains(tokAttr(tok, "rel"), "noopener") {
				return "a new-tab link without rel=noopener"
			}
		}
		if tok.Data == "a" && tokAttr(tok, "href") != "" && !strings.Contains(tokAttr(tok, "rel"), "nofollow") {
			return "a link without rel=nofollow"
		}
	}
}

func tokAttr(t html.Token, key string) string {
	for _, a := range t.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// xssCorpus is the usual ways into a Markdown renderer's HTML.
var xssCorpus = []string{
	`<script>alert(1)</script>`,
	`<SCRIPT SRC=//x.example/x.js></SCRIPT>`,
	`<img src=x onerror=alert(1)>`,
	`<svg/onload=alert(1)>`,
	`<a href="javascript:alert(1)">x</a>`,
	`[x](javascript:alert(1))`,
	`[x](JaVaScRiPt:alert(1))`,
	`[x](java&#x09;script:alert(1))`,
	"[x](java\tscript:alert(1))",
	`[x](&#106;avascript:alert(1))`,
	`[x](vbscript:msgbox(1))`,
	`[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)`,
	`![x](javascript:alert(1))`,
	`![x](data:image/svg+xml,<svg onload=alert(1)>)`,
	`<https://example.com/" onmouseover="alert(1)>`,
	`[x](https://example.com/" onmouseover="alert(1))`,
	`[x]: javascript:alert(1)` + "\n\n[x]",
	"<div>\n<style>body{display:none}</style>\n</div>",
	`<iframe src="https://example.com"></iframe>`,
	`<a href="https://x" onclick="alert(1)">y</a>`,
	"```html\n<script>alert(1)</script>\n```",
	"`<img src=x onerror=alert(1)>`",
	`<details open ontoggle=alert(1)>`,
	`<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>`,
	`<<script>script>alert(1)<</script>/script>`,
	"| a | b |\n|---|---|\n| <img src=x onerror=alert(1)> | [x](javascript:alert(1)) |",
	`<form action="javascript:alert(1)"><button>x</button></form>`,
	`<!--><script>alert(1)</script>-->`,
}

func TestMessageHTMLCorpus(t *testing.T) {
	for _, in := range xssCorpus {
		out := string(MessageHTML(in))
		if why := unsafeHTML(out); why != "" {
			t.Errorf("%q rendered %s:\n%s", in, why, out)
		}
	}
}

// TestMessageHTMLMarkdown: what a reviewer writes shows as GitHub shows it.
func TestMessageHTMLMarkdown(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"**bold** and `code`", "<p><strong>bold</strong> and <code>code</code></p>"},
		{"```go\nfunc A() {}\n```", `<pre><code class="language-go">func A() {}` + "\n</code></pre>"},
		{"[docs](https://example.com/x)", `<a href="https://example.com/x" rel="nofollow noopener" target="_blank">docs</a>`},
		{"see https://example.com", `<a href="https://example.com" rel="nofollow noopener" target="_blank">https://example.com</a>`},
		{"[top](#l-a.go-new-3)", `<a href="#l-a.go-new-3" rel="nofollow">top</a>`},
		{"- [x] done", `<input checked="" disabled="" type="checkbox"> done`},
		{"a <T> b", "<p>a &lt;T&gt; b</p>"},
		{"line one\nline two", "line one<br>\nline two"},
		{"[x](javascript:alert(1))", "<p>x</p>"},
	} {
		got := string(MessageHTML(tc.in))
		if !strings.Contains(got, tc.want) {
			t.Errorf("%q:\ngot  %s\nwant it to hold %s", tc.in, got, tc.want)
		}
	}
}

// FuzzMessageHTML: whatever a message holds, its rendered HTML runs and
// loads nothing (no <script, no on* attribute, no javascript: or data:
// link), and rendering never panics.
func FuzzMessageHTML(f *testing.F) {
	for _, s := range xssCorpus {
		f.Add(s)
	}
	f.Add("**b** _i_ ~~s~~ `c`\n\n> q\n\n1. a\n2. b\n\n```suggestion\nx\n```")
	f.Fuzz(func(t *testing.T, in string) {
		out := string(MessageHTML(in))
		if why := unsafeHTML(out); why != "" {
			t.Fatalf("%q rendered %s:\n%s", in, why, out)
		}
	})
}
