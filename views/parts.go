package views

import (
	"html"
	"html/template"
	"strings"
)

// writeThreadRow writes one thread as the diff table row under its line.
func (v *Views) writeThreadRow(b *strings.Builder, t *ThreadView) error {
	esc := html.EscapeString
	b.WriteString(`<tr class="thread-row" data-thread-id="` + esc(t.ID) + `" data-thread-for="` + esc(t.FragID) + `"><td colspan="3">`)
	if err := v.fragment(b, "thread", t); err != nil {
		return err
	}
	b.WriteString("</td></tr>\n")
	return nil
}

// ThreadsHTML is every thread of d as the review page shows it, without
// the diff: each placed thread as its table row (in one table, so an HTML
// parser keeps the rows), the orphans' section and the queued list. The
// page's script puts them in place after an action, instead of fetching
// the whole page again.
func (v *Views) ThreadsHTML(d DiffView, orphans []ThreadView, queued []QueuedView) (template.HTML, error) {
	var b strings.Builder
	b.WriteString(`<table class="thread-rows"><tbody>` + "\n")
	for fi := range d.Files {
		for hi := range d.Files[fi].Hunks {
			rows := d.Files[fi].Hunks[hi].Rows
			for ri := range rows {
				for ti := range rows[ri].Threads {
					if err := v.writeThreadRow(&b, &rows[ri].Threads[ti]); err != nil {
						return "", err
					}
				}
			}
		}
	}
	b.WriteString("</tbody></table>\n")
	if err := v.fragment(&b, "orphans", orphans); err != nil {
		return "", err
	}
	if err := v.fragment(&b, "queuedlist", queued); err != nil {
		return "", err
	}
	return template.HTML(b.String()), nil
}
