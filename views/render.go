package views

import (
	"fmt"
	"html"
	"html/template"
	"net/url"
	"strconv"
	"strings"
)

// LargeFileRows is the number of diff rows past which a file starts
// collapsed: the reviewer opens it when they get to it.
const LargeFileRows = 400

// OpenRowsBudget is how many diff rows a page shows open at first; the files
// after them start collapsed (a browser lays out a closed <details> only
// when it opens). On a 5,000-line diff this halves the time to the first
// interactive frame.
const OpenRowsBudget = 1500

// FileID is a file's fragment id in the diff: file-<url-encoded path>.
func FileID(path string) string { return "file-" + url.PathEscape(path) }

// DiffHTML is the one diff renderer of the review page and the commit page.
// It writes the rows itself, escaping every path and line with
// html.EscapeString (a 5,000-line diff through html/template took 140 ms);
// threads and comment forms still come from their templates.
//
// The changed files are listed first in a <nav> (path, +/-, threads, a
// place for the viewed mark); each file is a <details>. The first files, up
// to OpenRowsBudget rows, are open; the rest (and any file past
// LargeFileRows) start closed, and where the page can load a file by itself
// (LazyURL) their rows are not sent at all: the script fetches a file's rows
// when it is opened, and without script its link shows the page with that
// file in it. A browser then builds the rows the reviewer reads, not 5,000.
func (v *Views) DiffHTML(d DiffView) (template.HTML, error) {
	esc := html.EscapeString
	layout := d.layout()
	var hl []int
	for i, l := range layout {
		if l == fileOpen || l == fileClosed {
			hl = append(hl, i)
		}
	}
	HighlightFiles(&d, hl)
	var b strings.Builder
	b.Grow(2048 + 400*countRows(d))
	b.WriteString(`<div class="diff-with-nav">` + "\n")
	if len(d.Files) > 0 {
		b.WriteString(`<nav class="file-nav" aria-label="Changed files"><h2>Files <span class="muted">(` + strconv.Itoa(len(d.Files)) + `)</span></h2>` + "\n<ol>\n")
		for _, f := range d.Files {
			b.WriteString(`<li data-nav-file="` + esc(f.Path) + `"` + classIf(f.Viewed, "viewed") + `><a href="#` + esc(FileID(f.Path)) + `"><span class="nav-path">` + esc(f.Path) + `</span></a> <span class="nav-stat"><span class="plus">+` + strconv.Itoa(f.Added) + `</span> <span class="minus">-` + strconv.Itoa(f.Deleted) + `</span>`)
			if n := fileThreads(f); n > 0 {
				b.WriteString(` <span class="nav-threads" title="threads on this file">` + strconv.Itoa(n) + ` thread`)
				if n > 1 {
					b.WriteString("s")
				}
				b.WriteString(`</span>`)
			}
			b.WriteString(` <span class="viewed-mark"` + hiddenUnless(f.Viewed) + `>viewed</span></span></li>` + "\n")
		}
		b.WriteString("</ol>\n</nav>\n")
	}
	b.WriteString(`<div class="diff layout-unified wrap-scroll" data-diff>` + "\n")
	if d.Empty {
		text := d.EmptyText
		if text == "" {
			text = "No changes against the parent branch yet."
		}
		b.WriteString(`<p class="empty">` + esc(text) + `</p>` + "\n")
	}
	for i := range d.Files {
		f := &d.Files[i]
		rows := fileRows(*f)
		changes := f.Changes()
		b.WriteString(`<details class="file" id="` + esc(FileID(f.Path)) + `" data-path="` + esc(f.Path) + `" data-diff-hash="` + f.Hash + `" data-rows="` + strconv.Itoa(rows) + `"`)
		if len(changes) > 0 {
			kinds := make([]string, len(changes))
			for i, c := range changes {
				kinds[i] = c.Kind
			}
			b.WriteString(` data-change="` + esc(strings.Join(kinds, " ")) + `"`)
		}
		if layout[i] == fileOpen && (!f.Viewed || f.Path == d.Open || f.Path == d.Full) {
			b.WriteString(` open`)
		}
		if layout[i] == fileLazy {
			b.WriteString(` data-lazy="` + esc(d.LazyURL+url.QueryEscape(f.Path)) + `"`)
		}
		// what a link, a search hit or n/p may need to load the file for:
		// the old path a deleted line's anchor names, its threads
		if f.OldPath != "" && f.OldPath != f.Path {
			b.WriteString(` data-old-path="` + esc(f.OldPath) + `"`)
		}
		if n := fileThreads(*f); n > 0 {
			b.WriteString(` data-threads="` + strconv.Itoa(n) + `"`)
		}
		b.WriteString(">\n" + `<summary class="file-head"><span class="file-path">`)
		b.WriteString(esc(f.Path))
		b.WriteString(`</span>`)
		for _, c := range changes {
			b.WriteString(` <span class="muted change" data-change="` + esc(c.Kind) + `">` + esc(c.Text) + `</span>`)
		}
		if f.IsNew {
			b.WriteString(` <span class="tag">new</span>`)
		}
		if f.IsDelete {
			b.WriteString(` <span class="tag">deleted</span>`)
		}
		if rows > LargeFileRows {
			b.WriteString(` <span class="tag large">large: ` + strconv.Itoa(rows) + ` lines, open to show</span>`)
		}
		if f.TooLarge || f.IsBinary {
			if raw := d.rawURL(f); raw != "" {
				b.WriteString(` <a class="whole-file" href="` + esc(raw) + `">raw file</a>`)
			}
		} else if d.Expandable {
			if d.Full == f.Path && d.Context == 0 {
				b.WriteString(` <a class="whole-file" href="?#` + esc(FileID(f.Path)) + `">changes only</a>`)
			} else {
				b.WriteString(` <a class="whole-file" href="` + esc(fileURL(f.Path, 0)) + `">whole file</a>`)
			}
		}
		b.WriteString(` <span class="stat"><span class="plus">+` + strconv.Itoa(f.Added) + `</span> <span class="minus">-` + strconv.Itoa(f.Deleted) + "</span></span>")
		b.WriteString(` <label class="viewed-toggle" hidden><input type="checkbox" class="viewed-box"` + checkedIf(f.Viewed) + `> Viewed</label></summary>` + "\n")
		if layout[i] == fileOverPage {
			b.WriteString(`<p class="muted too-large">` + strconv.Itoa(rows) + ` lines, not shown: one page shows at most ` + strconv.Itoa(MaxPageRows) + ` lines.`)
			if raw := d.rawURL(f); raw != "" {
				b.WriteString(` <a href="` + esc(raw) + `">Raw file</a>`)
			}
			b.WriteString("</p>\n</details>\n")
			continue
		}
		if layout[i] == fileLazy {
			q := url.Values{"open": {f.Path}}
			b.WriteString(`<p class="lazy-note">` + strconv.Itoa(rows) + ` lines, not loaded yet: <a href="?` + esc(q.Encode()) + `#` + esc(FileID(f.Path)) + `">show them</a></p>` + "\n</details>\n")
			continue
		}
		if err := v.writeFileBody(&b, f, d); err != nil {
			return "", err
		}
		b.WriteString("</details>\n")
	}
	b.WriteString("</div>\n</div>\n")
	return template.HTML(b.String()), nil
}

