package gitx

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"lazy/gitx/gitxtest"
)

func TestTaskBranchDiff(t *testing.T) {
	ctx := context.Background()
	root := gitxtest.NewRepo(t, map[string]string{"a.txt": "one\ntwo\nthree\nfour\n", "gone.txt": "bye\n"})
	top, err := TopLevel(ctx, filepath.Join(root))
	if err != nil || top != root {
		t.Fatalf("TopLevel: got %q %v", top, err)
	}
	br, _ := CurrentBranch(ctx, root)
	if br != "main" {
		t.Fatalf("CurrentBranch: got %q", br)
	}
	tr := newTask(t, root, "x")
	gitxtest.Commit(t, tr.Worktree, "change", map[string]string{"a.txt": "one\nTWO\nthree\nfour\nfive\n", "new.txt": "hi\n"})
	gitxtest.Git(t, tr.Worktree, "rm", "-q", "gone.txt")
	gitxtest.Git(t, tr.Worktree, "commit", "-q", "-m", "rm")
	mustImport(t, tr)

	d, err := DiffBranch(ctx, root, "main", "lazy/x")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Files) != 3 {
		t.Fatalf("files: got %d, want 3", len(d.Files))
	}
	var a File
	for _, f := range d.Files {
		if f.Path() == "a.txt" {
			a = f
		}
	}
	want := []Line{
		{Kind: Context, Old: 1, New: 1, Text: "one"},
		{Kind: Deleted, Old: 2, Text: "two"},
		{Kind: Added, New: 2, Text: "TWO"},
		{Kind: Context, Old: 3, New: 3, Text: "three"},
		{Kind: Context, Old: 4, New: 4, Text: "four"},
		{Kind: Added, New: 5, Text: "five"},
	}
	if len(a.Hunks) != 1 || len(a.Hunks[0].Lines) != len(want) {
		t.Fatalf("a.txt hunks: %+v", a.Hunks)
	}
	for i, l := range a.Hunks[0].Lines {
		if l != want[i] {
			t.Errorf("line %d: got %+v, want %+v", i, l, want[i])
		}
	}
	if l, ok := d.Find("a.txt", "old", 2); !ok || l.Text != "two" {
		t.Errorf("Find old 2: got %+v %v", l, ok)
	}
	if _, ok := d.Find("a.txt", "new", 99); ok {
		t.Errorf("Find new 99 must miss")
	}
	ahead, behind, err := AheadBehind(ctx, root, "main", "lazy/x")
	if err != nil || ahead != 2 || behind != 0 {
		t.Errorf("AheadBehind: got %d %d %v", ahead, behind, err)
	}
	paths, _ := ChangedPaths(ctx, root, "main", "lazy/x")
	if strings.Join(paths, ",") != "a.txt,gone.txt,new.txt" {
		t.Errorf("ChangedPaths: got %v", paths)
	}
}

func TestMergeConflict(t *testing.T) {
	ctx := context.Background()
	root := gitxtest.NewRepo(t, map[string]string{"a.txt": "base\n"})
	tr := newTask(t, root, "y")
	agentCommit(t, tr, "task side", map[string]string{"a.txt": "task\n"})
	gitxtest.Commit(t, root, "parent side", map[string]string{"a.txt": "parent\n"})
	_, behind, _ := AheadBehind(ctx, root, "main", "lazy/y")
	if behind != 1 {
		t.Errorf("behind: got %d, want 1", behind)
	}
	err := tr.Merge(ctx, "sync")
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Files[0] != "a.txt" || !errors.Is(err, ErrConflicted) {
		t.Fatalf("got %v, want a conflict on a.txt", err)
	}
	if on, _ := tr.MergeInProgress(); !on {
		t.Errorf("MergeInProgress: got false after a conflicted merge")
	}
}

func TestLockNamesHolder(t *testing.T) {
	p := filepath.Join(t.TempDir(), "wt.lock")
	l, err := TryLock(p, "work turn 3")
	if err != nil {
		t.Fatal(err)
	}
	_, err = TryLock(p, "ask")
	var le *LockedError
	if !errors.As(err, &le) || le.Holder.What != "work turn 3" || !strings.Contains(err.Error(), "work turn 3") {
		t.Fatalf("got %v, want a LockedError naming the holder", err)
	}
	l.Unlock()
	l2, err := TryLock(p, "ask")
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	l2.Unlock()
}

func FuzzParseDiff(f *testing.F) {
	f.Add([]byte("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"))
	f.Add([]byte("diff --git a/n b/n\nnew file mode 100644\n--- /dev/null\n+++ b/n\n@@ -0,0 +1 @@\n+x\n\\ No newline at end of file\n"))
	// the extended headers: modes, a rename with its similarity, a link, a
	// binary note, an empty file
	f.Add([]byte("diff --git a/x b/y\nold mode 100644\nnew mode 100755\nsimilarity index 87%\nrename from x\nrename to y\nindex 1111111..2222222\n--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n" +
		"diff --git a/l b/l\nnew file mode 120000\nindex 0000000..4444444\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+../<t>\n\\ No newline at end of file\n" +
		"diff --git a/b b/b\nindex 5555555..6666666 100644\nBinary files a/b and b/b differ\n" +
		"diff --git a/e b/e\ndeleted file mode 100644\nindex e69de29..0000000\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := ParseDiff(in)
		if err != nil {
			return
		}
		for _, fl := range d.Files {
			for _, h := range fl.Hunks {
				for _, l := range h.Lines {
					if (l.Kind == Added && l.Old != 0) || (l.Kind == Deleted && l.New != 0) {
						t.Fatalf("line %+v carries a number on the side it does not have", l)
					}
				}
			}
		}
	})
}

// TestDryMerge: merge-tree names the conflicting files and touches nothing.
func TestDryMerge(t *testing.T) {
	ctx := context.Background()
	root := gitxtest.NewRepo(t, map[string]string{"a.txt": "base\n", "b.txt": "base\n"})
	tr := newTask(t, root, "m")
	agentCommit(t, tr, "task side", map[string]string{"a.txt": "task\n", "c.txt": "new\n"})
	m, err := DryMerge(ctx, root, "main", "lazy/m")
	if err != nil || !m.Clean || m.Ahead != 1 || m.Behind != 0 {
		t.Fatalf("clean: %+v %v", m, err)
	}
	gitxtest.Commit(t, root, "parent side", map[string]string{"a.txt": "parent\n", "b.txt": "parent\n"})
	head := gitxtest.Git(t, root, "rev-parse", "HEAD")
	m, err = DryMerge(ctx, root, "main", "lazy/m")
	if err != nil || m.Clean || strings.Join(m.Conflicts, ",") != "a.txt" || m.Behind != 1 {
		t.Fatalf("conflict: %+v %v", m, err)
	}
	if gitxtest.Git(t, root, "rev-parse", "HEAD") != head || gitxtest.Git(t, root, "status", "--porcelain") != "" {
		t.Fatal("the dry run changed the checkout")
	}
	if _, err := DryMerge(ctx, root, "main", "lazy/none"); err == nil {
		t.Fatal("a missing branch merged")
	}
}
