package views

import (
	"strings"
	"testing"

	"lazy/api"
	"lazy/gitx"
	"lazy/review"
)

// TestApplyReviewState: a file is viewed only at the content it was marked
// on; a thread is resolved until a message comes after the mark; a
// resolved thread whose comment is still queued stays open and says so.
func TestApplyReviewState(t *testing.T) {
	d, err := gitx.ParseDiff([]byte("diff --git a/a.go b/a.go\n--- a/a.go\n+++ b/a.go\n@@ -1 +1 @@\n-x\n+y\n" +
		"diff --git a/b.go b/b.go\n--- a/b.go\n+++ b/b.go\n@@ -1 +1 @@\n-p\n+q\n"))
	if err != nil {
		t.Fatal(err)
	}
	msg := func(id, thread string, queued bool) review.ReviewComment {
		c := review.ReviewComment{ID: id, ThreadID: thread, Actor: review.Human, Intent: review.Comment, Body: "about y", DeliveryState: review.Delivered}
		if queued {
			c.DeliveryState = review.PendingDelivery
		}
		return c
	}
	th := func(id string, ms ...review.ReviewComment) review.Thread {
		return review.Thread{ID: id, File: "a.go", Side: review.New, Line: 1, LineText: "y", Messages: ms}
	}
	threads := []review.Thread{
		th("done", msg("d1", "done", false)),
		th("later", msg("l1", "later", false), msg("l2", "later", false)),
		th("queued", msg("q1", "queued", true)),
	}
	view, orphans := BuildDiff(d.Files, threads, "T", "", true, "")
	aHash := view.Files[0].Hash
	ApplyReviewState(&view, orphans, &api.ReviewState{
		Viewed: map[string]string{"a.go": aHash, "b.go": "another-content"},
		Resolved: map[string]api.ResolvedMark{
			"done":   {Messages: 1},
			"later":  {Messages: 1}, // a message came after it was resolved
			"queued": {Messages: 1, Queued: 1},
		},
	})
	if !view.Files[0].Viewed || view.Files[1].Viewed {
		t.Errorf("viewed: a.go %v (want true), b.go %v (want false: marked on another content)", view.Files[0].Viewed, view.Files[1].Viewed)
	}
	got := map[string]ThreadView{}
	for _, tv := range view.Files[0].Hunks[0].Rows[1].Threads {
		got[tv.ID] = tv
	}
	if !got["done"].Resolved || got["later"].Resolved || !got["queued"].Resolved || got["queued"].QueuedResolved != 1 {
		t.Errorf("resolved: done %v later %v queued %v/%d", got["done"].Resolved, got["later"].Resolved, got["queued"].Resolved, got["queued"].QueuedResolved)
	}
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	h, err := v.DiffHTML(view)
	if err != nil {
		t.Fatal(err)
	}
	page := string(h)
	for _, want := range []string{
		`<li data-nav-file="a.go" class="viewed">`,
		`<details class="file" id="file-a.go" data-path="a.go" data-diff-hash="` + aHash + `" data-rows="2" data-threads="3">`, // folded: no open
		`class="viewed-box" checked>`,
		`<details class="thread settled resolved" data-thread="done">`,
		`<details class="thread resolved" data-thread="queued" open>`,
		`its queued comment still goes to the agent with the next unblock`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(page, `data-path="b.go" data-diff-hash="`+view.Files[1].Hash+`" data-rows="2">`) {
		t.Error("b.go (not viewed) starts folded")
	}
}
