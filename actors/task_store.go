package actors

// A store that does not answer (PostgreSQL stopped, a network cut). A job
// that ends then has its end held in the actor — the turn's record, an
// ask's answer, the task's status — until the store answers again; the
// job stays the running one meanwhile (nothing else starts, an accept is
// refused as busy, other members see it running), and its health says
// what it waits for. A job waiting to start waits the same way, so an ask
// or an unblock queued in the store is neither dropped nor failed for the
// outage.
//
// The end of an agent turn (work or ask) is also written to the daemon's
// durable local outbox (outbox.go) when it is held, and removed once the
// store has it. Should the actor lose it meanwhile — in a cluster an
// outage past 7/10 of the lease stops the task's jobs (task_lease.go); a
// kill -9 or a crash of the daemon — the task's next load on this machine
// (the lease taken again, the daemon started again) finds the entry and,
// when the store still marks its turn running (nobody recorded it since),
// records the turn from it as it ended: done with its answer, its
// delivered comments delivered, the task's status as the job set it, and,
// in a cluster, the branch's commits pushed from this member's clone
// through the pending-push path (task_push.go). An entry that no longer
// applies (the turn recorded otherwise, as cut off by another member; the
// task ended) is removed, with a log line and a note on the task saying
// what was discarded and why; one that cannot be read is set aside and
// reported. Only when there is no entry (no outbox, the disk refused it,
// another member's) is a turn left running recorded cut off by the next
// host (a work turn fails the task, saying to unblock it; an ask is asked
// again). Git jobs (sync, accept, a decision, a suggestion) have no turn
// row: their end is held in memory only.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"lazy/api"
	"lazy/store"
)

// storeProbe bounds the look that tells whether the store answers.
const storeProbe = 3 * time.Second

// storeWait is what waits for the store.
type storeWait struct {
	// ended: the running job's result, held until the store answers
	ended *jobResult
	// kept: ended is in the outbox too (removed once recorded)
	kept    bool
	lastErr string
	tries   int
	gen     int
}

// storeRetry asks the actor to look at the store again (gen: only the
// latest counts).
type storeRetry struct{ gen int }

// storeUp reads the task's row, bounded: false when the store does not
// answer (the outage is logged once per wait).
func (a *TaskActor) storeUp() bool {
	ctx, cancel := context.WithTimeout(a.bg(), storeProbe)
	defer cancel()
	_, err := a.deps.Store.GetTask(ctx, a.id)
	if err == nil || errors.Is(err, store.ErrNotFound) {
		if a.outage.tries > 0 {
			a.log.Info("the store answers again", "waited_tries", a.outage.tries)
		}
		a.outage.tries, a.outage.lastErr = 0, ""
		return true
	}
	if a.outage.tries == 0 {
		a.log.Error("the store does not answer: the task's jobs wait for it", "err", err)
	}
	a.outage.lastErr = err.Error()
	return false
}

// holdEnd keeps the running job's result until the store answers.
// An agent turn's end is written to the outbox too, so that it outlives
// the actor.
func (a *TaskActor) holdEnd(ctx actor.Context, r jobResult) {
	a.outage.ended = &r
	a.outage.kept = a.keepEnd(a.running, r)
	a.waitStore(ctx)
}

// keepEnd writes job j's end r to the outbox: false when there is none, the
// job is no agent turn, or the disk refused it (logged: the end is then
// held in memory only).
func (a *TaskActor) keepEnd(j *job, r jobResult) bool {
	ob := outbox(a.deps.Outbox)
	if !ob.on() || j == nil || j.turn == nil || !j.kind().agentTurn() {
		return false
	}
	e := newHeldEnd(a.id, j, r, a.lease.held.Epoch, a.now())
	if err := ob.write(e); err != nil {
		a.log.Error("keep the turn's end in the outbox: it is held in memory only until the store answers", "turn", e.Turn, "err", err)
		return false
	}
	a.log.Warn("the turn's end waits in the outbox for the store", "turn", e.Turn, "kind", e.Kind, "file", ob.path(a.id))
	return true
}

// settleKept removes the outbox entry of job j's end once the store has
// it: its turn is no longer marked running there (else the entry stays,
// and the task's next load records the turn from it).
func (a *TaskActor) settleKept(j *job) {
	if !a.outage.kept {
		return
	}
	a.outage.kept = false
	if j.turn != nil {
		tu, err := a.loadTurn(j.turn.ID)
		if err != nil || tu.Status == store.TurnRunning {
			a.log.Error("the turn's end is not in the store yet: its outbox entry stays for the task's next load", "turn", j.turn.Number, "err", err)
			return
		}
	}
	if err := outbox(a.deps.Outbox).remove(a.id); err != nil {
		a.log.Error("remove the outbox entry of a recorded turn (the task's next load discards it)", "err", err)
	}
}

