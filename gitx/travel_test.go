package gitx

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"lazy/gitx/gitxtest"
)

// TestTravel: Arrive makes a task's worktree from the remote in another
// clone, Depart sends its new commit back, and Fetch brings only the
// branches named (one the remote lacks is skipped).
func TestTravel(t *testing.T) {
	ctx := context.Background()
	a, remote := withRemote(t)
	newTask(t, a, "t")
	gitxtest.Git(t, a, "branch", "lazy/other", "main")
	if err := Depart(ctx, a, "origin", "lazy/t"); err != nil {
		t.Fatal(err)
	}
	if err := Depart(ctx, a, "origin", "lazy/other"); err != nil {
		t.Fatal(err)
	}
	b := filepath.Join(t.TempDir(), "b")
	gitxtest.Git(t, a, "clone", "-q", remote, b)
	wt := filepath.Join(t.TempDir(), "worktrees", "t")
	if err := Arrive(ctx, b, "origin", wt, "lazy/t", "main"); err != nil {
		t.Fatal(err)
	}
	agentCommit(t, TaskRepo{Project: b, Worktree: wt, Branch: "lazy/t", Parent: "main"}, "work on b", map[string]string{"b.txt": "b\n"})
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
	mine, _ := RevParse(ctx, b, "lazy/t")
	if theirs != mine {
		t.Errorf("a sees %s of lazy/t, b made %s", theirs, mine)
	}
}

// TestTravelRunsLittleGit: a Fetch of what the clone has already runs no
// git fetch, and a Depart of what the remote has runs no push, so the cost
// of a job's travel does not grow with the clone's refs; a branch deleted
// on the remote is sent again.
func TestTravelRunsLittleGit(t *testing.T) {
	ctx := context.Background()
	a, remote := withRemote(t)
	tr := newTask(t, a, "t")
	wt := tr.Worktree
	trace := filepath.Join(t.TempDir(), "trace")
	t.Setenv("GIT_TRACE2_EVENT", trace)
	runs := func(sub string) int {
		raw, _ := os.ReadFile(trace)
		_ = os.Remove(trace)
		n := 0
		for _, line := range strings.Split(string(raw), "\n") {
			var e struct {
				Event string   `json:"event"`
				Argv  []string `json:"argv"`
			}
			if json.Unmarshal([]byte(line), &e) == nil && e.Event == "start" && slices.Contains(e.Argv, sub) && !slices.Contains(e.Argv, "ls-remote") {
				n++
			}
		}
		return n
	}
	if err := Depart(ctx, a, "origin", "lazy/t"); err != nil {
		t.Fatal(err)
	}
	if n := runs("push"); n != 1 {
		t.Fatalf("the first Depart ran %d pushes, want 1", n)
	}
	if err := Depart(ctx, a, "origin", "lazy/t"); err != nil {
		t.Fatal(err)
	}
	if n := runs("push"); n != 0 {
		t.Errorf("a Depart with nothing new ran %d pushes", n)
	}
	if err := Arrive(ctx, a, "origin", wt, "lazy/t", "main"); err != nil {
		t.Fatal(err)
	}
	if n := runs("fetch"); n != 1 {
		t.Errorf("the first Arrive ran %d fetches, want 1 (main was never fetched)", n)
	}
	if err := Arrive(ctx, a, "origin", wt, "lazy/t", "main"); err != nil {
		t.Fatal(err)
	}
	if n := runs("fetch"); n != 0 {
		t.Errorf("an Arrive with nothing new on the remote ran %d fetches", n)
	}
	agentCommit(t, tr, "more", map[string]string{"m.txt": "m\n"})
	if err := Depart(ctx, a, "origin", "lazy/t"); err != nil {
		t.Fatal(err)
	}
	if n := runs("push"); n != 1 {
		t.Errorf("a Depart of a new commit ran %d pushes, want 1", n)
	}
	// deleted on the remote: the next look forgets it, the next Depart sends it
	gitxtest.Git(t, remote, "update-ref", "-d", "refs/heads/lazy/t")
	if err := Fetch(ctx, a, "origin", "lazy/t", "main"); err != nil {
		t.Fatal(err)
	}
	if err := Depart(ctx, a, "origin", "lazy/t"); err != nil {
		t.Fatal(err)
	}
	head, _ := RevParse(ctx, a, "lazy/t")
	if got := strings.TrimSpace(gitxtest.Git(t, remote, "rev-parse", "refs/heads/lazy/t")); got != head {
		t.Errorf("the remote has %s of lazy/t, want %s", got, head)
	}
}

// withRemote is a repository with one commit on main and a bare clone of it
// as its remote origin.
func withRemote(t *testing.T) (repo, remote string) {
	repo = gitxtest.NewRepo(t, map[string]string{"a.go": "package a\n"})
	remote = filepath.Join(t.TempDir(), "r.git")
	gitxtest.Git(t, repo, "clone", "-q", "--bare", repo, remote)
	gitxtest.Git(t, repo, "remote", "add", "origin", remote)
	return repo, remote
}