// FileHTML is the body of one file of d (what a lazy file's <details> is
// filled with when it opens): its table, threads and forms.
func (v *Views) FileHTML(d DiffView, path string) (template.HTML, error) {
	for i := range d.Files {
		if d.Files[i].Path == path {
			HighlightFiles(&d, []int{i})
			var b strings.Builder
			if err := v.writeFileBody(&b, &d.Files[i], d); err != nil {
				return "", err
			}
			return template.HTML(b.String()), nil
		}
	}
	return "", fmt.Errorf("%q is not a file of this diff", path)
}

// a file's place on the page
const (
	fileOpen     = iota // shown open
	fileClosed          // rows sent, shown closed (no LazyURL to load it by)
	fileLazy            // rows not sent: loaded when opened
	fileOverPage        // rows not sent and no way to load them: past MaxPageRows
)

// MaxPageRows bounds the diff rows one page sends (the rows of files it
// loads later are not counted): with no place to load a file from, the
// files past it are named, not shown.
const MaxPageRows = 20_000

// layout decides which files start open: the first, and the next ones while
// their rows fit in OpenRowsBudget, and the one the reviewer asked for
// (Open, Full); none larger than LargeFileRows unless asked for.
func (d *DiffView) layout() []int {
	out := make([]int, len(d.Files))
	shown, sent := 0, 0
	for i, f := range d.Files {
		rows := fileRows(f)
		asked := f.Path == d.Open || f.Path == d.Full
		open := asked || rows <= LargeFileRows && (shown == 0 || shown+rows <= OpenRowsBudget)
		switch {
		case open && sent+rows <= MaxPageRows || asked:
			shown += rows
			sent += rows
			out[i] = fileOpen
		case d.LazyURL != "" && !f.IsBinary && !f.TooLarge:
			out[i] = fileLazy
		case sent+rows <= MaxPageRows:
			sent += rows
			out[i] = fileClosed
		default:
			out[i] = fileOverPage
		}
	}
	return out
}

