// Package views renders the dashboard: html/template pages parsed once from
// the embedded files, each page from a typed view struct, into a buffer before
// anything is written. It decides nothing; handlers give it what to show.
package views

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"time"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Static is the embedded /assets tree.
func Static() fs.FS {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err) // the embed path is fixed at build time
	}
	return sub
}

// Views holds the parsed pages.
type Views struct {
	pages    map[string]*template.Template
	partials *template.Template
}

var funcs = template.FuncMap{
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		d := time.Since(t).Round(time.Second)
		switch {
		case d < time.Minute:
			return fmt.Sprintf("%ds ago", int(d.Seconds()))
		case d < time.Hour:
			return fmt.Sprintf("%dm ago", int(d.Minutes()))
		case d < 48*time.Hour:
			return fmt.Sprintf("%dh ago", int(d.Hours()))
		}
		return t.Format("2006-01-02")
	},
	"rfc3339": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"absTime": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"anchor": func(taskID, file string, line int, side, csrf string) CommentAnchor {
		return CommentAnchor{TaskID: taskID, File: file, Line: line, Side: side, CSRF: csrf}
	},
}

// New parses every page with the shared layout.
func New() (*Views, error) {
	v := &Views{pages: map[string]*template.Template{}}
	partials, err := template.New("partials").Funcs(funcs).ParseFS(templateFS, "templates/_*.html")
	if err != nil {
		return nil, fmt.Errorf("parse partials: %w", err)
	}
	v.partials = partials
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		base := n[len("templates/"):]
		if base == "layout.html" || base[0] == '_' {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/_*.html", n)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", n, err)
		}
		v.pages[base[:len(base)-len(".html")]] = t
	}
	return v, nil
}

// CommentAnchor is what a comment form posts with.
type CommentAnchor struct {
	TaskID, File, Side string
	Line               int
	CSRF               string
	// Focus: the form takes the focus when the page loads (it was opened
	// by its link, without script)
	Focus bool
	// Body is the text already typed (a refused comment, put back)
	Body string
}

// KeptField is text a person typed into a form, shown back.
type KeptField struct{ Label, Value string }

// Page is what every page shares.
type Page struct {
	Title   string
	Version string
	// Notice is what the last form did; Alert marks it a refusal
	Notice string
	Alert  bool
	// Kept is text the reviewer typed that no form on the page takes back:
	// shown to copy, never lost
	Kept []KeptField
	// Project is the base name of the project root, in every page's title
	// and header (several daemons' tabs told apart); Root its full path.
	Project, Root string
	// Warnings are the daemon's standing warnings (agents unsandboxed),
	// shown as a banner on every page.
	Warnings []string
	// Config says where the project config in force came from.
	Config string
	// CSRF is the session's form token, carried by every form (and sent by
	// the page's script as X-Lazy-CSRF); "" when not logged in by cookie.
	CSRF string
	// Script names a script of /assets to load, if the page has one.
	Script string
	// BodyData are data attributes for <body> (the island reads them).
	TaskID string
	// TaskEnded marks a page of an ended task: nothing on it changes any more.
	TaskEnded bool
}

// Render renders page into w, fully buffered first.
func (v *Views) Render(w io.Writer, page string, data any) error {
	b, err := v.RenderBytes(page, data)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// RenderBytes renders page whole, or fails having produced nothing.
func (v *Views) RenderBytes(page string, data any) ([]byte, error) {
	t, ok := v.pages[page]
	if !ok {
		return nil, fmt.Errorf("no page %q", page)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", data); err != nil {
		return nil, fmt.Errorf("render %s: %w", page, err)
	}
	return buf.Bytes(), nil
}
