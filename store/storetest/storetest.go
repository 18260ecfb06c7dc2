// Package storetest is the one contract every store.Store implementation
// passes: sql, file and remote run the same tests.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"lazy/review"
	"lazy/store"
	"lazy/task"
)

// Opener opens (or reopens) the store kept in dir.
type Opener func(t *testing.T, dir string) store.Store

var ctx = context.Background()

// NewTask returns an unsaved task row.
func NewTask(code string) *store.Task {
	now := time.Now().UTC().Truncate(time.Millisecond)
	t := &store.Task{ID: task.NewID(now), Title: "t", Prompt: "p", Status: task.Blocked, Branch: "lazy/x", Parent: "main", CreatedAt: now, UpdatedAt: now, LastActivity: now}
	if code != "" {
		t.Code = &code
	}
	return t
}

func newComment(taskID, thread string, intent review.Intent, at time.Time) *review.ReviewComment {
	c := &review.ReviewComment{ID: task.NewID(at), TaskID: taskID, ThreadID: thread, File: "a.go", Line: 3, Side: review.New, LineText: "x := 1",
		Intent: intent, Body: "body " + thread, Actor: review.Human, CreatedAt: at.UTC().Truncate(time.Millisecond)}
	if intent == review.Ask {
		c.AskState = review.AskPending
	} else {
		c.DeliveryState = review.PendingDelivery
	}
	return c
}

// Run runs the whole contract.
func Run(t *testing.T, open Opener) {
	t.Run("Tasks", func(t *testing.T) { testTasks(t, open) })
	t.Run("Turns", func(t *testing.T) { testTurns(t, open) })
	t.Run("ReviewComments", func(t *testing.T) { testReviewComments(t, open) })
	t.Run("Approvals", func(t *testing.T) { testApprovals(t, open) })
	t.Run("Usage", func(t *testing.T) { testUsage(t, open) })
	t.Run("Egress", func(t *testing.T) { testEgress(t, open) })
	t.Run("Transcripts", func(t *testing.T) { testTranscripts(t, open) })
	t.Run("MarkLaunched", func(t *testing.T) { testMarkLaunched(t, open) })
	t.Run("AnswerAsk", func(t *testing.T) { testAnswerAsk(t, open) })
	t.Run("PassphraseTries", func(t *testing.T) { testPassphraseTries(t, open) })
	t.Run("ReviewState", func(t *testing.T) { testReviewState(t, open) })
	t.Run("Durable", func(t *testing.T) { testDurable(t, open) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, open) })
	t.Run("Leases", func(t *testing.T) { testLeases(t, open) })
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func testTasks(t *testing.T, open Opener) {
	s := open(t, t.TempDir())
	a := NewTask("alpha")
	must(t, s.CreateTask(ctx, a))
	if err := s.CreateTask(ctx, NewTask("alpha")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate code: got %v, want ErrConflict", err)
	}
	for i := 1; i <= 2; i++ {
		b := NewTask("")
		b.CreatedAt = a.CreatedAt.Add(time.Duration(i) * time.Millisecond)
		must(t, s.CreateTask(ctx, b))
	}
	if _, err := s.GetTask(ctx, "0190ffff000070008000000000000000"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing task: got %v, want ErrNotFound", err)
	}
	got, err := s.GetTask(ctx, a.ID)
	must(t, err)
	if got.CodeString() != "alpha" || got.Status != task.Blocked || !got.CreatedAt.Equal(a.CreatedAt) {
		t.Errorf("round trip: %+v", got)
	}
	got.Status, got.SessionID, got.Turns, got.Asks, got.Setups = task.Running, "S1", 2, 3, 1
	got.Driver, got.AgentCommand = "script", "lazy script-agent"
	must(t, s.SaveTask(ctx, got))
	again, _ := s.GetTask(ctx, a.ID)
	if again.Status != task.Running || again.SessionID != "S1" || again.Turns != 2 || again.Asks != 3 || again.Setups != 1 ||
		again.Driver != "script" || again.AgentCommand != "lazy script-agent" {
		t.Errorf("save: %+v", again)
	}
	all, err := s.ListTasks(ctx)
	must(t, err)
	if len(all) != 3 || all[0].ID != a.ID {
		t.Errorf("list: %d tasks, first %s", len(all), all[0].ID)
	}
	// an ended task keeps the commits its diff runs between
	if again.EndBase != "" || again.EndHead != "" {
		t.Errorf("a live task has end commits: %q %q", again.EndBase, again.EndHead)
	}
	ended := time.Now().UTC().Truncate(time.Millisecond)
	again.Status, again.EndedAt = task.Accepted, &ended
	again.EndBase, again.EndHead = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	must(t, s.SaveTask(ctx, again))
	got, err = s.GetTask(ctx, a.ID)
	must(t, err)
	if got.EndBase != again.EndBase || got.EndHead != again.EndHead || got.Status != task.Accepted || got.EndedAt == nil || !got.EndedAt.Equal(ended) {
		t.Errorf("ended task: got base %q head %q status %s ended %v, want %q %q accepted %v", got.EndBase, got.EndHead, got.Status, got.EndedAt, again.EndBase, again.EndHead, ended)
	}
}

