package views

import (
	"context"
	"strings"
	"testing"

	"lazy/gitx"
	"lazy/gitx/gitxtest"
)

// KindsHTML renders the review diff of gitxtest.DiffKindsRepo (both of its
// diffs on one page).
func kindsHTML(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	root := gitxtest.DiffKindsRepo(t)
	var files []gitx.File
	for _, s := range []gitx.DiffSpec{{From: "main", To: "task~1"}, {From: "task~1", To: "task"}} {
		d, err := gitx.DiffWith(ctx, root, s)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, d.Files...)
	}
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	view, _ := BuildDiff(files, nil, "T", "", true, "")
	h, err := v.DiffHTML(view)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

// fileHTML is the <details> of path in a rendered diff.
func fileHTML(t *testing.T, page, path string) string {
	t.Helper()
	i := strings.Index(page, `<details class="file" id="`+FileID(path)+`"`)
	if i < 0 {
		t.Fatalf("no file %s in\n%s", path, page)
	}
	f := page[i:]
	return f[:strings.Index(f, "</details>")]
}

// TestDiffKindsRendered: each file says what changed besides its lines, in
// its header and its body, and carries the marks (data-change) a script or
// a test finds; an agent's link target is escaped text.
func TestDiffKindsRendered(t *testing.T) {
	page := kindsHTML(t)
	big := len(gitxtest.KindsBinary)
	for path, want := range map[string][]string{
		"run.sh": {`data-change="mode"`, `<span class="muted change" data-change="mode">mode 100644 → 100755 (made executable)</span>`,
			`<p class="muted file-note">Mode 100644 → 100755 (made executable); no lines changed.</p>`},
		"both.sh":   {`data-change="mode"`, `mode 100644 → 100755 (made executable)`, `<table class="diff-table">`, `<ins>two</ins>`},
		"after.txt": {`data-change="rename"`, `<span class="muted change" data-change="rename">renamed from before.txt (95% similar)</span>`, `changed`},
		"bin.dat": {`data-change="binary"`, `binary file: ` + ByteSize(int64(big)) + ` → ` + ByteSize(int64(big+len(gitxtest.KindsBinaryMore))),
			`Binary file: 7.8 KB → 9.8 KB; not shown.`},
		"empty.txt":    {`data-change="empty"`, `>empty file added</span>`, `<p class="muted file-note">Empty file added; no lines changed.</p>`},
		"was-empty.md": {`data-change="empty"`, `>empty file removed</span>`, `Empty file removed; no lines changed.`},
		"new-link":     {`data-change="symlink"`, `symbolic link → ../&lt;b&gt;&amp;etc/passwd</span>`},
		"old-link":     {`data-change="symlink"`, `symbolic link → after.txt</span>`},
	} {
		f := fileHTML(t, page, path)
		for _, w := range want {
			if !strings.Contains(f, w) {
				t.Errorf("%s lacks %s:\n%s", path, w, f)
			}
		}
		if strings.Contains(f, `<table class="diff-table">`+"\n</table>") {
			t.Errorf("%s renders an empty box", path)
		}
	}
	if strings.Contains(page, "<b>&etc") {
		t.Error("the link target is not escaped")
	}
}

// TestByteSize: sizes read as GitHub writes them.
func TestByteSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KB", 12_595: "12.3 KB", 5 << 20: "5.0 MB"} {
		if got := ByteSize(n); got != want {
			t.Errorf("ByteSize(%d) = %q, want %q", n, got, want)
		}
	}
}