// writeFileBody writes one text file's table (or the binary note).
func (v *Views) writeFileBody(b *strings.Builder, f *FileView, d DiffView) error {
	esc := html.EscapeString
	if f.IsBinary || f.TooLarge {
		what := "Binary file" + f.sizes() + "; not shown."
		if f.TooLarge {
			what = "Too large to show: " + strconv.Itoa(f.Added+f.Deleted) + " changed lines, past what one page shows."
		}
		b.WriteString(`<p class="muted too-large">` + what)
		if raw := d.rawURL(f); raw != "" {
			b.WriteString(` <a href="` + esc(raw) + `">Raw file</a>`)
		}
		b.WriteString("</p>\n")
		return nil
	}
	if len(f.Hunks) == 0 {
		// no lines changed: say what did, not an empty box
		what := "No lines changed."
		if changes := f.Changes(); len(changes) > 0 {
			texts := make([]string, len(changes))
			for i, c := range changes {
				texts[i] = c.Text
			}
			what = strings.ToUpper(texts[0][:1]) + texts[0][1:]
			if len(texts) > 1 {
				what += "; " + strings.Join(texts[1:], "; ")
			}
			what += "; no lines changed."
		}
		b.WriteString(`<p class="muted file-note">` + esc(what) + "</p>\n")
		return nil
	}
	b.WriteString(`<div class="scroller">` + "\n" + `<table class="diff-table">` + "\n")
	for _, h := range f.Hunks {
		b.WriteString(`<tbody class="hunk">` + "\n" + `<tr class="hunk-head"><td class="num"></td><td class="num"></td><td class="code">`)
		if d.Expandable && !(d.Full == f.Path && d.Context == 0) {
			more := 20
			if d.Full == f.Path {
				more = d.Context + 20
			}
			b.WriteString(`<a class="expand" href="` + esc(fileURL(f.Path, more)) + `" title="Show ` + strconv.Itoa(more) + ` lines of context around each change of this file">↕</a> `)
		}
		b.WriteString(esc(h.Header))
		b.WriteString("</td></tr>\n")
		for i := range h.Rows {
			if err := v.writeRow(b, &h.Rows[i], d); err != nil {
				return err
			}
		}
		b.WriteString("</tbody>\n")
	}
	b.WriteString("</table>\n</div>\n")
	return nil
}

// rawURL is where f's own bytes are served ("" when d has no such place):
// the new side, the old one for a deleted file.
func (d DiffView) rawURL(f *FileView) string {
	if d.RawURL == "" {
		return ""
	}
	u := d.RawURL + url.QueryEscape(f.Path)
	if f.IsDelete {
		u += "&side=old"
	}
	return u
}

// fileRows is the number of diff lines of a file.
func fileRows(f FileView) int {
	n := 0
	for _, h := range f.Hunks {
		n += len(h.Rows)
	}
	return n
}

// fileThreads is the number of threads anchored in a file.
func fileThreads(f FileView) int {
	n := 0
	for _, h := range f.Hunks {
		for _, r := range h.Rows {
			n += len(r.Threads)
		}
	}
	return n
}

func countRows(d DiffView) int {
	n := 0
	for _, f := range d.Files {
		n += fileRows(f)
	}
	return n
}