func testTurns(t *testing.T, open Opener) {
	s := open(t, t.TempDir())
	a := NewTask("")
	must(t, s.CreateTask(ctx, a))
	for i := 1; i <= 3; i++ {
		tu := &store.Turn{ID: task.NewID(time.Now()), TaskID: a.ID, Kind: store.TurnWork, Status: store.TurnQueued, Prompt: fmt.Sprint(i), QueuedAt: time.Now().UTC()}
		must(t, s.CreateTurn(ctx, tu))
		if tu.Number != i {
			t.Errorf("number: got %d, want %d", tu.Number, i)
		}
	}
	// an ask and a setup take the next record numbers, and numbers of
	// their own kind: ask 1, setup 1; the next work turn is work turn 4
	for _, k := range []string{store.TurnAsk, store.TurnSetup, store.TurnWork} {
		tu := &store.Turn{ID: task.NewID(time.Now()), TaskID: a.ID, Kind: k, Status: store.TurnDone, QueuedAt: time.Now().UTC(), Driver: "script: lazy script-agent", Notice: "n"}
		must(t, s.CreateTurn(ctx, tu))
		want := 1
		if k == store.TurnWork {
			want = 4
		}
		if tu.Seq != want {
			t.Errorf("%s seq: got %d, want %d (record %d)", k, tu.Seq, want, tu.Number)
		}
	}
	turns, err := s.ListTurns(ctx, a.ID)
	must(t, err)
	if len(turns) != 6 || turns[2].Prompt != "3" || turns[5].Seq != 4 || turns[5].Number != 6 || turns[5].Driver != "script: lazy script-agent" || turns[5].Notice != "n" {
		t.Fatalf("list turns: %+v", turns)
	}
	if l := turns[5].Label(); l != "work turn 4" {
		t.Errorf("label: got %q, want work turn 4", l)
	}
	turns[0].Status, turns[0].Result = store.TurnDone, "ok"
	must(t, s.SaveTurn(ctx, &turns[0]))
	q, err := s.TurnsInState(ctx, store.TurnQueued)
	must(t, err)
	if len(q) != 2 || q[0].Number != 2 {
		t.Errorf("queued: %+v", q)
	}
	must(t, s.AddComment(ctx, &store.Comment{ID: task.NewID(time.Now()), TaskID: a.ID, Body: "hi", CreatedAt: time.Now().UTC()}))
	cs, err := s.ListComments(ctx, a.ID)
	must(t, err)
	if len(cs) != 1 || cs[0].Body != "hi" {
		t.Errorf("comments: %+v", cs)
	}
}

