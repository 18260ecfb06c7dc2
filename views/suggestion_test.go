package views

import (
	"strings"
	"testing"

	"lazy/gitx"
	"lazy/review"
)

// TestSuggestionView: a suggestion shows the lines it replaces as the diff
// holds them and the suggested ones; Apply is offered with the page's head
// only on the lines it was made on, and not once they read as suggested.
func TestSuggestionView(t *testing.T) {
	d, err := gitx.ParseDiff([]byte("diff --git a/a.go b/a.go\n--- a/a.go\n+++ b/a.go\n@@ -1,2 +1,4 @@\n+zero\n+one\n alpha\n-beta\n+gamma\n"))
	if err != nil {
		t.Fatal(err)
	}
	sg := func(id string, from, line int, text, body string) review.Thread {
		return review.Thread{ID: id, File: "a.go", Side: review.New, Line: line, StartLine: from, LineText: text,
			Messages: []review.ReviewComment{{ID: id, TaskID: "T", ThreadID: id, File: "a.go", Side: review.New, Line: line, StartLine: from, LineText: text,
				Actor: review.Human, Intent: review.Comment, Body: body, DeliveryState: review.PendingDelivery}}}
	}
	threads := []review.Thread{
		sg("range", 1, 2, "one", "Merge them:\n```suggestion\nzero-one\n```"),
		sg("done", 0, 3, "alpha", "```suggestion\nalpha\n```"),
		sg("moved", 0, 1, "alpha", "```suggestion\nALPHA\n```"), // alpha was line 1, is line 3 now
	}
	view, _ := BuildDiff(d.Files, threads, "T", "tok", true, "")
	PinSuggestions(&view, nil, "abc123")
	got := map[string]*SuggestionView{}
	for _, h := range view.Files[0].Hunks {
		for _, r := range h.Rows {
			for _, tv := range r.Threads {
				got[tv.ID] = tv.Messages[0].Suggestion
				if tv.ID == "range" && !strings.Contains(string(tv.Messages[0].HTML), "Merge them:") || strings.Contains(string(tv.Messages[0].HTML), "suggestion") {
					t.Errorf("%s: the message's words %q (the block is shown apart)", tv.ID, tv.Messages[0].HTML)
				}
			}
		}
	}
	if s := got["range"]; s == nil || strings.Join(s.Old, "|") != "zero|one" || strings.Join(s.New, "|") != "zero-one" || !s.CanApply || s.Head != "abc123" || s.Range() != "lines 1–2" {
		t.Errorf("range: %+v", s)
	}
	if s := got["done"]; s == nil || s.CanApply || !strings.HasPrefix(s.Why, "Applied") {
		t.Errorf("a suggestion the lines already read as: %+v", s)
	}
	if s := got["moved"]; s == nil || s.CanApply || !strings.Contains(s.Why, "moved") {
		t.Errorf("moved: %+v", s)
	}
	v, _ := New()
	h, err := v.DiffHTML(view)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`action="/review/T/comment/range/apply"`, `name="head" value="abc123"`, `<tr class="sg-del"><td class="sg-sign" aria-label="removed">−</td><td class="sg-text">zero</td></tr>`, `<td class="sg-text">zero-one</td>`} {
		if !strings.Contains(string(h), want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(string(h), "comment/done/apply") || strings.Contains(string(h), "comment/moved/apply") {
		t.Error("Apply offered where it cannot apply")
	}
}