func (v *Views) writeRow(b *strings.Builder, r *RowView, d DiffView) error {
	esc := html.EscapeString
	kind := "ln-ctx"
	switch {
	case r.IsAddition:
		kind = "ln-add"
	case r.IsDeletion:
		kind = "ln-del"
	}
	b.WriteString(`<tr class="ln ` + kind + `" data-rv-pair="` + esc(r.Pair) + `" data-rv-pane="` + r.Pane + `">`)
	b.WriteString(`<td class="num">`)
	if r.Old != 0 {
		b.WriteString(strconv.Itoa(r.Old))
	}
	b.WriteString(`</td><td class="num">`)
	if r.New != 0 {
		b.WriteString(strconv.Itoa(r.New))
	}
	frag := esc(r.FragID)
	line := strconv.Itoa(r.Line)
	b.WriteString(`</td><td class="code" id="` + frag + `" data-file="` + esc(r.File) + `" data-side="` + r.Side + `" data-line="` + line + `">`)
	if d.Commentable {
		// no #fragment: the form this opens takes the focus (autofocus),
		// which scrolls it into view
		b.WriteString(`<a class="comment-link" href="?comment=` + esc(url.QueryEscape(r.FragID)) + `" aria-label="Comment on line ` + line + `">+</a>`)
	}
	// the +/- sign is the stylesheet's (.text::before): it is not text to
	// copy, and 5,000 rows of it weigh 125 KB
	b.WriteString(`<span class="text">`)
	mark := "ins"
	if r.IsDeletion {
		mark = "del"
	}
	writeText(b, r.Text, r.Hl, r.Marks, mark)
	b.WriteString("</span>")
	if r.Cut > 0 {
		b.WriteString(`<span class="cut">… line cut: ` + strconv.Itoa(r.Cut) + ` bytes</span>`)
	}
	b.WriteString("</td></tr>\n")
	for i := range r.Threads {
		if err := v.writeThreadRow(b, &r.Threads[i]); err != nil {
			return err
		}
	}
	if r.CommentOpen {
		b.WriteString(`<tr class="comment-row" data-comment-for="` + frag + `"><td colspan="3">`)
		if err := v.fragment(b, "commentform", CommentAnchor{TaskID: d.TaskID, File: r.File, Line: r.Line, Side: r.Side, CSRF: d.CSRF, Focus: true, Body: d.Draft}); err != nil {
			return err
		}
		b.WriteString("</td></tr>\n")
	}
	return nil
}

// fragment executes one of the shared partial templates into b.
func (v *Views) fragment(b *strings.Builder, name string, data any) error {
	return v.partials.ExecuteTemplate(b, name, data)
}

// fileURL is the review page showing path with lines of context around its
// changes (0: the whole file), scrolled to the file.
func fileURL(path string, lines int) string {
	q := url.Values{"full": {path}}
	if lines > 0 {
		q.Set("context", strconv.Itoa(lines))
	}
	return "?" + q.Encode() + "#" + FileID(path)
}

// writeText writes a line's text escaped, its highlighted tokens as spans
// and its changed words inside <ins> or <del> (mark). hl and marks are
// sorted, non-overlapping byte ranges each; a token that crosses a mark's
// edge is split there.
func writeText(b *strings.Builder, text string, hl, marks []Span, mark string) {
	if len(hl) == 0 && len(marks) == 0 {
		b.WriteString(html.EscapeString(text))
		return
	}
	hi, mi, open := 0, 0, false
	for pos := 0; pos < len(text); {
		for hi < len(hl) && hl[hi].End <= pos {
			hi++
		}
		for mi < len(marks) && marks[mi].End <= pos {
			mi++
		}
		// the run from pos to the next edge of a token or a mark
		end := len(text)
		inHl := hi < len(hl) && hl[hi].Start <= pos
		inMark := mi < len(marks) && marks[mi].Start <= pos
		if inHl {
			end = min(end, hl[hi].End)
		} else if hi < len(hl) {
			end = min(end, hl[hi].Start)
		}
		if inMark {
			end = min(end, marks[mi].End)
		} else if mi < len(marks) {
			end = min(end, marks[mi].Start)
		}
		end = max(end, pos+1) // a malformed span never stalls the walk
		end = min(end, len(text))
		if inMark && !open {
			b.WriteString("<" + mark + ">")
			open = true
		} else if !inMark && open {
			b.WriteString("</" + mark + ">")
			open = false
		}
		if inHl {
			b.WriteString(`<span class="` + hl[hi].Class + `">`)
		}
		b.WriteString(html.EscapeString(text[pos:end]))
		if inHl {
			b.WriteString("</span>")
		}
		pos = end
	}
	if open {
		b.WriteString("</" + mark + ">")
	}
}

// the reviewer's marks in the rows (ApplyReviewState)
func hiddenUnless(on bool) string {
	if on {
		return ""
	}
	return " hidden"
}

func classIf(on bool, class string) string {
	if on {
		return ` class="` + class + `"`
	}
	return ""
}

func checkedIf(on bool) string {
	if on {
		return " checked"
	}
	return ""
}
