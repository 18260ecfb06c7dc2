package views

import (
	"net/url"
	"strings"
	"testing"

	"lazy/gitx"
	"lazy/review"
)

// TestCommentLinkRoundTrip: a line of a nested path links to ?comment=<frag>
// such that the server, decoding the query, gets back the exact fragment id.
func TestCommentLinkRoundTrip(t *testing.T) {
	d, err := gitx.ParseDiff([]byte("diff --git a/dir/a b.go b/dir/a b.go\n--- a/dir/a b.go\n+++ b/dir/a b.go\n@@ -1 +1 @@\n-x\n+y\n"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	frag := FragID("dir/a b.go", "new", 1)
	if frag != "l-dir%2Fa%20b.go-new-1" {
		t.Fatalf("frag %q", frag)
	}
	view, _ := BuildDiff(d.Files, nil, "T", "", true, "")
	h, err := v.DiffHTML(view)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(h), `href="?comment=l-dir%252Fa%2520b.go-new-1`)
	if i < 0 {
		t.Fatalf("no link for the added line in %s", h)
	}
	href := string(h)[i+len(`href="`):]
	href = href[:strings.IndexByte(href, '"')]
	u, err := url.Parse(strings.ReplaceAll(href, "&amp;", "&"))
	if err != nil {
		t.Fatal(err)
	}
	if got := u.Query().Get("comment"); got != frag {
		t.Errorf("link %q: query gives %q; want %q", href, got, frag)
	}
	open, _ := BuildDiff(d.Files, nil, "T", "", true, frag)
	if !open.Files[0].Hunks[0].Rows[1].CommentOpen {
		t.Error("the decoded query does not open the form on its line")
	}
	// the open form takes the focus, which brings it into view
	h, err = v.DiffHTML(open)
	if err != nil || !strings.Contains(string(h), `required autofocus`) {
		t.Errorf("the opened form does not take the focus: %v", err)
	}
}

// TestThreadsPortWithTheirText: a thread follows the text it was made on
// (Gerrit-style); where that text is gone it is marked outdated, on its
// line when the line is still in the diff, else among the orphans.
func TestThreadsPortWithTheirText(t *testing.T) {
	d, err := gitx.ParseDiff([]byte("diff --git a/a.go b/a.go\n--- a/a.go\n+++ b/a.go\n@@ -1,2 +1,4 @@\n+zero\n+one\n alpha\n-beta\n+gamma\n"))
	if err != nil {
		t.Fatal(err)
	}
	th := func(id string, line int, text string) review.Thread {
		return review.Thread{ID: id, File: "a.go", Side: review.New, Line: line, LineText: text,
			Messages: []review.ReviewComment{{ID: id, ThreadID: id, Actor: review.Human, Intent: review.Comment, Body: "about " + text, DeliveryState: review.Delivered}}}
	}
	threads := []review.Thread{
		th("stays", 3, "alpha"),   // alpha is still line 3
		th("moved", 1, "alpha"),   // made when alpha was line 1: it is line 3 now
		th("changed", 4, "beta"),  // line 4 reads gamma now
		th("gone", 40, "nowhere"), // no such line, no such text
	}
	view, orphans := BuildDiff(d.Files, threads, "T", "", true, "")
	where := map[string]ThreadView{}
	for _, h := range view.Files[0].Hunks {
		for _, r := range h.Rows {
			for _, tv := range r.Threads {
				if tv.FragID != r.FragID {
					t.Errorf("thread %s on row %s has anchor %s", tv.ID, r.FragID, tv.FragID)
				}
				where[tv.ID] = tv
			}
		}
	}
	if tv := where["stays"]; tv.Line != 3 || tv.PortedFrom != 0 || tv.Outdated {
		t.Errorf("stays: %+v", tv)
	}
	if tv := where["moved"]; tv.Line != 3 || tv.PortedFrom != 1 || tv.Outdated {
		t.Errorf("moved: %+v", tv)
	}
	if tv := where["changed"]; tv.Line != 4 || !tv.Outdated {
		t.Errorf("changed: %+v", tv)
	}
	if len(orphans) != 1 || orphans[0].ID != "gone" || !orphans[0].Outdated || !orphans[0].Orphan {
		t.Errorf("orphans: %+v", orphans)
	}
	if !where["stays"].Settled {
		t.Error("a thread whose comment was delivered must start collapsed")
	}
	v, _ := New()
	h, err := v.DiffHTML(view)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"moved from line 1", "outdated", "it has changed since", `class="thread settled"`} {
		if !strings.Contains(string(h), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}
