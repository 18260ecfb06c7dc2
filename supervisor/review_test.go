package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lazy/actors"
	"lazy/agent"
	"lazy/api"
	"lazy/gitx"
	"lazy/review"
	"lazy/store"
	"lazy/task"
)

// scripted answers each turn by what its prompt asks for: "CRASH" fails,
// "SLOW" waits for release or cancellation, "UNAVAILABLE" cannot start.
type scripted struct {
	mu      sync.Mutex
	turns   []agent.TurnRequest
	release chan struct{}
}

func newScripted() *scripted { return &scripted{release: make(chan struct{})} }

func (s *scripted) RunTurn(ctx context.Context, req agent.TurnRequest) (agent.Result, agent.Outcome, error) {
	prompt, err := req.FinalPrompt(ctx) // as the launcher does, once a slot is free
	if err != nil {
		return agent.Result{}, agent.Outcome{}, err
	}
	req.Prompt = prompt
	if strings.Contains(req.Prompt, "UNAVAILABLE") {
		return agent.Result{}, agent.Outcome{}, agent.ErrUnavailable
	}
	s.mu.Lock()
	s.turns = append(s.turns, req)
	s.mu.Unlock()
	if req.OnStart != nil {
		req.OnStart(4242)
	}
	switch {
	case strings.Contains(req.Prompt, "CRASH"):
		return agent.Result{}, agent.Outcome{}, errors.New("the agent exited with status 3: boom")
	case strings.Contains(req.Prompt, "TIMEOUT"):
		return agent.Result{}, agent.Outcome{}, agent.ErrTimeout
	case strings.Contains(req.Prompt, "SLOW"):
		select {
		case <-s.release:
		case <-ctx.Done():
			return agent.Result{}, agent.Outcome{}, ctx.Err()
		}
	}
	return agent.Result{Text: "answer to turn", SessionID: "S1"}, agent.Outcome{}, nil
}

func (s *scripted) seen() []agent.TurnRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]agent.TurnRequest(nil), s.turns...)
}