// readHeld is the task's outbox entry (nil: none). One that cannot be read
// is set aside, reported in the log and on the task.
func (a *TaskActor) readHeld() *heldEnd {
	ob := outbox(a.deps.Outbox)
	e, err := ob.read(a.id)
	if err == nil {
		return e
	}
	to, aerr := ob.setAside(a.id, a.now())
	if aerr != nil {
		a.log.Error("an outbox entry of this task cannot be read, nor set aside: remove it by hand", "err", err, "set_aside_err", aerr)
		return nil
	}
	a.log.Error("an outbox entry of this task cannot be read: set aside, the turn it held is recorded as the store says", "err", err, "set_aside", to)
	a.publish(api.Event{Kind: api.EventTurnNote, Detail: fmt.Sprintf("a turn's end kept on this member during a store outage could not be read (%v); it was set aside as %s and not recorded", err, filepath.Base(to))})
	return nil
}

// heldTurn is the turn of entry e among the task's turns, when the store
// still marks it running (nobody recorded it since): the entry applies.
func heldTurn(e *heldEnd, turns []store.Turn) *store.Turn {
	if e == nil {
		return nil
	}
	for i := range turns {
		if turns[i].ID == e.TurnID && turns[i].Status == store.TurnRunning {
			return &turns[i]
		}
	}
	return nil
}

// staleWhy says why entry e does not apply to the task's turns.
func staleWhy(e *heldEnd, turns []store.Turn) string {
	for i := range turns {
		if tu := &turns[i]; tu.ID == e.TurnID {
			why := fmt.Sprintf("the store recorded turn %d %s meanwhile", tu.Number, tu.Status)
			if tu.Error != "" {
				why += " (" + tu.Error + ")"
			}
			return why
		}
	}
	return fmt.Sprintf("turn %d is not in the store", e.Turn)
}

// discardHeld removes entry e, which no longer applies, saying why.
func (a *TaskActor) discardHeld(e *heldEnd, why string) {
	if e == nil {
		return
	}
	if err := outbox(a.deps.Outbox).remove(a.id); err != nil {
		a.log.Error("remove an outbox entry that no longer applies", "err", err)
	}
	a.log.Warn("discarded the end of a turn kept in the outbox during a store outage", "turn", e.Turn, "kind", e.Kind, "ended_at", e.EndedAt, "why", why)
	a.publish(api.Event{Kind: api.EventTurnNote, Turn: e.Turn, Label: e.Label,
		Detail: fmt.Sprintf("the end of %s, kept on this member during a store outage (it ended %s), was discarded: %s", e.Label, e.EndedAt.Format(time.RFC3339), why)})
}

// replayHeld records turn tu (still running in the store) from entry e as
// it ended; push: the task branch waits to be pushed from this member (a
// cluster's work turn whose push did not land).
func (a *TaskActor) replayHeld(e *heldEnd, tu *store.Turn, turns []store.Turn) (push bool) {
	j := &job{label: tu.Label(), turn: tu, launched: e.Launched, delivered: e.Delivered}
	for i := range turns {
		if e.SetupID != "" && turns[i].ID == e.SetupID && turns[i].Status == store.TurnRunning {
			j.setup = &turns[i]
		}
	}
	if e.Launched {
		// recorded with the turn's end when the store missed the launch
		j.launchedAt = e.EndedAt
		if e.LaunchedAt != nil {
			j.launchedAt = *e.LaunchedAt
		}
	}
	r := e.result()
	switch e.Kind {
	case jobWork.String():
		j.spec = workSpec{tu.ID}
		a.finishWork(j, r)
	case jobAsk.String():
		j.spec = askSpec{e.CommentID}
		a.finishAsk(j, e.CommentID, r)
	}
	after, err := a.loadTurn(tu.ID)
	if err != nil || after.Status == store.TurnRunning {
		a.log.Error("recording a turn from the outbox failed: the entry stays for the task's next load", "turn", tu.Number, "err", err)
		return false
	}
	if err := outbox(a.deps.Outbox).remove(a.id); err != nil {
		a.log.Error("remove the outbox entry of a recorded turn", "err", err)
	}
	a.log.Info("recorded a turn's end from the outbox (it ended during a store outage)", "turn", tu.Number, "kind", e.Kind,
		"status", after.Status, "ended_at", e.EndedAt, "lease_epoch", e.LeaseEpoch)
	a.publish(api.Event{Kind: api.EventTurnNote, Turn: tu.Number, Label: tu.Label(),
		Detail: fmt.Sprintf("%s ended %s during a store outage; recorded from this member's outbox once the store answered", tu.Label(), e.EndedAt.Format(time.RFC3339))})
	if a.deps.Remote == "" || a.task.Status.Ended() {
		return false
	}
	if a.deps.Homes != nil && a.deps.HomeFor != nil {
		// the turn's own save of the agent home met the outage: kept again
		// from here, so a member the task moves to resumes its session
		a.queue = append(a.queue, &job{spec: homeSpec{}, label: "agent home kept in the store", queuedAt: time.Time{}})
	}
	if e.Kind != jobWork.String() || (e.PushTried && e.PushErr == "") {
		return false
	}
	// the commits are in this member's clone only: pushed as a pending push
	now := a.now()
	why := "the turn ended during a store outage; its commits are on this member only"
	if e.PushErr != "" {
		why = e.PushErr
	}
	a.task.PushSince, a.task.PushNext, a.task.PushError, a.task.PushHead = &now, &now, why, e.PushHead
	a.saveTask("record the pending push of a turn from the outbox")
	return true
}