func testReviewComments(t *testing.T, open Opener) {
	s := open(t, t.TempDir())
	a := NewTask("")
	must(t, s.CreateTask(ctx, a))
	base := time.Now()
	c1 := newComment(a.ID, "t1", review.Comment, base)
	a1 := newComment(a.ID, "t2", review.Ask, base.Add(time.Millisecond))
	must(t, s.AddReviewComment(ctx, c1))
	must(t, s.AddReviewComment(ctx, a1))
	if err := s.AddReviewComment(ctx, c1); !errors.Is(err, store.ErrConflict) {
		t.Errorf("same id twice: got %v, want ErrConflict", err)
	}
	// only state fields change; words are immutable
	now := time.Now().UTC().Truncate(time.Millisecond)
	edited := *c1
	edited.Body, edited.File, edited.WithdrawnAt = "EDITED", "b.go", &now
	must(t, s.SaveReviewComment(ctx, &edited))
	got, err := s.GetReviewComment(ctx, c1.ID)
	must(t, err)
	if got.Body != c1.Body || got.File != "a.go" || got.WithdrawnAt == nil || !got.WithdrawnAt.Equal(now) {
		t.Errorf("save must change state only: %+v", got)
	}
	a1.AskState, a1.AskError = review.AskFailed, "busy"
	must(t, s.SaveReviewComment(ctx, a1))
	if _, err := s.GetReviewComment(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing comment: %v", err)
	}
	ghost := newComment(a.ID, "t9", review.Ask, base)
	if err := s.SaveReviewComment(ctx, ghost); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("saving an unknown comment: got %v, want ErrNotFound", err)
	}
	list, err := s.ListReviewComments(ctx, a.ID)
	must(t, err)
	if len(list) != 2 || list[0].ID != c1.ID || list[1].AskState != review.AskFailed || list[1].AskError != "busy" || list[0].LineText != "x := 1" {
		t.Errorf("list: %+v", list)
	}
	failed, err := s.AsksInState(ctx, review.AskFailed)
	must(t, err)
	if len(failed) != 1 || failed[0].ID != a1.ID {
		t.Errorf("asks failed: %+v", failed)
	}
	if pend, _ := s.AsksInState(ctx, review.AskPending); len(pend) != 0 {
		t.Errorf("asks pending: %+v", pend)
	}
}

func testApprovals(t *testing.T, open Opener) {
	s := open(t, t.TempDir())
	a := NewTask("")
	must(t, s.CreateTask(ctx, a))
	now := time.Now().UTC()
	must(t, s.AddApproval(ctx, &store.Approval{TaskID: a.ID, Path: ".github/ci.yml", Kind: store.ApprovalProtected, ApprovedAt: now}))
	must(t, s.AddApproval(ctx, &store.Approval{TaskID: a.ID, Path: ".github/ci.yml", Kind: store.ApprovalProtected, ApprovedAt: now}))
	must(t, s.AddApproval(ctx, &store.Approval{TaskID: a.ID, Path: ".github/ci.yml", Kind: store.ApprovalScope, ApprovedAt: now}))
	as, err := s.ListApprovals(ctx, a.ID)
	must(t, err)
	if len(as) != 2 {
		t.Errorf("approvals: %+v", as)
	}
}

