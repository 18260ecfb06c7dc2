package httpapi

import (
	"context"
	"strings"
	"testing"

	"lazy/gitx"
	"lazy/gitx/gitxtest"
)

// TestReviewPageDiffKinds: the review page of a real diff that changes
// modes, names, a binary file, empty files and links carries each file's
// words and data-change marks, with the agent's link target escaped.
func TestReviewPageDiffKinds(t *testing.T) {
	root := gitxtest.DiffKindsRepo(t)
	f, h := newPagesServer(t)
	f.diff = nil
	for _, s := range []gitx.DiffSpec{{From: "main", To: "task~1"}, {From: "task~1", To: "task"}} {
		d, err := gitx.DiffWith(context.Background(), root, s)
		if err != nil {
			t.Fatal(err)
		}
		f.diff = append(f.diff, d.Files...)
	}
	page := serve(t, h, "GET", "/review/fix-login", "", "").Body.String()
	for _, want := range []string{
		`data-path="run.sh" `, `data-change="mode">mode 100644 → 100755 (made executable)</span>`, `Mode 100644 → 100755 (made executable); no lines changed.`,
		`data-change="rename">renamed from before.txt (95% similar)</span>`,
		`data-change="binary">binary file: 7.8 KB → 9.8 KB</span>`,
		`data-change="empty">empty file added</span>`, `data-change="empty">empty file removed</span>`,
		`data-change="symlink">symbolic link → ../&lt;b&gt;&amp;etc/passwd</span>`, `data-change="symlink">symbolic link → after.txt</span>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("review page lacks %s", want)
		}
	}
	if strings.Contains(page, "<b>&etc") {
		t.Error("the agent's link target is not escaped")
	}
}
