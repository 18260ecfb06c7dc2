package actors

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"lazy/api"
	"lazy/review"
	"lazy/store"
	"lazy/task"
)

// TestHeldWhileAnotherMemberRuns: an actor that finds a turn marked running
// while another member still runs it (the task moved here mid-turn) starts
// nothing, does not record the turn cut off and saves no stale task row;
// once nobody runs it, it takes the queue from the store.
func TestHeldWhileAnotherMemberRuns(t *testing.T) {
	gate := make(chan struct{})
	close(gate)
	l := &scripted{gate: gate}
	r := newRigWith(t, "", nil, l, "session-1")
	ctx := context.Background()
	now := time.Now().UTC()
	tu := &store.Turn{ID: task.NewID(now), TaskID: r.tk.ID, Kind: store.TurnAsk, Trigger: "ask", Prompt: "an earlier question", Status: store.TurnRunning, QueuedAt: now, StartedAt: &now}
	var busy atomic.Bool
	busy.Store(true)
	r.respawn(func(h *TaskHost) {
		// the other member's turn, as the store shows it (written while no
		// actor of the task runs here)
		if err := r.st.CreateTurn(ctx, tu); err != nil {
			t.Fatal(err)
		}
		h.RunningElsewhere = func(string) bool { return busy.Load() }
	})

	res, err := r.ask(&PostReviewComment{Comment: review.ReviewComment{Intent: review.Ask, Body: "why?", File: "a.go", Line: 1, Side: review.New, LineText: "package a"}})
	if err != nil {
		t.Fatal(err)
	}
	askID := res.(*review.ReviewComment).ID
	time.Sleep(1500 * time.Millisecond) // a recheck or more
	if n := len(l.recorded()); n != 0 {
		t.Fatalf("the held actor ran %d turns while another member ran one: %+v", n, l.recorded())
	}
	if got := turnOf(t, r, tu.ID); got.Status != store.TurnRunning {
		t.Fatalf("the other member's turn was recorded %s", got.Status)
	}
	// the other member finishes: its turn done, the task's session moved on
	got := turnOf(t, r, tu.ID)
	got.Status = store.TurnDone
	if err := r.st.SaveTurn(ctx, got); err != nil {
		t.Fatal(err)
	}
	tk, _ := r.st.GetTask(ctx, r.tk.ID)
	tk.SessionID = "session-2"
	if err := r.st.SaveTask(ctx, tk); err != nil {
		t.Fatal(err)
	}
	// a rename while still held acts on the row as it is now
	if _, err := r.ask(&Rename{Title: "renamed while held"}); err != nil {
		t.Fatal(err)
	}
	if tk, _ := r.st.GetTask(ctx, r.tk.ID); tk.SessionID != "session-2" || tk.Title != "renamed while held" {
		t.Fatalf("after a rename while held: session %q, title %q (a stale row was saved)", tk.SessionID, tk.Title)
	}
	busy.Store(false)
	if _, err := r.ask(&Wake{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, _ := r.st.GetReviewComment(ctx, askID); c.AskState == review.AskAnswered {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the queued ask never ran after the other member finished")
		}
	}
	if got := turnOf(t, r, tu.ID); got.Status != store.TurnDone {
		t.Errorf("the other member's turn ended %s, want done as it left it", got.Status)
	}
	if runs := l.recorded(); len(runs) != 1 || !runs[0].ask {
		t.Errorf("runs after the hold: %+v, want the one ask", runs)
	}
}

// TestDrainFinishesTheRunningJob: a task moved away while its actor runs an
// ask: the ask finishes and is answered here, nothing queued behind it
// starts, the new host is woken and the actor stops.
func TestDrainFinishesTheRunningJob(t *testing.T) {
	l := &scripted{gate: make(chan struct{})}
	r := newRigWith(t, "", nil, l, "session-1")
	handed := make(chan string, 1)
	r.respawn(func(h *TaskHost) { h.Handoff = func(id string) { handed <- id } })
	post := func(body string) string {
		res, err := r.ask(&PostReviewComment{Comment: review.ReviewComment{Intent: review.Ask, Body: body, File: "a.go", Line: 1, Side: review.New, LineText: "package a"}})
		if err != nil {
			t.Fatal(err)
		}
		return res.(*review.ReviewComment).ID
	}
	first := post("first?")
	second := post("second?")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if h, err := r.ask(&GetHealth{}); err == nil && h.(api.ActorHealth).Running != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first ask never started")
		}
	}
	r.sys.Root.Send(r.pid, &Drain{})
	close(l.gate)
	select {
	case id := <-handed:
		if id != r.tk.ID {
			t.Fatalf("handed over %s", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the drained actor never handed the task over")
	}
	ctx := context.Background()
	if c, _ := r.st.GetReviewComment(ctx, first); c.AskState != review.AskAnswered {
		t.Errorf("the running ask ended %s, want answered here", c.AskState)
	}
	time.Sleep(200 * time.Millisecond)
	if c, _ := r.st.GetReviewComment(ctx, second); c.AskState != review.AskPending {
		t.Errorf("the queued ask is %s, want pending for the new host", c.AskState)
	}
	if n := len(l.recorded()); n != 1 {
		t.Errorf("the drained actor ran %d turns, want 1", n)
	}
	if _, err := r.sys.Root.RequestFuture(r.pid, &GetHealth{}, time.Second).Result(); err == nil {
		t.Error("the drained actor still answers")
	}
}

func turnOf(t *testing.T, r *rig, id string) *store.Turn {
	t.Helper()
	turns, err := r.st.ListTurns(context.Background(), r.tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i := range turns {
		if turns[i].ID == id {
			return &turns[i]
		}
	}
	t.Fatalf("no turn %s", id)
	return nil
}