func testUsage(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := open(t, dir)
	a := NewTask("")
	a.BudgetTokens = 5000
	must(t, s.CreateTask(ctx, a))
	t0 := time.Now().UTC()
	for i := 0; i < 3; i++ {
		must(t, s.AddUsage(ctx, &store.UsageCall{ID: task.NewID(t0), TaskID: a.ID, Turn: i + 1, Role: "fast", Status: 200,
			InputTokens: int64(100 * (i + 1)), OutputTokens: 7, CacheReadInputTokens: 3, At: t0.Add(time.Duration(i) * time.Second)}))
	}
	// a batch, as the daemon writes them: one write of several calls
	must(t, s.AddUsage(ctx, &store.UsageCall{ID: task.NewID(t0), TaskID: a.ID, Turn: 3, Status: 429, Refused: "budget_exceeded", At: t0.Add(5 * time.Second)},
		&store.UsageCall{ID: task.NewID(t0), TaskID: a.ID, Turn: 4, Status: 200, InputTokens: 9, ChargedTokens: 40, At: t0.Add(6 * time.Second)}))
	must(t, s.AddUsage(ctx)) // nothing to write
	// a row of several calls, as the daemon writes the calls of one batch
	many := store.UsageCall{ID: task.NewID(t0), TaskID: a.ID, Turn: 4, Role: "fast", Status: 200, InputTokens: 10, OutputTokens: 1, At: t0.Add(7 * time.Second)}
	many.Merge(store.UsageCall{InputTokens: 20, OutputTokens: 2, ChargedTokens: 50})
	many.Merge(store.UsageCall{InputTokens: 30, OutputTokens: 3, CacheCreationInputTokens: 4})
	must(t, s.AddUsage(ctx, &many))
	must(t, s.Close())
	s = open(t, dir) // durable
	us, err := s.ListUsage(ctx, a.ID)
	must(t, err)
	if len(us) != 6 || us[0].InputTokens != 100 || us[2].Turn != 3 || us[3].Refused != "budget_exceeded" || us[1].CacheReadInputTokens != 3 ||
		us[4].Turn != 4 || us[4].Charged() != 40 || us[0].Calls() != 1 || us[4].Calls() != 1 {
		t.Fatalf("usage: %+v", us)
	}
	// 11 + 50 (cut: its hold) + 33
	if m := us[5]; m.Calls() != 3 || m.InputTokens != 60 || m.OutputTokens != 6 || m.CacheCreationInputTokens != 4 || m.Charged() != 94 {
		t.Fatalf("a row of 3 calls read back as %+v (charged %d)", m, m.Charged())
	}
	got, err := s.GetTask(ctx, a.ID)
	must(t, err)
	if got.BudgetTokens != 5000 {
		t.Fatalf("budget %d", got.BudgetTokens)
	}
}

