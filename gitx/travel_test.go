package gitx

import (
	"context"
	"path/filepath"
	"testing"

	"lazy/gitx/gitxtest"
)

// TestTravel: Arrive makes a task's worktree from the remote in another
// clone, Depart sends its new commit back, and Fetch brings only the
// branches named (one the remote lacks is skipped).
func TestTravel(t *testing.T) {
	ctx := context.Background()
	a := gitxtest.NewRepo(t, map[string]string{"a.go": "package a\n"})
	remote := filepath.Join(t.TempDir(), "r.git")
	gitxtest.Git(t, a, "clone", "-q", "--bare", a, remote)
	gitxtest.Git(t, a, "remote", "add", "origin", remote)
	if err := AddWorktree(ctx, a, filepath.Join(t.TempDir(), "wa"), "lazy/t", "main"); err != nil {
		t.Fatal(err)
	}
	gitxtest.Git(t, a, "branch", "lazy/other", "main")
	if err := Depart(ctx, a, "origin", "lazy/t"); err != nil {
		t.Fatal(err)
	}
	if err := Depart(ctx, a, "origin", "lazy/other"); err != nil {
		t.Fatal(err)
	}
	b := filepath.Join(t.TempDir(), "b")
	gitxtest.Git(t, a, "clone", "-q", remote, b)
	wt := filepath.Join(t.TempDir(), "wb")
	if err := Arrive(ctx, b, "origin", wt, "lazy/t", "main"); err != nil {
		t.Fatal(err)
	}
	gitxtest.Commit(t, wt, "work on b", map[string]string{"b.txt": "b\n"})
	if err := Depart(ctx, b, "origin", "lazy/t"); err != nil {
		t.Fatal(err)
	}
	// a fetches only what it names; a missing name is no error
	gitxtest.Git(t, a, "update-ref", "-d", "refs/remotes/origin/lazy/other")
	if err := Fetch(ctx, a, "origin", "lazy/t", "lazy/nowhere"); err != nil {
		t.Fatal(err)
	}
	if _, err := RevParse(ctx, a, "refs/remotes/origin/lazy/other"); err == nil {
		t.Error("a branch not named was fetched")
	}
	theirs, _ := RevParse(ctx, a, "refs/remotes/origin/lazy/t")
	mine, _ := RevParse(ctx, wt, "HEAD")
	if theirs != mine {
		t.Errorf("a sees %s of lazy/t, b made %s", theirs, mine)
	}
}