// waitStore schedules the next look at the store, backing off from 1 s to
// 10 s.
func (a *TaskActor) waitStore(ctx actor.Context) {
	a.outage.tries++
	a.outage.gen++
	wait := min(time.Second<<min(a.outage.tries-1, 4), 10*time.Second)
	self, root, gen := ctx.Self(), ctx.ActorSystem().Root, a.outage.gen
	time.AfterFunc(wait, func() { root.Send(self, &storeRetry{gen: gen}) })
}

// waitLease looks again soon (TTL/40): the queue waits for the task's lease
// to be renewed after the renewals an outage missed.
func (a *TaskActor) waitLease(ctx actor.Context) {
	a.outage.gen++
	self, root, gen := ctx.Self(), ctx.ActorSystem().Root, a.outage.gen
	time.AfterFunc(a.deps.leaseTTL()/40, func() { root.Send(self, &storeRetry{gen: gen}) })
}

// onStoreRetry: the store answering, the held end is recorded and the
// next job starts; else another look later.
func (a *TaskActor) onStoreRetry(ctx actor.Context, m *storeRetry) {
	if m.gen != a.outage.gen {
		return
	}
	if !a.storeUp() {
		a.waitStore(ctx)
		return
	}
	if r := a.outage.ended; r != nil && a.running != nil {
		a.outage.ended = nil
		a.completeJob(ctx, *r)
		return
	}
	a.next(ctx)
}

// endKept is abort's way with an agent turn whose end is held: with the
// store answering (and the lease still this actor's) the end is recorded
// as it ended; kept in the outbox, it is left there for the task's next
// load rather than recorded cut off. True: the job is settled, abort
// records nothing more.
func (a *TaskActor) endKept(ctx actor.Context, j *job, r jobResult, cause string) bool {
	if !j.kind().agentTurn() {
		return false
	}
	if !a.lease.lost && a.storeUp() {
		a.running, a.cancel = nil, nil
		a.epoch = nextEpoch()
		a.settlePush(ctx, r.push)
		j.spec.finish(a, ctx, j, r)
		a.settleKept(j)
		return true
	}
	if !a.outage.kept {
		return false
	}
	a.outage.kept = false
	a.running, a.cancel = nil, nil
	a.epoch = nextEpoch()
	turn := 0
	if j.turn != nil {
		turn = j.turn.Number
	}
	a.log.Warn("the task's jobs stop with a turn's end still waiting for the store: it stays in the outbox, and the task's next load here records it", "turn", turn, "cause", cause)
	return true
}

// homeSpec keeps the agent home in the store again, after a turn recorded
// from the outbox (its own save met the outage). Like a push, it travels
// nowhere first: the home here is the newest.
type homeSpec struct{ gitJob }

func (homeSpec) kind() jobKind { return jobHome }

func (homeSpec) prepare(a *TaskActor, _ *job) runJob {
	tr := &travel{log: a.log, worktree: a.task.Worktree, taskID: a.id, kind: jobHome, homes: a.deps.Homes,
		home: a.deps.HomeFor(a.task.Ref()), fresh: a.leaseFresh()}
	return func(ctx context.Context, _ func(int), _ renderPrompt) jobResult {
		if tr.fresh != nil {
			if err := tr.fresh(); err != nil {
				tr.log.Error("the agent home stays on this member", "err", err)
				return jobResult{}
			}
		}
		tr.keepHome(ctx)
		return jobResult{}
	}
}

func (homeSpec) finish(*TaskActor, actor.Context, *job, jobResult) {}