// testPassphraseTries: the wrong passphrases counted under a name are kept
// as written, apart from other names, across a reopen, forgotten at 0, and
// no concurrent update is lost.
func testPassphraseTries(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := open(t, dir)
	type tries struct {
		wrong int
		until time.Time
	}
	read := func(s store.Store, name string) tries {
		t.Helper()
		var got tries
		must(t, s.UpdatePassphraseTries(ctx, name, func(w int, u time.Time) (int, time.Time) {
			got = tries{w, u}
			return w, u
		}))
		return got
	}
	set := func(s store.Store, name string, w int, u time.Time) {
		t.Helper()
		must(t, s.UpdatePassphraseTries(ctx, name, func(int, time.Time) (int, time.Time) { return w, u }))
	}
	if got := read(s, "project"); got.wrong != 0 || !got.until.IsZero() {
		t.Fatalf("a name never counted: %+v, want 0 and the zero time", got)
	}
	until := time.Now().UTC().Add(time.Minute).Truncate(time.Second)
	set(s, "project", 4, until)
	set(s, "another", 1, time.Time{})
	if got := read(s, "project"); got.wrong != 4 || !got.until.Equal(until) {
		t.Fatalf("got %+v, want 4 until %s", got, until)
	}
	must(t, s.Close())
	s = open(t, dir)
	if got := read(s, "project"); got.wrong != 4 || !got.until.Equal(until) {
		t.Fatalf("after a reopen: got %+v, want 4 until %s", got, until)
	}
	if got := read(s, "another"); got.wrong != 1 || !got.until.IsZero() {
		t.Fatalf("another name: got %+v, want 1 and the zero time", got)
	}
	set(s, "project", 0, until)
	if got := read(s, "project"); got.wrong != 0 || !got.until.IsZero() {
		t.Fatalf("after 0: got %+v, want it forgotten", got)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				if err := s.UpdatePassphraseTries(ctx, "project", func(w int, u time.Time) (int, time.Time) { return w + 1, u }); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if got := read(s, "project"); got.wrong != 40 {
		t.Fatalf("after 40 concurrent increments: %d", got.wrong)
	}
}

func testEgress(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := open(t, dir)
	a := NewTask("")
	must(t, s.CreateTask(ctx, a))
	t0 := time.Now().UTC()
	must(t, s.AddEgress(ctx, &store.EgressCall{ID: task.NewID(t0), TaskID: a.ID, Turn: 1, Method: "CONNECT", Dest: "registry.test:443", Path: "registry.test:443",
		Status: 200, BytesUp: 517, BytesDown: 40960, Millis: 12, At: t0}))
	must(t, s.AddEgress(ctx, &store.EgressCall{ID: task.NewID(t0), TaskID: a.ID, Turn: 1, Method: "GET", Dest: "elsewhere.test:80", Path: "http://elsewhere.test:80/x",
		Status: 403, Refused: "egress_not_allowed", At: t0.Add(time.Second)}))
	must(t, s.Close())
	s = open(t, dir) // durable
	es, err := s.ListEgress(ctx, a.ID)
	must(t, err)
	if len(es) != 2 || es[0].BytesDown != 40960 || es[0].Dest != "registry.test:443" || es[1].Refused != "egress_not_allowed" || es[1].Path != "http://elsewhere.test:80/x" {
		t.Fatalf("egress: %+v", es)
	}
}

func testTranscripts(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := open(t, dir)
	a, b := NewTask(""), NewTask("")
	must(t, s.CreateTask(ctx, a))
	must(t, s.CreateTask(ctx, b))
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	must(t, s.SaveTranscript(ctx, &store.Transcript{TaskID: a.ID, Turn: 2, Body: `{"turn":2}`, At: t0}))
	must(t, s.SaveTranscript(ctx, &store.Transcript{TaskID: a.ID, Turn: 1, Body: `{"turn":1}`, At: t0}))
	must(t, s.SaveTranscript(ctx, &store.Transcript{TaskID: b.ID, Turn: 1, Body: `{"other":1}`, At: t0}))
	// a second save of a turn replaces the first
	must(t, s.SaveTranscript(ctx, &store.Transcript{TaskID: a.ID, Turn: 2, Body: `{"turn":2,"again":true}`, At: t0.Add(time.Second)}))
	must(t, s.Close())
	s = open(t, dir) // durable
	ts, err := s.ListTranscripts(ctx, a.ID)
	must(t, err)
	if len(ts) != 2 || ts[0].Turn != 1 || ts[0].Body != `{"turn":1}` || ts[1].Turn != 2 || ts[1].Body != `{"turn":2,"again":true}` || !ts[1].At.Equal(t0.Add(time.Second)) {
		t.Fatalf("transcripts of a: %+v", ts)
	}
	none, err := s.ListTranscripts(ctx, NewTask("").ID)
	if err != nil && !errors.Is(err, store.ErrNotFound) || len(none) != 0 {
		t.Fatalf("transcripts of a task with none: %+v, %v", none, err)
	}
}

func testDurable(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := open(t, dir)
	a := NewTask("keep")
	must(t, s.CreateTask(ctx, a))
	c := newComment(a.ID, "t1", review.Comment, time.Now())
	must(t, s.AddReviewComment(ctx, c))
	must(t, s.Close())
	s2 := open(t, dir)
	got, err := s2.ListReviewComments(ctx, a.ID)
	must(t, err)
	if len(got) != 1 || got[0].Body != c.Body {
		t.Fatalf("after reopen: %+v", got)
	}
}

func testConcurrent(t *testing.T, open Opener) {
	s := open(t, t.TempDir())
	a := NewTask("")
	must(t, s.CreateTask(ctx, a))
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := s.AddReviewComment(ctx, newComment(a.ID, fmt.Sprint("t", i), review.Comment, time.Now())); err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, _ := s.ListReviewComments(ctx, a.ID)
	if len(got) != 50 {
		t.Errorf("got %d comments, want 50", len(got))
	}
}

func testMarkLaunched(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := open(t, dir)
	a := NewTask("")
	must(t, s.CreateTask(ctx, a))
	c1 := newComment(a.ID, "t1", review.Comment, time.Now())
	c2 := newComment(a.ID, "t2", review.Comment, time.Now().Add(time.Millisecond))
	must(t, s.AddReviewComment(ctx, c1))
	must(t, s.AddReviewComment(ctx, c2))
	ask := &store.Turn{ID: task.NewID(time.Now()), TaskID: a.ID, Kind: store.TurnAsk, Trigger: "ask", Status: store.TurnDone, QueuedAt: time.Now().UTC()}
	must(t, s.CreateTurn(ctx, ask))
	tu := &store.Turn{ID: task.NewID(time.Now()), TaskID: a.ID, Kind: store.TurnWork, Trigger: "unblock", Status: store.TurnRunning, QueuedAt: time.Now().UTC()}
	must(t, s.CreateTurn(ctx, tu))
	at := time.Now().UTC().Truncate(time.Millisecond)
	must(t, s.MarkLaunched(ctx, tu.ID, at, []string{c1.ID}))
	must(t, s.Close())
	s = open(t, dir)
	turns, _ := s.ListTurns(ctx, a.ID)
	if len(turns) != 2 || turns[1].StartedAt == nil || !turns[1].StartedAt.Equal(at) {
		t.Fatalf("turn after MarkLaunched: %+v", turns)
	}
	got1, _ := s.GetReviewComment(ctx, c1.ID)
	got2, _ := s.GetReviewComment(ctx, c2.ID)
	// delivered with work turn 1 (record 2: an ask came first)
	if got1.DeliveryState != review.Delivered || got1.DeliveredTurn != 1 || tu.Number != 2 || got2.DeliveryState != review.PendingDelivery {
		t.Errorf("deliveries: %+v / %+v", got1, got2)
	}
	if err := s.MarkLaunched(ctx, "nope", at, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown turn: %v", err)
	}
}

// testAnswerAsk: an ask's reply and its answered state land in one write,
// once; a second answer is a conflict and changes nothing; both survive a
// reopen.
func testAnswerAsk(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := open(t, dir)
	a := NewTask("")
	must(t, s.CreateTask(ctx, a))
	base := time.Now()
	ask := newComment(a.ID, "t1", review.Ask, base)
	must(t, s.AddReviewComment(ctx, ask))
	reply := &review.ReviewComment{ID: task.NewID(base.Add(time.Second)), TaskID: a.ID, ThreadID: "t1", File: "a.go", Line: 3, Side: review.New,
		Intent: review.Ask, Body: "because", Actor: review.Agent, CreatedAt: base.Add(time.Second).UTC().Truncate(time.Millisecond)}
	must(t, s.AnswerAsk(ctx, ask.ID, reply))
	again := *reply
	again.ID, again.Body = task.NewID(base.Add(2*time.Second)), "a second answer"
	if err := s.AnswerAsk(ctx, ask.ID, &again); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a second answer: got %v, want ErrConflict", err)
	}
	if err := s.AnswerAsk(ctx, "nope", &again); err == nil {
		t.Error("answering an unknown ask: no error")
	}
	must(t, s.Close())
	s = open(t, dir)
	cs, err := s.ListReviewComments(ctx, a.ID)
	must(t, err)
	if len(cs) != 2 || cs[0].AskState != review.AskAnswered || cs[1].Body != "because" || cs[1].Actor != review.Agent {
		t.Fatalf("after answering: %+v", cs)
	}
}

