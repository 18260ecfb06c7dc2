package views

import (
	"bytes"
	"fmt"
	"io/fs"
)

// CSSParts is the stylesheet's parts, in the order they are composed.
var CSSParts = []string{"base.css", "layout.css", "diff.css", "threads.css", "actions.css", "statusbar.css", "dark.css"}

// ComposeCSS concatenates the parts from fsys (a directory holding them) in
// CSSParts order, then the highlighter's token colours (HighlightCSS). The daemon composes them once from the embedded files; the
// dev web server re-reads them from disk on every request.
func ComposeCSS(fsys fs.FS) ([]byte, error) {
	var b bytes.Buffer
	for _, p := range CSSParts {
		part, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("stylesheet part %s: %w", p, err)
		}
		fmt.Fprintf(&b, "/* --- %s --- */\n", p)
		b.Write(part)
		if len(part) > 0 && part[len(part)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	b.WriteString(HighlightCSS())
	return b.Bytes(), nil
}

// CSSFS is the embedded directory of stylesheet parts.
func CSSFS() fs.FS {
	sub, err := fs.Sub(staticFS, "static/css")
	if err != nil {
		panic(err) // the embed path is fixed at build time
	}
	return sub
}