func (h *harness) setSession(t *testing.T) {
	tk, _ := h.st.GetTask(context.Background(), h.taskID)
	tk.SessionID = "S0"
	if err := h.st.SaveTask(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) post(t *testing.T, intent review.Intent, body string, line int) *review.ReviewComment {
	t.Helper()
	res, err := h.sup.ask(h.taskID, &actors.PostReviewComment{Comment: review.ReviewComment{Intent: intent, Body: body, File: "a.go", Line: line, Side: review.New, LineText: "line " + body}})
	if err != nil {
		t.Fatal(err)
	}
	return res.(*review.ReviewComment)
}

func (h *harness) comment(t *testing.T, id string) *review.ReviewComment {
	t.Helper()
	c, err := h.st.GetReviewComment(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (h *harness) waitAsk(t *testing.T, id string, want review.AskState) *review.ReviewComment {
	t.Helper()
	h.waitEvent(t, "ask end", func(e api.Event) bool {
		return e.Kind == "ask_end" && h.comment(t, id).AskState == want
	})
	return h.comment(t, id)
}

func (h *harness) waitIdle(t *testing.T) {
	t.Helper()
	for i := 0; i < 500; i++ {
		res, err := h.sup.ask(h.taskID, &actors.GetHealth{})
		if err == nil {
			if hl := res.(api.ActorHealth); hl.Running == "" && len(hl.Queued) == 0 {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the task actor never went idle")
}

func setStatus(t *testing.T, h *harness, s task.Status) {
	tk, _ := h.st.GetTask(context.Background(), h.taskID)
	tk.Status = s
	if err := h.st.SaveTask(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	h.sup.StopTask(h.taskID) // the next message reloads the row
}

// TestSequenceC1A1C2A2Unblock is the spec's example: the agent sees exactly
// three turns — A1 and its reply, A2 and its reply, one work turn with C1 and
// C2 and the reviewer's message — and the comments end delivered.
func TestSequenceC1A1C2A2Unblock(t *testing.T) {
	l := newScripted()
	h := newHarness(t, &fakeLauncher{fn: l.RunTurn})
	h.setSession(t)
	c1 := h.post(t, review.Comment, "C1 rename", 1)
	a1 := h.post(t, review.Ask, "A1 why", 2)
	c2 := h.post(t, review.Comment, "C2 test it", 3)
	a2 := h.post(t, review.Ask, "A2 how", 4)
	res, err := h.sup.ask(h.taskID, &actors.Unblock{Message: "overall: go"})
	if err != nil {
		t.Fatal(err)
	}
	turn := res.(*actors.WorkQueued).Turn
	h.waitEvent(t, "work turn end", func(e api.Event) bool { return e.Kind == "turn_end" && e.Turn == turn.Number })
	seen := l.seen()
	if len(seen) != 3 {
		t.Fatalf("the agent saw %d turns, want 3: %+v", len(seen), seen)
	}
	if !seen[0].Ask || !strings.Contains(seen[0].Prompt, "A1 why") || !seen[1].Ask || !strings.Contains(seen[1].Prompt, "A2 how") {
		t.Errorf("the asks must come first, in order: %q / %q", seen[0].Prompt, seen[1].Prompt)
	}
	w := seen[2]
	if w.Ask || !strings.Contains(w.Prompt, "C1 rename") || !strings.Contains(w.Prompt, "C2 test it") || !strings.Contains(w.Prompt, "overall: go") ||
		strings.Contains(w.Prompt, "A1 why") || !strings.Contains(w.Prompt, "a.go, line 1 (new)") || !strings.Contains(w.Prompt, "Line: line C1 rename") {
		t.Errorf("work turn prompt:\n%s", w.Prompt)
	}
	for _, c := range []*review.ReviewComment{c1, c2} {
		got := h.comment(t, c.ID)
		// delivered with work turn 1 (the asks took record numbers 1 and 2)
		if got.DeliveryState != review.Delivered || got.DeliveredTurn != turn.Seq || turn.Seq != 1 {
			t.Errorf("%s: %s turn %d, want delivered with work turn %d", got.Body, got.DeliveryState, got.DeliveredTurn, turn.Seq)
		}
	}
	all, _ := h.st.ListReviewComments(context.Background(), h.taskID)
	for _, a := range []*review.ReviewComment{a1, a2} {
		if h.comment(t, a.ID).AskState != review.AskAnswered {
			t.Errorf("%s not answered", a.Body)
		}
		replies := 0
		for _, m := range all {
			if m.ThreadID == a.ThreadID && m.Actor == review.Agent && m.Line == a.Line && m.File == a.File {
				replies++
			}
		}
		if replies != 1 {
			t.Errorf("%s: %d agent replies in its thread, want 1", a.Body, replies)
		}
	}
	if _, err := os.Stat(filepath.Join(h.dir, "recovery", "unblock-"+turn.ID+".txt")); !os.IsNotExist(err) {
		t.Errorf("the recovery file must go once the turn launched: %v", err)
	}
}

func TestPlainUnblockIsTheMessageAlone(t *testing.T) {
	l := newScripted()
	h := newHarness(t, &fakeLauncher{fn: l.RunTurn})
	res, _ := h.sup.ask(h.taskID, &actors.Unblock{Message: "just this"})
	h.waitEvent(t, "turn end", func(e api.Event) bool {
		return e.Kind == "turn_end" && e.Turn == res.(*actors.WorkQueued).Turn.Number
	})
	if p := l.seen()[0].Prompt; p != "just this" {
		t.Errorf("prompt %q", p)
	}
}

func TestAskStateTable(t *testing.T) {
	t.Run("not askable: saved, failed with the rule's reason, nothing dispatched", func(t *testing.T) {
		l := newScripted()
		h := newHarness(t, &fakeLauncher{fn: l.RunTurn})
		setStatus(t, h, task.Running)
		c := h.post(t, review.Ask, "why", 1)
		got := h.comment(t, c.ID)
		if got.AskState != review.AskFailed || got.AskError != review.Askable(task.Running).Reason || got.Body != "why" {
			t.Fatalf("%+v", got)
		}
		h.waitIdle(t)
		if len(l.seen()) != 0 {
			t.Error("a refused ask reached the agent")
		}
		// retry while still unavailable: stays failed, reason re-recorded, text untouched
		setStatus(t, h, task.Failed)
		res, err := h.sup.ask(h.taskID, &actors.RetryAsk{ID: c.ID})
		if err != nil {
			t.Fatal(err)
		}
		got = h.comment(t, c.ID)
		if got.AskState != review.AskFailed || got.AskError != review.Askable(task.Failed).Reason || got.Body != "why" || !strings.Contains(res.(*actors.ActionDone).Notice, "Not re-sent") {
			t.Fatalf("retry while unavailable: %+v", got)
		}
		// retry when askable: pending, dispatched as-is into its thread, answered
		setStatus(t, h, task.Conflict)
		h.setSession(t)
		if _, err := h.sup.ask(h.taskID, &actors.RetryAsk{ID: c.ID}); err != nil {
			t.Fatal(err)
		}
		if got = h.waitAsk(t, c.ID, review.AskAnswered); got.Body != "why" || got.ThreadID != c.ThreadID {
			t.Errorf("the re-sent question changed: %+v", got)
		}
		if seen := l.seen(); len(seen) != 1 || !strings.Contains(seen[0].Prompt, "why") || !seen[0].Ask {
			t.Errorf("dispatched: %+v", seen)
		}
	})
	for _, tc := range []struct {
		name, body, want string
	}{
		{"agent crash", "CRASH", "The agent failed while answering: the agent exited with status 3: boom. Re-send to try again."},
		{"timeout", "TIMEOUT", "did not answer within 1m0s and was stopped"},
		{"runner unavailable", "UNAVAILABLE", "could not be started"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newScripted()
			h := newHarness(t, &fakeLauncher{fn: l.RunTurn})
			h.setSession(t)
			c := h.post(t, review.Ask, tc.body, 1)
			after := h.post(t, review.Ask, "the next question", 2)
			got := h.waitAsk(t, c.ID, review.AskFailed)
			if !strings.Contains(got.AskError, tc.want) || got.Body != tc.body {
				t.Errorf("ask_error %q, want ~%q", got.AskError, tc.want)
			}
			// a failed ask never strands the one behind it
			h.waitAsk(t, after.ID, review.AskAnswered)
		})
	}
	t.Run("worktree lock held: 409, failed, the queue moves on", func(t *testing.T) {
		l := newScripted()
		h := newHarness(t, &fakeLauncher{fn: l.RunTurn})
		h.setSession(t)
		lock, err := gitx.TryLock(filepath.Join(h.dir, "locks", h.taskID+".lock"), "a manual git rebase")
		if err != nil {
			t.Fatal(err)
		}
		c := h.post(t, review.Ask, "locked?", 1)
		got := h.waitAsk(t, c.ID, review.AskFailed)
		if !strings.Contains(got.AskError, "409") || !strings.Contains(got.AskError, "a manual git rebase") {
			t.Errorf("ask_error %q", got.AskError)
		}
		lock.Unlock()
		next := h.post(t, review.Ask, "now?", 1)
		h.waitAsk(t, next.ID, review.AskAnswered)
	})
	t.Run("no session yet", func(t *testing.T) {
		h := newHarness(t, &fakeLauncher{fn: newScripted().RunTurn})
		c := h.post(t, review.Ask, "q", 1)
		if got := h.waitAsk(t, c.ID, review.AskFailed); !strings.Contains(got.AskError, "no session") {
			t.Errorf("%q", got.AskError)
		}
	})
	t.Run("retry of an ask in flight is a no-op", func(t *testing.T) {
		l := newScripted()
		h := newHarness(t, &fakeLauncher{fn: l.RunTurn})
		h.setSession(t)
		c := h.post(t, review.Ask, "SLOW", 1)
		h.waitEvent(t, "ask start", func(e api.Event) bool { return e.Kind == "turn_start" })
		res, err := h.sup.ask(h.taskID, &actors.RetryAsk{ID: c.ID})
		if err != nil || !strings.Contains(res.(*actors.ActionDone).Notice, "already with the agent") {
			t.Fatalf("%v %v", res, err)
		}
		close(l.release)
		h.waitAsk(t, c.ID, review.AskAnswered)
		if n := len(l.seen()); n != 1 {
			t.Errorf("the agent saw the question %d times", n)
		}
	})
}

func TestCommentNeverDispatchesAndWithdraw(t *testing.T) {
	l := newScripted()
	h := newHarness(t, &fakeLauncher{fn: l.RunTurn})
	h.setSession(t)
	c := h.post(t, review.Comment, "queued", 1)
	gone := h.post(t, review.Comment, "WITHDRAWN-WORDS", 2)
	h.waitIdle(t)
	if len(l.seen()) != 0 || h.comment(t, c.ID).DeliveryState != review.PendingDelivery {
		t.Fatal("a comment became a turn on its own")
	}
	res, err := h.sup.ask(h.taskID, &actors.WithdrawComment{ID: gone.ID})
	if err != nil || !strings.Contains(res.(*actors.ActionDone).Notice, "Withdrawn") {
		t.Fatal(err)
	}
	w := h.comment(t, gone.ID)
	if w.WithdrawnAt == nil || w.DeliveryState != review.PendingDelivery || w.Body != "WITHDRAWN-WORDS" {
		t.Errorf("withdrawn: %+v", w)
	}
	if _, err := h.sup.ask(h.taskID, &actors.WithdrawComment{ID: gone.ID}); err == nil {
		t.Error("there is no un-withdraw and no second withdrawal")
	}
	res2, _ := h.sup.ask(h.taskID, &actors.Unblock{Message: "go"})
	turn := res2.(*actors.WorkQueued).Turn
	h.waitEvent(t, "turn end", func(e api.Event) bool { return e.Kind == "turn_end" && e.Turn == turn.Number })
	p := l.seen()[0].Prompt
	if !strings.Contains(p, "queued") || strings.Contains(p, "WITHDRAWN-WORDS") {
		t.Errorf("unblock prompt:\n%s", p)
	}
	if h.comment(t, gone.ID).DeliveryState != review.PendingDelivery {
		t.Error("a withdrawn comment was delivered")
	}
	// refusals, each with the rule's words
	delivered := h.comment(t, c.ID)
	a := h.post(t, review.Ask, "q", 3)
	answered := h.waitAsk(t, a.ID, review.AskAnswered)
	all, _ := h.st.ListReviewComments(context.Background(), h.taskID)
	var reply review.ReviewComment
	for _, m := range all {
		if m.Actor == review.Agent {
			reply = m
		}
	}
	for name, id := range map[string]string{"delivered": delivered.ID, "answered": answered.ID, "agent's": reply.ID, "unknown": "nope"} {
		if _, err := h.sup.ask(h.taskID, &actors.WithdrawComment{ID: id}); err == nil {
			t.Errorf("withdraw %s: allowed", name)
		} else {
			var re *review.RuleError
			if !errors.As(err, &re) {
				t.Errorf("withdraw %s: %v is not a rule refusal", name, err)
			}
		}
	}
}

func TestUnblockLaunchFailureKeepsCommentsQueued(t *testing.T) {
	l := newScripted()
	h := newHarness(t, &fakeLauncher{fn: l.RunTurn})
	c := h.post(t, review.Comment, "keep me", 1)
	res, err := h.sup.ask(h.taskID, &actors.Unblock{Message: "UNAVAILABLE please"})
	if err != nil {
		t.Fatal(err)
	}
	turn := res.(*actors.WorkQueued).Turn
	h.waitEvent(t, "turn end", func(e api.Event) bool { return e.Kind == "turn_end" && e.Turn == turn.Number })
	h.waitIdle(t)
	if got := h.comment(t, c.ID); got.DeliveryState != review.PendingDelivery {
		t.Errorf("after a failed launch: %s", got.DeliveryState)
	}
	rec := filepath.Join(h.dir, "recovery", "unblock-"+turn.ID+".txt")
	if b, err := os.ReadFile(rec); err != nil || !strings.Contains(string(b), "UNAVAILABLE please") {
		t.Errorf("the recovery file must stay after a failed launch: %v", err)
	}
	tk, _ := h.st.GetTask(context.Background(), h.taskID)
	if tk.Status != task.Failed || !strings.Contains(tk.FailReason, "comments stay queued") {
		t.Errorf("task: %s %q", tk.Status, tk.FailReason)
	}
	// the next unblock delivers it
	res, _ = h.sup.ask(h.taskID, &actors.Unblock{Message: "again"})
	turn2 := res.(*actors.WorkQueued).Turn
	h.waitEvent(t, "turn end", func(e api.Event) bool { return e.Kind == "turn_end" && e.Turn == turn2.Number })
	if got := h.comment(t, c.ID); got.DeliveryState != review.Delivered || got.DeliveredTurn != turn2.Seq {
		t.Errorf("second unblock: %+v", got)
	}
}

func TestRecoveryWriteFailureLosesNothing(t *testing.T) {
	h := newHarness(t, &fakeLauncher{fn: newScripted().RunTurn})
	c := h.post(t, review.Comment, "mine", 1)
	// a file where the recovery dir should be: every write there fails
	if err := os.WriteFile(filepath.Join(h.dir, "recovery"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := h.sup.ask(h.taskID, &actors.Unblock{Message: "go"})
	if err == nil || !strings.Contains(err.Error(), "nothing was queued") {
		t.Fatalf("got %v", err)
	}
	turns, _ := h.st.ListTurns(context.Background(), h.taskID)
	if len(turns) != 0 || h.comment(t, c.ID).DeliveryState != review.PendingDelivery {
		t.Errorf("a failed recovery write changed state: %d turns", len(turns))
	}
}

// TestPendingAsksSurviveRestartInOrder: an actor restart while an ask runs
// re-queues the interrupted ask and everything behind it in the same order;
// nothing is lost and the unblock still comes last.
func TestPendingAsksSurviveRestartInOrder(t *testing.T) {
	l := newScripted()
	h := newHarness(t, &fakeLauncher{fn: l.RunTurn})
	h.setSession(t)
	first := h.post(t, review.Ask, "SLOW first", 1)
	h.waitEvent(t, "ask start", func(e api.Event) bool { return e.Kind == "turn_start" })
	second := h.post(t, review.Ask, "second", 2)
	res, err := h.sup.ask(h.taskID, &actors.Unblock{Message: "then work"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.sup.InjectPanic(h.taskID, "test"); err != nil {
		t.Fatal(err)
	}
	h.waitEvent(t, "the interrupted ask turn", func(e api.Event) bool { return e.Kind == "turn_end" && e.Status == store.TurnInterrupted })
	close(l.release)
	h.waitEvent(t, "the work turn", func(e api.Event) bool {
		return e.Kind == "turn_end" && e.Status == store.TurnDone && e.Turn == res.(*actors.WorkQueued).Turn.Number
	})
	seen := l.seen()
	want := []string{"SLOW first", "SLOW first", "second", "then work"}
	if len(seen) != len(want) {
		t.Fatalf("turns: %d, want %d", len(seen), len(want))
	}
	for i, w := range want {
		if !strings.Contains(seen[i].Prompt, w) {
			t.Errorf("turn %d: %q, want ~%q", i, seen[i].Prompt, w)
		}
	}
	for _, c := range []*review.ReviewComment{first, second} {
		if got := h.comment(t, c.ID).AskState; got != review.AskAnswered {
			t.Errorf("%s: %s after the restart, want answered", c.Body, got)
		}
	}
}

// BenchmarkDrainQueuedAsks: 1,000 tasks each with 10 questions queued at
// once drain with every task's answers in FIFO order and none stranded.
func BenchmarkDrainQueuedAsks(b *testing.B) {
	const tasks, asks = 1000, 10
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		dir := b.TempDir()
		st, err := store.OpenSQL(filepath.Join(dir, "lazy.db"))
		if err != nil {
			b.Fatal(err)
		}
		var mu sync.Mutex
		order := map[string][]string{}
		l := &fakeLauncher{fn: func(ctx context.Context, req agent.TurnRequest) (agent.Result, agent.Outcome, error) {
			mu.Lock()
			order[req.TaskID] = append(order[req.TaskID], req.Prompt)
			mu.Unlock()
			return agent.Result{Text: "a", SessionID: "S"}, agent.Outcome{}, nil
		}}
		sup, err := New(Config{Core: testCore(b, filepath.Join(dir, "g.json")), Timeout: time.Minute,
			Task: &actors.TaskDeps{Store: st, Launcher: l, LockDir: filepath.Join(dir, "locks"), AskTimeout: time.Minute, Log: testLog(), CheckPassphrase: noPassphrase}})
		if err != nil {
			b.Fatal(err)
		}
		ch, cancel, _ := sup.Subscribe(actors.Filter{Tasks: true}, 100000)
		ids := make([]string, tasks)
		for i := range ids {
			now := time.Now().UTC()
			ids[i] = task.NewID(now)
			if err := st.CreateTask(context.Background(), &store.Task{ID: ids[i], Status: task.Blocked, SessionID: "S0", CreatedAt: now, UpdatedAt: now, LastActivity: now}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Add(1)
			go func(id string) {
				defer wg.Done()
				for k := 0; k < asks; k++ {
					if _, err := sup.ask(id, &actors.PostReviewComment{Comment: review.ReviewComment{Intent: review.Ask, Body: fmt.Sprintf("q%02d", k), File: "a.go", Line: 1, Side: review.New}}); err != nil {
						b.Error(err)
					}
				}
			}(id)
		}
		wg.Wait()
		answered := 0
		for answered < tasks*asks {
			e := <-ch
			if e.Kind == "ask_end" {
				if e.Status != string(review.AskAnswered) {
					b.Fatalf("an ask failed: %s", e.Detail)
				}
				answered++
			}
		}
		b.StopTimer()
		cancel()
		for _, id := range ids {
			got := order[id]
			if len(got) != asks {
				b.Fatalf("task %s: %d asks ran, want %d", id, len(got), asks)
			}
			for k, p := range got {
				if !strings.Contains(p, fmt.Sprintf("q%02d", k)) {
					b.Fatalf("task %s: ask %d was %q: not FIFO", id, k, p)
				}
			}
		}
		pending, _ := st.AsksInState(context.Background(), review.AskPending)
		if len(pending) != 0 {
			b.Fatalf("%d asks stranded", len(pending))
		}
		sup.Shutdown()
		_ = st.Close()
	}
	b.ReportMetric(float64(tasks*asks*b.N)/b.Elapsed().Seconds(), "asks/s")
}

// TestWithdrawWhileWaitingForASlot is the sequence of issue 11: an unblock
// waits for an agent slot (another turn holds it); a comment queued before it
// is withdrawn while it waits. The prompt is decided at launch: the
// withdrawn comment is not in it and is never marked delivered. Once the
// prompt is rendered and until the agent starts, withdrawing is refused.
func TestWithdrawWhileWaitingForASlot(t *testing.T) {
	slot := make(chan struct{})   // the other turn frees the slot
	rendered := make(chan string) // the prompt, once rendered
	start := make(chan struct{})  // the agent process starts
	var prompts []string
	var mu sync.Mutex
	// the real launcher's order: wait for a slot, render, start the agent
	h := newHarness(t, &fakeLauncher{raw: true, fn: func(ctx context.Context, req agent.TurnRequest) (agent.Result, agent.Outcome, error) {
		<-slot
		p, err := req.FinalPrompt(ctx)
		if err != nil {
			return agent.Result{}, agent.Outcome{}, err
		}
		mu.Lock()
		prompts = append(prompts, p)
		mu.Unlock()
		rendered <- p
		<-start
		req.OnStart(1)
		return agent.Result{Text: "done", SessionID: "S1"}, agent.Outcome{}, nil
	}})
	h.setSession(t)
	keep := h.post(t, review.Comment, "KEEP-ME", 1)
	gone := h.post(t, review.Comment, "WITHDRAWN-WHILE-WAITING", 2)
	res, err := h.sup.ask(h.taskID, &actors.Unblock{Message: "go on"})
	if err != nil {
		t.Fatal(err)
	}
	turn := res.(*actors.WorkQueued).Turn
	// the unblock's job runs and waits for a slot: withdraw now
	w, err := h.sup.ask(h.taskID, &actors.WithdrawComment{ID: gone.ID})
	if err != nil || !strings.Contains(w.(*actors.ActionDone).Notice, "will not reach the agent") {
		t.Fatalf("withdraw while waiting: %v %v", w, err)
	}
	close(slot)
	p := <-rendered
	if strings.Contains(p, "WITHDRAWN-WHILE-WAITING") || !strings.Contains(p, "KEEP-ME") || !strings.Contains(p, "go on") {
		t.Fatalf("prompt at launch:\n%s", p)
	}
	// rendered, not yet started: the comment in it can no longer be withdrawn
	if _, err := h.sup.ask(h.taskID, &actors.WithdrawComment{ID: keep.ID}); err == nil || !strings.Contains(err.Error(), "being delivered") {
		t.Fatalf("withdraw between render and start: %v", err)
	}
	close(start)
	h.waitEvent(t, "turn end", func(e api.Event) bool { return e.Kind == "turn_end" && e.Turn == turn.Number })
	if c := h.comment(t, gone.ID); c.WithdrawnAt == nil || c.DeliveryState != review.PendingDelivery || c.DeliveredTurn != 0 {
		t.Errorf("withdrawn comment after launch: %+v", c)
	}
	if c := h.comment(t, keep.ID); c.DeliveryState != review.Delivered || c.DeliveredTurn != turn.Seq {
		t.Errorf("kept comment after launch: %+v", c)
	}
	tu, _ := h.st.ListTurns(context.Background(), h.taskID)
	if got := tu[len(tu)-1].Prompt; got != prompts[0] {
		t.Errorf("the turn record must hold the prompt the agent got:\n%s", got)
	}
}

// TestUnblockTooLargeAtLaunch: comments posted while an unblock waited can
// take it over the limit; the launch is refused with the limit named and the
// comments stay queued.
func TestUnblockTooLargeAtLaunch(t *testing.T) {
	l := newScripted()
	h := newHarness(t, &fakeLauncher{fn: l.RunTurn})
	h.setSession(t)
	big := strings.Repeat("x", 60<<10)
	var ids []string
	for i := 0; i < 4; i++ { // with its line text, each renders to about 120 KiB
		ids = append(ids, h.post(t, review.Comment, big, i+1).ID)
	}
	// held by a slow ask, the unblock waits; more comments arrive meanwhile
	a := h.post(t, review.Ask, "SLOW question", 99)
	res, err := h.sup.ask(h.taskID, &actors.Unblock{Message: "go"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 4; i < 16; i++ { // 16 of them > 1 MiB
		ids = append(ids, h.post(t, review.Comment, big, i+1).ID)
	}
	close(l.release)
	h.waitAsk(t, a.ID, review.AskAnswered)
	_ = res
	h.waitEvent(t, "failed", func(e api.Event) bool { return e.Kind == "status" && e.Status == string(task.Failed) })
	tk, _ := h.st.GetTask(context.Background(), h.taskID)
	if !strings.Contains(tk.FailReason, "too large") || !strings.Contains(tk.FailReason, fmt.Sprint(review.MaxUnblockPrompt)) {
		t.Errorf("reason: %q", tk.FailReason)
	}
	for _, id := range ids {
		if c := h.comment(t, id); c.DeliveryState != review.PendingDelivery {
			t.Fatalf("a comment left the queue: %+v", c.DeliveryState)
		}
	}
	if n := len(l.seen()); n != 1 {
		t.Errorf("the agent ran %d turns, want only the ask", n)
	}
	// at unblock time the limit is checked at once: 5 MiB of message
	h2 := newHarness(t, &fakeLauncher{fn: l.RunTurn})
	_, err = h2.sup.ask(h2.taskID, &actors.Unblock{Message: strings.Repeat("m", 5<<20)})
	var tl *review.TooLargeError
	if !errors.As(err, &tl) || !strings.Contains(err.Error(), "limit 1048576") {
		t.Fatalf("a 5 MiB unblock: %v", err)
	}
	if tu, _ := h2.st.ListTurns(context.Background(), h2.taskID); len(tu) != 0 {
		t.Error("a refused unblock queued a turn")
	}
}
