package views

import (
	"bytes"
	"html/template"
	"regexp"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/util"
)

// A thread's messages are Markdown (GitHub's flavour: fenced code, tables,
// strikethrough, task lists, bare links) written by a reviewer or by the
// agent, so every one is untrusted text. goldmark renders it with raw HTML
// shown as text (rawAsText), then bluemonday keeps only the elements and attributes listed
// in messagePolicy: no script, style, event handler or iframe, links only
// to http, https and mailto (and relative ones), each rel="nofollow
// noopener" and a new tab when it leaves the page.

var markdown = goldmark.New(
	goldmark.WithExtensions(extension.GFM),
	goldmark.WithRendererOptions(html.WithHardWraps(), // a line break typed is a line break shown
		renderer.WithNodeRenderers(util.Prioritized(rawAsText{}, 100))),
)

// rawAsText shows raw HTML in a message as the text it is (goldmark
// would leave it out): a reviewer who writes <T> means those characters.
type rawAsText struct{}

func (rawAsText) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindRawHTML, func(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			segs := node.(*ast.RawHTML).Segments
			for i := range segs.Len() {
				s := segs.At(i)
				_, _ = w.WriteString(template.HTMLEscapeString(string(s.Value(source))))
			}
		}
		return ast.WalkSkipChildren, nil
	})
	reg.Register(ast.KindHTMLBlock, func(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
		n := node.(*ast.HTMLBlock)
		if entering {
			_, _ = w.WriteString("<p>")
			lines := n.Lines()
			for i := range lines.Len() {
				l := lines.At(i)
				_, _ = w.WriteString(template.HTMLEscapeString(string(l.Value(source))))
			}
			if n.HasClosure() {
				_, _ = w.WriteString(template.HTMLEscapeString(string(n.ClosureLine.Value(source))))
			}
			_, _ = w.WriteString("</p>\n")
		}
		return ast.WalkContinue, nil
	})
}

var messagePolicy = newMessagePolicy()

func newMessagePolicy() *bluemonday.Policy {
	p := bluemonday.NewPolicy()
	p.AllowStandardURLs() // parseable, relative, or http/https/mailto
	p.AllowElements("p", "br", "em", "strong", "del", "code", "pre", "blockquote",
		"ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
		"table", "thead", "tbody", "tr", "th", "td")
	p.AllowAttrs("href").OnElements("a")
	p.AllowAttrs("start").Matching(regexp.MustCompile(`^[0-9]{1,9}$`)).OnElements("ol")
	p.AllowAttrs("align").Matching(regexp.MustCompile(`^(left|right|center)$`)).OnElements("th", "td")
	p.AllowAttrs("class").Matching(regexp.MustCompile(`^language-[A-Za-z0-9_+.#-]{1,40}$`)).OnElements("code")
	// a task list's boxes, shown and never sent
	p.AllowAttrs("type").Matching(regexp.MustCompile(`^checkbox$`)).OnElements("input")
	p.AllowAttrs("checked", "disabled").Matching(regexp.MustCompile(`^$|^checked$|^disabled$`)).OnElements("input")
	p.RequireNoFollowOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true) // also adds rel="noopener"
	return p
}

// MessageHTML renders a message's Markdown as sanitized HTML. It never
// fails: text goldmark cannot render is shown escaped, as it was written.
func MessageHTML(text string) template.HTML {
	var b bytes.Buffer
	if err := markdown.Convert([]byte(text), &b); err != nil {
		return template.HTML("<p>" + template.HTMLEscapeString(text) + "</p>")
	}
	return template.HTML(bytes.TrimSpace(messagePolicy.SanitizeBytes(b.Bytes()))) // #nosec: sanitized by messagePolicy
}
