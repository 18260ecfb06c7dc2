package gitx_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"lazy/gitx"
	"lazy/gitx/gitxtest"
)

// TestCombine: each merge method makes the commit it promises from a task
// branch behind its parent, moves no ref, and a conflict leaves nothing.
func TestCombine(t *testing.T) {
	ctx := context.Background()
	git := func(dir string, args ...string) string { return strings.TrimSpace(gitxtest.Git(t, dir, args...)) }
	setup := func(t *testing.T, conflict bool) (root, parent, head string) {
		root = gitxtest.NewRepo(t, map[string]string{"a.txt": "a\n"})
		git(root, "checkout", "-q", "-b", "lazy/x")
		gitxtest.Commit(t, root, "x one", map[string]string{"x1.txt": "1\n"})
		gitxtest.Commit(t, root, "x two", map[string]string{"x2.txt": "2\n", "a.txt": map[bool]string{true: "x\n", false: "a\n"}[conflict]})
		git(root, "checkout", "-q", "main")
		gitxtest.Commit(t, root, "main moves", map[string]string{"m.txt": "m\n", "a.txt": map[bool]string{true: "m\n", false: "a\n"}[conflict]})
		return root, git(root, "rev-parse", "main"), git(root, "rev-parse", "lazy/x")
	}
	for _, tc := range []struct {
		method  string
		parents func(parent, head string) string
		count   string // commits parent..result
	}{
		{gitx.MethodMerge, func(p, h string) string { return p + " " + h }, "3"},
		{gitx.MethodSquash, func(p, _ string) string { return p }, "1"},
		{gitx.MethodRebase, nil, "2"},
	} {
		t.Run(tc.method, func(t *testing.T) {
			root, parent, head := setup(t, false)
			got, err := gitx.Combine(ctx, root, "main", head, tc.method, "the title\n\nthe reason\n")
			if err != nil {
				t.Fatal(err)
			}
			if git(root, "rev-parse", "main") != parent || git(root, "rev-parse", "lazy/x") != head {
				t.Fatal("Combine moved a ref")
			}
			if n := git(root, "rev-list", "--count", parent+".."+got); n != tc.count {
				t.Errorf("got %s commits over the parent, want %s", n, tc.count)
			}
			if tc.parents != nil {
				if p := git(root, "log", "-1", "--format=%P", got); p != tc.parents(parent, head) {
					t.Errorf("parents %q, want %q", p, tc.parents(parent, head))
				}
			} else if m := git(root, "rev-list", "--merges", parent+".."+got); m != "" || git(root, "log", "--format=%s", parent+".."+got) != "x two\nx one" {
				t.Errorf("rebase is not the task's commits in a line: %s", git(root, "log", "--format=%s %P", parent+".."+got))
			}
			if files := git(root, "ls-tree", "--name-only", got); files != "a.txt\nm.txt\nx1.txt\nx2.txt" {
				t.Errorf("tree: %q", files)
			}
			if wts := git(root, "worktree", "list"); strings.Contains(wts, "lazy-rebase-") {
				t.Errorf("a worktree is left: %s", wts)
			}
		})
	}
	t.Run("conflicts", func(t *testing.T) {
		root, parent, head := setup(t, true)
		var ce *gitx.ConflictError
		if _, err := gitx.Combine(ctx, root, "main", head, gitx.MethodMerge, "m"); !errors.As(err, &ce) || strings.Join(ce.Files, ",") != "a.txt" {
			t.Errorf("merge: %v", err)
		}
		if _, err := gitx.Combine(ctx, root, "main", head, gitx.MethodSquash, "m"); !errors.As(err, &ce) {
			t.Errorf("squash: %v", err)
		}
		var rc *gitx.RebaseConflictError
		if _, err := gitx.Combine(ctx, root, "main", head, gitx.MethodRebase, "m"); !errors.As(err, &rc) || strings.Join(rc.Files, ",") != "a.txt" {
			t.Errorf("rebase: %v", err)
		}
		if git(root, "rev-parse", "main") != parent || git(root, "status", "--porcelain") != "" || strings.Contains(git(root, "worktree", "list"), "lazy-rebase-") {
			t.Error("a conflict left something behind")
		}
		if _, err := gitx.Combine(ctx, root, "main", head, "octopus", "m"); err == nil || !strings.Contains(err.Error(), "merge, squash, rebase") {
			t.Errorf("a bad method: %v", err)
		}
	})
}
