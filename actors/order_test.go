package actors

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"lazy/agent"
	"lazy/review"
	"lazy/store"
	"lazy/task"
)

// scripted is a launcher that records each turn it is given, in order. The
// first turn waits for gate, so everything sent meanwhile queues behind it;
// a turn whose prompt holds "FAIL" fails.
type scripted struct {
	gate chan struct{}
	once sync.Once
	mu   sync.Mutex
	runs []run
}

type run struct {
	ask    bool
	prompt string
}

func (s *scripted) RunTurn(ctx context.Context, req agent.TurnRequest) (agent.Result, agent.Outcome, error) {
	prompt, err := req.FinalPrompt(ctx)
	if err != nil {
		return agent.Result{}, agent.Outcome{}, err
	}
	s.once.Do(func() { <-s.gate })
	if req.OnStart != nil {
		req.OnStart(4242) // the agent process "started": the prompt reached it
	}
	s.mu.Lock()
	s.runs = append(s.runs, run{ask: req.Ask, prompt: prompt})
	s.mu.Unlock()
	if strings.Contains(prompt, "FAIL") {
		return agent.Result{}, agent.Outcome{ExitCode: 1}, errors.New("the agent crashed")
	}
	return agent.Result{Text: "answer", SessionID: req.Session}, agent.Outcome{}, nil
}

func (s *scripted) recorded() []run {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]run(nil), s.runs...)
}

// TestAsksBeforeTheUnblock is spec §3.2.2 and §3.2.6 at the actor: comment
// C1, ask A1, comment C2, ask A2 (which fails), then unblock. The agent
// sees A1, then A2, then one work turn carrying C1, C2 and the message; a
// comment never starts a turn of its own, and the failed ask strands
// nothing behind it. The first ask holds the agent until everything is
// queued, so the order is the mailbox's, not the clock's.
func TestAsksBeforeTheUnblock(t *testing.T) {
	l := &scripted{gate: make(chan struct{})}
	r := newRigWith(t, "", nil, l, "session-1")
	post := func(intent review.Intent, body string) *review.ReviewComment {
		t.Helper()
		res, err := r.ask(&PostReviewComment{Comment: review.ReviewComment{Intent: intent, Body: body,
			File: "a.go", Line: 1, Side: review.New, LineText: "package a"}})
		if err != nil {
			t.Fatalf("post %s: %v", body, err)
		}
		return res.(*review.ReviewComment)
	}
	c1 := post(review.Comment, "C1 rename this")
	a1 := post(review.Ask, "A1 why this name?")
	c2 := post(review.Comment, "C2 and add a test")
	a2 := post(review.Ask, "A2 FAIL what about errors?")
	if _, err := r.ask(&Unblock{Message: "overall: go on"}); err != nil {
		t.Fatal(err)
	}
	if runs := l.recorded(); len(runs) != 0 {
		t.Fatalf("%d turns ran before the gate opened", len(runs))
	}
	close(l.gate)

	deadline := time.Now().Add(30 * time.Second)
	for {
		tk, err := r.st.GetTask(context.Background(), r.tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.recorded()) == 3 && tk.Status == task.Blocked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %d turns, status %s", len(l.recorded()), tk.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	runs := l.recorded()
	if !runs[0].ask || !strings.Contains(runs[0].prompt, "A1") || !runs[1].ask || !strings.Contains(runs[1].prompt, "A2") {
		t.Fatalf("the asks did not come first, in order: %+v", runs)
	}
	work := runs[2]
	if work.ask {
		t.Fatalf("the third turn is an ask: %+v", work)
	}
	i1, i2, im := strings.Index(work.prompt, "C1 rename this"), strings.Index(work.prompt, "C2 and add a test"), strings.Index(work.prompt, "overall: go on")
	if i1 < 0 || i2 < i1 || im < i2 {
		t.Fatalf("the work turn does not carry C1, C2, then the message:\n%s", work.prompt)
	}

	byID := map[string]review.ReviewComment{}
	cs, err := r.st.ListReviewComments(context.Background(), r.tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		byID[c.ID] = c
	}
	if got := byID[a1.ID]; got.AskState != review.AskAnswered {
		t.Errorf("A1: %s %q", got.AskState, got.AskError)
	}
	if got := byID[a2.ID]; got.AskState != review.AskFailed || !strings.Contains(got.AskError, "the agent crashed") {
		t.Errorf("A2: %s %q", got.AskState, got.AskError)
	}
	turns, err := r.st.ListTurns(context.Background(), r.tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	var workTurn *store.Turn
	for i := range turns {
		if turns[i].Kind == store.TurnWork {
			if workTurn != nil {
				t.Fatalf("two work turns: a comment started one of its own")
			}
			workTurn = &turns[i]
		}
	}
	if workTurn == nil {
		t.Fatal("no work turn recorded")
	}
	for _, c := range []*review.ReviewComment{c1, c2} {
		// delivered with work turn 1 (an ask took an earlier record number)
		if got := byID[c.ID]; got.DeliveryState != review.Delivered || got.DeliveredTurn != workTurn.Seq || workTurn.Seq != 1 || workTurn.Number < 2 {
			t.Errorf("%s: %s with turn %d, want delivered with work turn %d (record %d)", c.Body, got.DeliveryState, got.DeliveredTurn, workTurn.Seq, workTurn.Number)
		}
	}
}
