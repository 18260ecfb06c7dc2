package actors

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"lazy/agent"
	"lazy/store"
	"lazy/task"
)

// flakyLeases are the store's leases with renewals that fail while fail is
// set (the store unreachable from this member, or the member paused).
type flakyLeases struct {
	store.Leases
	fail atomic.Bool
}

func (f *flakyLeases) RenewLease(ctx context.Context, l store.Lease, ttl time.Duration) (store.Lease, error) {
	if f.fail.Load() {
		return store.Lease{}, errors.New("the store is unreachable (test)")
	}
	return f.Leases.RenewLease(ctx, l, ttl)
}

// stuckAgent is a turn that runs until release, whatever its context says
// (as a process that takes its time to die, or a member that is paused):
// started is sent when it starts, killed when its context is cancelled.
type stuckAgent struct {
	started, killed chan time.Time
	release         chan struct{}
}

func (s *stuckAgent) RunTurn(ctx context.Context, req agent.TurnRequest) (agent.Result, agent.Outcome, error) {
	if _, err := req.FinalPrompt(ctx); err != nil {
		return agent.Result{}, agent.Outcome{}, err
	}
	if req.OnStart != nil {
		req.OnStart(4242)
	}
	s.started <- time.Now()
	go func() { <-ctx.Done(); s.killed <- time.Now() }()
	<-s.release
	return agent.Result{Text: "late answer"}, agent.Outcome{}, nil
}

// TestLeaseFencesTheTask: with leases in force the actor starts no job
// while another member holds the task's lease, and starts the queued turn
// only once that lease ran out (taking the next epoch). When it can no
// longer renew, it stops the turn's agent while its lease still runs; a
// member that then takes the task has its record kept: the first actor's
// late end of the turn is refused, not written over it.
func TestLeaseFencesTheTask(t *testing.T) {
	ctx := context.Background()
	l := &stuckAgent{started: make(chan time.Time, 1), killed: make(chan time.Time, 1), release: make(chan struct{})}
	r := newRigWith(t, "", nil, l, "")
	const ttl = time.Second
	old, err := r.st.AcquireLease(ctx, r.tk.ID, "old host", ttl) // a host that died without releasing it
	if err != nil {
		t.Fatal(err)
	}
	leases := &flakyLeases{Leases: r.st}
	r.respawn(func(*TaskHost) { r.deps.Leases, r.deps.LeaseHolder, r.deps.LeaseTTL = leases, "member a", ttl })
	if _, err := r.ask(&Unblock{Message: "go on"}); err != nil {
		t.Fatalf("an unblock while the lease is another's is taken into the queue: %v", err)
	}
	var began time.Time
	select {
	case began = <-l.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the turn never started after the old lease ran out")
	}
	if began.Before(old.Expires) {
		t.Fatalf("the turn started at %s, before the old host's lease ran out at %s", began.Format(time.StampMilli), old.Expires.Format(time.StampMilli))
	}
	mine, err := r.st.GetLease(ctx, r.tk.ID)
	if err != nil || mine.Holder != "member a" || mine.Epoch != 2 {
		t.Fatalf("the lease while the turn runs: %+v %v, want member a's, epoch 2", mine, err)
	}

	// renewals fail from now on: the agent is stopped before the lease runs out
	leases.fail.Store(true)
	var killed time.Time
	select {
	case killed = <-l.killed:
	case <-time.After(30 * time.Second):
		t.Fatal("the agent was not stopped when the lease could not be renewed")
	}
	held, err := r.st.GetLease(ctx, r.tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !killed.Before(held.Expires) || held.Epoch != 2 {
		t.Fatalf("the agent was stopped at %s, its lease (epoch %d) runs out at %s: it must stop first",
			killed.Format(time.StampMilli), held.Epoch, held.Expires.Format(time.StampMilli))
	}
	t.Logf("figure: the agent stopped %v before its lease ran out (TTL %v)", held.Expires.Sub(killed).Round(time.Millisecond), ttl)

	// member b takes the task once the lease ran out and records the turn cut off
	var b store.Lease
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, err = r.st.AcquireLease(ctx, r.tk.ID, "member b", time.Minute); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("member b cannot take the lease: %v", err)
		}
	}
	fb := r.st.Fenced(b)
	turns, err := fb.ListTurns(ctx, r.tk.ID)
	if err != nil || len(turns) != 1 {
		t.Fatalf("turns: %+v %v", turns, err)
	}
	cut := turns[0]
	now := time.Now().UTC()
	cut.Status, cut.Error, cut.EndedAt = store.TurnInterrupted, "cut off: member b took the task", &now
	if err := fb.SaveTurn(ctx, &cut); err != nil {
		t.Fatal(err)
	}
	tk, err := fb.GetTask(ctx, r.tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	tk.Status, tk.FailReason = task.Failed, "cut off"
	if err := fb.SaveTask(ctx, tk); err != nil {
		t.Fatal(err)
	}

	// the stuck agent ends now: member a's late records are refused (the
	// actor answers once it has tried them)
	close(l.release)
	if _, err := r.ask(&GetHealth{}); err != nil {
		t.Fatal(err)
	}
	got, err := r.st.ListTurns(ctx, r.tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Status != store.TurnInterrupted || got[0].Error != cut.Error {
		t.Errorf("after member a's late end: %+v, want the turn member b recorded (interrupted, %q)", got, cut.Error)
	}
	if tk, _ := r.st.GetTask(ctx, r.tk.ID); tk.Status != task.Failed || tk.FailReason != "cut off" {
		t.Errorf("the task after member a's late end: %s %q, want member b's failed %q", tk.Status, tk.FailReason, "cut off")
	}
	if l, _ := r.st.GetLease(ctx, r.tk.ID); l.Holder != "member b" || l.Epoch != 3 {
		t.Errorf("the lease after member a stopped: %+v, want member b's epoch 3", l)
	}
	// member a waits for the lease meanwhile, refusing to write the task
	if _, err := r.ask(&Rename{Title: "by a, stale"}); !store.IsStaleLease(err) {
		t.Errorf("a rename on member a while member b holds the lease: got %v, want a stale lease", err)
	}
	// b lets go: a takes the lease anew (epoch 4) and acts on the task as b left it
	leases.fail.Store(false)
	if err := r.st.ReleaseLease(ctx, b); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if l, err := r.st.GetLease(ctx, r.tk.ID); err == nil && l.Holder == "member a" && l.Epoch == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("member a did not take the lease again once member b released it")
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := r.ask(&Rename{Title: "by a again"})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a rename on member a once it holds the lease again: %v", err)
		}
	}
	if tk, _ := r.st.GetTask(ctx, r.tk.ID); tk.Title != "by a again" || tk.Status != task.Failed || tk.FailReason != "cut off" {
		t.Errorf("the task after member a took it again: %q %s %q, want member b's failed %q renamed", tk.Title, tk.Status, tk.FailReason, "cut off")
	}
}
