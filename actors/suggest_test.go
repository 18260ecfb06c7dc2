package actors

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"lazy/gitx"
	"lazy/gitx/gitxtest"
	"lazy/review"
	"lazy/task"
)

// TestApplySuggestion: the task actor commits a reviewer's suggestion to
// the task branch as the reviewer, refuses a head other than the one the
// reviewer saw, takes the applied comment out of the queue, and refuses
// (busy) while a work turn owns the worktree.
func TestApplySuggestion(t *testing.T) {
	agentRun := &scripted{gate: make(chan struct{})}
	r := newRigWith(t, "", nil, agentRun, "session-1")
	ctx := context.Background()
	r.commit(map[string]string{"a.go": "package a\n\nfunc A() int { return 2 }\n"})
	head, _ := gitx.RevParse(ctx, r.root, "refs/heads/lazy/t")
	post := func(body string) *review.ReviewComment {
		t.Helper()
		res, err := r.ask(&PostReviewComment{Comment: review.ReviewComment{Intent: review.Comment, Body: body,
			File: "a.go", Line: 3, Side: review.New, LineText: "func A() int { return 2 }"}})
		if err != nil {
			t.Fatal(err)
		}
		return res.(*review.ReviewComment)
	}
	c := post("Three, please.\n```suggestion\nfunc A() int { return 3 }\n```")
	apply := func(id, head string) (any, error) {
		return r.ask(&ApplySuggestion{ID: id, Head: head, AuthorName: "Rita Reviewer", AuthorEmail: "rita@example.com"})
	}

	_, err := apply(c.ID, strings.Repeat("1", 40))
	var rule *review.RuleError
	if !errors.As(err, &rule) || !strings.Contains(rule.Reason, "the branch moved since you reviewed it") {
		t.Fatalf("another head: got %v, want the head rule's refusal", err)
	}
	res, err := apply(c.ID, head)
	if err != nil {
		t.Fatal(err)
	}
	done := res.(*SuggestionApplied)
	t.Logf("notice: %s", done.Notice)
	if now, _ := gitx.RevParse(ctx, r.root, "refs/heads/lazy/t"); now != done.Commit || now == head {
		t.Fatalf("lazy/t at %s, reply says %s (before %s)", now, done.Commit, head)
	}
	if got := strings.TrimSpace(gitxtest.Git(t, r.root, "log", "-1", "--format=%an <%ae>", done.Commit)); got != "Rita Reviewer <rita@example.com>" {
		t.Errorf("author %q, want the reviewer", got)
	}
	if got := gitxtest.Git(t, r.root, "show", done.Commit+":a.go"); got != "package a\n\nfunc A() int { return 3 }\n" {
		t.Errorf("a.go at the commit: %q", got)
	}
	if saved, _ := r.st.GetReviewComment(ctx, c.ID); saved == nil || !saved.IsWithdrawn() {
		t.Errorf("the applied suggestion is still queued for the agent: %+v", saved)
	}

	// a turn owns the worktree: no apply beneath it
	c2 := post("```suggestion\nfunc A() int { return 4 }\n```")
	if _, err := r.ask(&Unblock{Message: "go on"}); err != nil {
		t.Fatal(err)
	}
	_, err = apply(c2.ID, done.Commit)
	var busy *BusyError
	if !errors.As(err, &busy) {
		t.Fatalf("apply during a turn: got %v, want busy", err)
	}
	close(agentRun.gate)
	waitTurns(t, r, 1)
	runs := agentRun.recorded()
	if len(runs) != 1 || !strings.Contains(runs[0].prompt, "```\nfunc A() int { return 4 }\n```") || strings.Contains(runs[0].prompt, "return 3") {
		t.Fatalf("the turn's prompt should carry the second suggestion verbatim and not the applied one:\n%+v", runs)
	}
}

// TestPostTriedAgainIsOneComment: a post the daemon sends again with the
// same id (its first try taken, the answer lost: a cluster call whose host
// died or timed out) is the comment stored already — one row, one ask
// queued, the same comment answered — never a second one. An operator saw
// a comment stored and delivered twice after a kill -9 of the other member.
func TestPostTriedAgainIsOneComment(t *testing.T) {
	r := newRig(t, "", nil)
	r.commit(map[string]string{"a.go": "package a\n\nvar Once = 1\n"})
	c := review.ReviewComment{ID: task.NewID(time.Now()), Intent: review.Comment, Body: "once, please",
		File: "a.go", Line: 1, Side: review.New, LineText: "package a"}
	var ids []string
	for range 3 {
		res, err := r.ask(&PostReviewComment{Comment: c})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.(*review.ReviewComment).ID)
	}
	all, err := r.st.ListReviewComments(context.Background(), r.tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, x := range all {
		if x.Body == "once, please" {
			n++
		}
	}
	if n != 1 || ids[0] != c.ID || ids[1] != c.ID || ids[2] != c.ID {
		t.Fatalf("a post sent three times with one id: %d comments stored, answered %v; want one, %s", n, ids, c.ID)
	}
}

// TestUnblockTriedAgainIsOneTurn: an unblock the daemon sends again with the
// same turn id (a cluster call tried again after its answer was lost) is
// the turn queued already, never a second one.
func TestUnblockTriedAgainIsOneTurn(t *testing.T) {
	r := newRigWith(t, "", nil, &scripted{gate: make(chan struct{})}, "session-1")
	id := task.NewID(time.Now())
	var got []string
	for range 3 {
		res, err := r.ask(&Unblock{Message: "go on", ID: id})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, res.(*WorkQueued).Turn.ID)
	}
	turns, err := r.st.ListTurns(context.Background(), r.tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tu := range turns {
		if tu.Trigger == "unblock" {
			n++
		}
	}
	if n != 1 || got[0] != id || got[1] != id || got[2] != id {
		t.Fatalf("an unblock sent three times with one id: %d turns queued, answered %v; want one, %s", n, got, id)
	}
}