// testReviewState: viewed marks per reviewer and content (a new content
// replaces the old, unviewed takes it off), resolved threads per thread,
// the head last reviewed with the one before it; all survive a reopen and
// stay on their task.
func testReviewState(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := open(t, dir)
	a, b := NewTask(""), NewTask("")
	must(t, s.CreateTask(ctx, a))
	must(t, s.CreateTask(ctx, b))
	at := time.Now().UTC().Truncate(time.Millisecond)
	empty, err := s.ReviewState(ctx, "owner", a.ID)
	must(t, err)
	if len(empty.Viewed) != 0 || len(empty.Resolved) != 0 || empty.Head != nil {
		t.Fatalf("a new task's state: %+v", empty)
	}
	must(t, s.SetViewed(ctx, store.ViewedFile{Reviewer: "owner", TaskID: a.ID, Path: "a.go", DiffHash: "h1", At: at}, true))
	must(t, s.SetViewed(ctx, store.ViewedFile{Reviewer: "owner", TaskID: a.ID, Path: "a.go", DiffHash: "h2", At: at}, true))
	must(t, s.SetViewed(ctx, store.ViewedFile{Reviewer: "owner", TaskID: a.ID, Path: "b.go", DiffHash: "h3", At: at}, true))
	must(t, s.SetViewed(ctx, store.ViewedFile{Reviewer: "owner", TaskID: a.ID, Path: "c.go", DiffHash: "h4", At: at}, true))
	must(t, s.SetViewed(ctx, store.ViewedFile{Reviewer: "owner", TaskID: a.ID, Path: "c.go"}, false))
	must(t, s.SetViewed(ctx, store.ViewedFile{Reviewer: "other", TaskID: a.ID, Path: "a.go", DiffHash: "h9", At: at}, true))
	must(t, s.SetViewed(ctx, store.ViewedFile{Reviewer: "owner", TaskID: b.ID, Path: "a.go", DiffHash: "h8", At: at}, true))
	must(t, s.SetResolved(ctx, store.ResolvedThread{TaskID: a.ID, ThreadID: "t1", Reviewer: "owner", Messages: 2, At: at}, true))
	must(t, s.SetResolved(ctx, store.ResolvedThread{TaskID: a.ID, ThreadID: "t1", Reviewer: "owner", Messages: 3, At: at}, true))
	must(t, s.SetResolved(ctx, store.ResolvedThread{TaskID: a.ID, ThreadID: "t2", Reviewer: "owner", Messages: 1, At: at}, true))
	must(t, s.SetResolved(ctx, store.ResolvedThread{TaskID: a.ID, ThreadID: "t2"}, false))
	h, err := s.SeeHead(ctx, "owner", a.ID, "c1", at)
	must(t, err)
	if h.Head != "c1" || h.Prev != "" {
		t.Errorf("first head: got %+v, want head c1, no prev", h)
	}
	if h, err = s.SeeHead(ctx, "owner", a.ID, "c2", at); err != nil || h.Head != "c2" || h.Prev != "c1" {
		t.Errorf("moved head: got %+v %v, want c2 after c1", h, err)
	}
	if h, err = s.SeeHead(ctx, "owner", a.ID, "c2", at); err != nil || h.Head != "c2" || h.Prev != "c1" {
		t.Errorf("same head again: got %+v %v, want c2 after c1 kept", h, err)
	}
	check := func(s store.Store, when string) {
		t.Helper()
		st, err := s.ReviewState(ctx, "owner", a.ID)
		must(t, err)
		got := map[string]string{}
		for _, v := range st.Viewed {
			got[v.Path] = v.DiffHash
			if v.Reviewer != "owner" || v.TaskID != a.ID || !v.At.Equal(at) {
				t.Errorf("%s: viewed row %+v", when, v)
			}
		}
		if len(got) != 2 || got["a.go"] != "h2" || got["b.go"] != "h3" {
			t.Errorf("%s: viewed got %v, want a.go at h2 and b.go at h3 only", when, got)
		}
		if len(st.Resolved) != 1 || st.Resolved[0].ThreadID != "t1" || st.Resolved[0].Messages != 3 || st.Resolved[0].Reviewer != "owner" {
			t.Errorf("%s: resolved got %+v, want t1 at 3 messages", when, st.Resolved)
		}
		if st.Head == nil || st.Head.Head != "c2" || st.Head.Prev != "c1" {
			t.Errorf("%s: head got %+v, want c2 after c1", when, st.Head)
		}
		other, err := s.ReviewState(ctx, "other", a.ID)
		must(t, err)
		if len(other.Viewed) != 1 || other.Viewed[0].DiffHash != "h9" || other.Head != nil || len(other.Resolved) != 1 {
			t.Errorf("%s: another reviewer's state: %+v", when, other)
		}
		sb, err := s.ReviewState(ctx, "owner", b.ID)
		must(t, err)
		if len(sb.Viewed) != 1 || sb.Viewed[0].DiffHash != "h8" || len(sb.Resolved) != 0 || sb.Head != nil {
			t.Errorf("%s: another task's state: %+v", when, sb)
		}
	}
	check(s, "written")
	check(open(t, dir), "reopened")
}
