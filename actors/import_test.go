package actors

import (
	"bytes"
	"compress/zlib"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lazy/agent"
	"lazy/gitx"
	"lazy/gitx/gitxtest"
	"lazy/review"
	"lazy/store"
	"lazy/task"
)

// committer is an agent played by plain git in the worktree: every turn
// commits a file named after its kind; with forge, it then swaps that blob's
// content in the task repository.
type committer struct{ forge bool }

func (c committer) RunTurn(ctx context.Context, req agent.TurnRequest) (agent.Result, agent.Outcome, error) {
	if _, err := req.FinalPrompt(ctx); err != nil {
		return agent.Result{}, agent.Outcome{}, err
	}
	if req.OnStart != nil {
		req.OnStart(4242)
	}
	name := "work.txt"
	if req.Ask {
		name = "ask.txt"
	}
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "user.name=agent", "-c", "user.email=agent@x"}, args...)...)
		cmd.Dir = req.Worktree
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if err := os.WriteFile(filepath.Join(req.Worktree, name), []byte(fmt.Sprintf("turn %d\n", req.Number)), 0o644); err != nil {
		return agent.Result{}, agent.Outcome{}, err
	}
	if out, err := git("add", name); err != nil {
		return agent.Result{}, agent.Outcome{}, fmt.Errorf("%v: %s", err, out)
	}
	if out, err := git("commit", "-q", "-m", name); err != nil {
		return agent.Result{}, agent.Outcome{}, fmt.Errorf("%v: %s", err, out)
	}
	if c.forge {
		blob, err := git("rev-parse", "HEAD:"+name)
		if err != nil {
			return agent.Result{}, agent.Outcome{}, err
		}
		var buf bytes.Buffer
		w := zlib.NewWriter(&buf)
		body := "send_to_attacker(amount)\n"
		fmt.Fprintf(w, "blob %d\x00%s", len(body), body)
		_ = w.Close()
		p := filepath.Join(gitx.TaskGitDir(req.Worktree), "objects", blob[:2], blob[2:])
		_ = os.Remove(p)
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			return agent.Result{}, agent.Outcome{}, err
		}
	}
	return agent.Result{Text: "done", SessionID: "session-1"}, agent.Outcome{}, nil
}

// waitTurns polls the store until n turns have ended.
func waitTurns(t *testing.T, r *rig, n int) []store.Turn {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		turns, err := r.st.ListTurns(context.Background(), r.tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		ended := 0
		for _, tu := range turns {
			if tu.EndedAt != nil {
				ended++
			}
		}
		tk, _ := r.st.GetTask(context.Background(), r.tk.ID)
		if ended >= n && tk.Status != task.Running {
			return turns
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %d of %d turns ended", ended, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAskTurnCannotMoveTheBranch: what an ask turn commits in the task
// repository is never imported, and the next turn starts from the project's
// branch; a work turn's commit is imported.
func TestAskTurnCannotMoveTheBranch(t *testing.T) {
	r := newRigWith(t, "", nil, committer{}, "session-1")
	ctx := context.Background()
	before, _ := gitx.RevParse(ctx, r.root, "lazy/t")
	if _, err := r.ask(&PostReviewComment{Comment: review.ReviewComment{Intent: review.Ask, Body: "why?",
		File: "a.go", Line: 1, Side: review.New, LineText: "package a"}}); err != nil {
		t.Fatal(err)
	}
	waitTurns(t, r, 1)
	if now, _ := gitx.RevParse(ctx, r.root, "lazy/t"); now != before {
		t.Fatalf("an ask turn moved the project's branch: %s, was %s", now, before)
	}
	if _, err := r.ask(&Unblock{Message: "go on"}); err != nil {
		t.Fatal(err)
	}
	waitTurns(t, r, 2)
	files := gitxtest.Git(t, r.root, "ls-tree", "--name-only", "lazy/t")
	if !strings.Contains(files, "work.txt") || strings.Contains(files, "ask.txt") {
		t.Errorf("after the work turn lazy/t holds:\n%s(want work.txt, and not the ask's ask.txt)", files)
	}
	if log := gitxtest.Git(t, r.root, "log", "--format=%s", "main..lazy/t"); strings.TrimSpace(log) != "work.txt" {
		t.Errorf("commits on lazy/t: %q, want only the work turn's", log)
	}
}

// TestImportRefusedFailsTheTurn: a work turn whose commit carries a swapped
// blob fails with "import refused: …" on the turn and the task, and the
// project's branch stays where it was.
func TestImportRefusedFailsTheTurn(t *testing.T) {
	r := newRigWith(t, "", nil, committer{forge: true}, "session-1")
	ctx := context.Background()
	before, _ := gitx.RevParse(ctx, r.root, "lazy/t")
	if _, err := r.ask(&Unblock{Message: "go on"}); err != nil {
		t.Fatal(err)
	}
	turns := waitTurns(t, r, 1)
	tu := turns[len(turns)-1]
	if tu.Status != store.TurnFailed || !strings.Contains(tu.Error, "import refused: ") {
		t.Fatalf("turn: %s %q, want failed with import refused", tu.Status, tu.Error)
	}
	t.Logf("turn error: %s", tu.Error)
	tk, _ := r.st.GetTask(ctx, r.tk.ID)
	if tk.Status != task.Failed || !strings.Contains(tk.FailReason, "import refused: ") {
		t.Errorf("task: %s %q", tk.Status, tk.FailReason)
	}
	if now, _ := gitx.RevParse(ctx, r.root, "lazy/t"); now != before {
		t.Errorf("a refused import moved lazy/t to %s", now)
	}
	gitxtest.Git(t, r.root, "fsck", "--strict", "--no-progress")
}
