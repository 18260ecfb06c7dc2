package gitx

import (
	"context"
	"testing"

	"lazy/api"
	"lazy/gitx/gitxtest"
)

// TestDiffKinds: on a real diff of a temp repository, ReadDiff (through
// DiffWith) reads what changed besides lines: a mode change alone, a mode
// change with content, a rename with its similarity, a binary file with
// its sizes before and after (from the blobs), an empty file added and one
// removed, and a symbolic link added and retargeted (its target as text).
func TestDiffKinds(t *testing.T) {
	ctx := context.Background()
	root := gitxtest.DiffKindsRepo(t)
	big := gitxtest.KindsBinary
	d, err := DiffWith(ctx, root, DiffSpec{From: "main", To: "task~1"})
	if err != nil {
		t.Fatal(err)
	}
	rm, err := DiffWith(ctx, root, DiffSpec{From: "task~1", To: "task"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]File{}
	for _, f := range append(d.Files, rm.Files...) {
		got[f.Path()] = f
	}
	raw, err := RunRaw(ctx, root, "diff", "--no-ext-diff", "--no-textconv", "-M", "main..task~1")
	if err != nil {
		t.Fatal(err)
	}
	check := func(path string, ok bool, what string) {
		t.Helper()
		if !ok {
			t.Errorf("%s: want %s; got %+v\ndiff:\n%s", path, what, got[path], raw)
		}
	}
	f := got["run.sh"]
	check("run.sh", f.OldMode == "100644" && f.NewMode == "100755" && f.ModeChanged() && len(f.Hunks) == 0 && !f.IsEmpty(), "mode 100644 → 100755 and no lines")
	f = got["both.sh"]
	check("both.sh", f.ModeChanged() && f.NewMode == "100755" && f.Added == 1 && f.Deleted == 1, "a mode change with a changed line")
	f = got["after.txt"]
	check("after.txt", f.IsRename && f.OldPath == "before.txt" && f.Similarity == 95 && f.Added == 1 && !f.ModeChanged(), "renamed from before.txt at 95%")
	f = got["bin.dat"]
	check("bin.dat", f.IsBinary && f.OldSize == int64(len(big)) && f.NewSize == int64(len(big)+len(gitxtest.KindsBinaryMore)) && !f.ModeChanged(), "binary with both sizes")
	f = got["empty.txt"]
	check("empty.txt", f.IsNew && f.IsEmpty() && f.OldMode == "" && f.NewMode == "100644", "an empty file added")
	f = got["was-empty.md"]
	check("was-empty.md", f.IsDelete && f.IsEmpty() && f.OldMode == "100644" && f.NewMode == "", "an empty file removed")
	f = got["new-link"]
	check("new-link", f.IsNew && f.IsSymlink() && f.NewMode == "120000" && len(f.Hunks) == 1 && f.Hunks[0].Lines[0].Text == gitxtest.KindsLinkTarget, "a new link with its target as text")
	f = got["old-link"]
	check("old-link", f.IsSymlink() && !f.ModeChanged() && f.Added == 1 && f.Deleted == 1, "a retargeted link")
	if len(d.Files) != 7 || len(rm.Files) != 1 {
		t.Errorf("%d and %d files, want 7 and 1:\n%s", len(d.Files), len(rm.Files), raw)
	}
}

// TestReadDiffHeaders: the extended headers git writes are read as they
// are, with no repository behind them (no sizes then).
func TestReadDiffHeaders(t *testing.T) {
	d, err := ParseDiff([]byte("diff --git a/x b/y\nold mode 100644\nnew mode 100755\nsimilarity index 87%\nrename from x\nrename to y\nindex 1111111..2222222\n--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n" +
		"diff --git a/l b/l\nold mode 100644\nnew mode 120000\nindex 3333333..4444444\n--- a/l\n+++ b/l\n@@ -1 +1 @@\n-text\n+target\n\\ No newline at end of file\n" +
		"diff --git a/b b/b\nindex 5555555..6666666 100644\nBinary files a/b and b/b differ\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Files) != 3 {
		t.Fatalf("%d files, want 3", len(d.Files))
	}
	y, l, b := d.Files[0], d.Files[1], d.Files[2]
	if !y.ModeChanged() || y.OldMode != "100644" || y.NewMode != "100755" || !y.IsRename || y.Similarity != 87 || y.OldPath != "x" {
		t.Errorf("mode and rename: %+v", y)
	}
	if !l.IsSymlink() || !l.ModeChanged() || l.NewMode != api.ModeSymlink {
		t.Errorf("file to link: %+v", l)
	}
	if !b.IsBinary || b.OldMode != "100644" || b.NewMode != "100644" || b.ModeChanged() || b.OldSize != 0 {
		t.Errorf("binary: %+v", b)
	}
}

// TestShowBinarySizes: a commit's diff (the commit page's) carries a binary
// file's sizes as the review diff does.
func TestShowBinarySizes(t *testing.T) {
	root := gitxtest.DiffKindsRepo(t)
	_, d, err := Show(context.Background(), root, "task~1")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range d.Files {
		if f.Path() == "bin.dat" {
			if f.OldSize != int64(len(gitxtest.KindsBinary)) || f.NewSize != int64(len(gitxtest.KindsBinary)+len(gitxtest.KindsBinaryMore)) {
				t.Errorf("bin.dat sizes %d → %d", f.OldSize, f.NewSize)
			}
			return
		}
	}
	t.Fatal("no bin.dat in the commit's diff")
}
