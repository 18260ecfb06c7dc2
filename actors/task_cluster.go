package actors

// A task actor's state in a cluster. The cluster may place the task on
// another member while this actor runs a job of it (the actor drains: the
// job finishes here, nothing else starts, then it hands over), and an actor
// may start while the store says a turn runs that another member may still
// be running (the actor is held until that is settled). Outside a cluster
// neither happens. Receive tells the placement of each message (arrived);
// next starts nothing while it is paused.

import (
	"errors"
	"os"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"lazy/gitx"
)

// placement is whether the task is moving away (draining) or held.
type placement struct {
	// draining: the task was placed on another member; the running job
	// finishes, no other starts, then the actor hands over and stops
	draining bool
	// held: the store says a turn runs, and another member may be running
	// it (the task moved here while it ran): no job starts until that is
	// settled (heldCheck)
	held bool
	// checks counts the checks while held: they back off to one in 10 s
	// (the handover's wake is what ends a hold; the checks are the safety
	// net for a member that died)
	checks int
	// gen numbers the checks scheduled: only the answer to the latest
	// schedules another, so wakes while held do not start chains of checks
	gen int
}

// paused: no job may start here now.
func (p *placement) paused() bool { return p.draining || p.held }

// heldCheck is the answer to whether another member still runs a job of
// the held task (gen: the check's number).
type heldCheck struct {
	busy bool
	gen  int
}

// quiet messages neither act on the task nor come from a caller: a health
// query, a lifecycle notice, a held check.
func quiet(msg any) bool {
	switch msg.(type) {
	case *heldCheck, *pushRetry, *storeRetry, *GetHealth, *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
		return true
	}
	return false
}

// ownJob messages come from the actor's running job or from this member's
// cluster placement, never relayed by a caller.
func ownJob(msg any) bool {
	switch msg.(type) {
	case *jobDone, *launched, *renderUnblock, *Drain:
		return true
	}
	return false
}

// arrived updates the placement for a message about to be handled.
func (a *TaskActor) arrived(msg any) {
	if a.place.draining && !ownJob(msg) && !quiet(msg) {
		// a call relayed here again: the cluster placed the task back
		a.place.draining = false
		a.log.Info("the task came back to this member; it stays")
	}
	if a.place.held && !quiet(msg) {
		// the member finishing the task's job writes the task row
		// meanwhile: act on the row as it is now, never save a stale one
		a.refreshTask()
	}
}

// drain: the cluster placed the task on another member. With nothing
// running the actor stops at once; else its job finishes first.
func (a *TaskActor) drain(ctx actor.Context) {
	if a.running == nil && !a.pushPending() {
		a.leaveWorktree()
		ctx.Stop(ctx.Self())
		return
	}
	a.place.draining = true
	if a.running == nil {
		a.log.Info("the task moved to another member; its pending push lands from here first")
		a.schedulePush(ctx, 0)
		return
	}
	a.log.Info("the task moved to another member; its running job finishes here first", "job", a.running.label)
}

// heldChecked takes the answer of a check while held: still busy elsewhere,
// another check later; settled, the store's queue runs here (a turn still
// marked running was cut off).
func (a *TaskActor) heldChecked(ctx actor.Context, m *heldCheck) {
	if !a.place.held || m.gen != a.place.gen {
		return // settled, or a later check is on its way
	}
	if m.busy {
		a.place.checks++
		a.checkHeld(ctx, min(time.Second<<min(a.place.checks-1, 4), 10*time.Second))
		return
	}
	a.place.checks = 0
	// nobody runs it: what the store says is the truth now
	a.place.held = false
	kept := a.memoryJobs()
	a.reload(true)
	a.queue = append(a.queue, kept...)
	a.pushFirst(ctx)
	a.next(ctx)
}

// recheckHeld checks at once, while held, whether another member still
// runs the task's job (on start, and on a wake: the member that ran it may
// have handed over).
func (a *TaskActor) recheckHeld(ctx actor.Context) {
	if a.place.held {
		a.checkHeld(ctx, 0)
	}
}

// checkHeld asks, after wait and off the actor, whether another member
// still runs a job of this task; the answer comes back as a heldCheck.
func (a *TaskActor) checkHeld(ctx actor.Context, wait time.Duration) {
	a.place.gen++
	self, root, id, elsewhere, gen := ctx.Self(), ctx.ActorSystem().Root, a.id, a.host.RunningElsewhere, a.place.gen
	time.AfterFunc(wait, func() { root.Send(self, &heldCheck{busy: elsewhere(id), gen: gen}) })
}

// handOver ends a drained actor: jobs only it knew of (a sync, an accept)
// are answered that the task moved, the task's new host is woken to take
// the queue from the store, and the actor stops.
func (a *TaskActor) handOver(ctx actor.Context) {
	for _, j := range a.memoryJobs() {
		if j.sender != nil {
			ctx.Send(j.sender, &BusyError{What: "a move to another cluster member (send it again)"})
		}
	}
	a.queue = nil
	a.leaveWorktree()
	freed := a.endLease() // the new host need not wait for the lease to run out
	if a.host.Handoff != nil {
		go func(id string) { released(freed); a.host.Handoff(id) }(a.id)
	}
	a.log.Info("the task's running job finished; handed over to its new member")
	ctx.Stop(ctx.Self())
}

// memoryJobs are the queued jobs the store does not hold (syncs, accepts,
// decisions): a reload from the store would lose them.
func (a *TaskActor) memoryJobs() []*job {
	var out []*job
	for _, j := range a.queue {
		if !j.kind().agentTurn() {
			out = append(out, j)
		}
	}
	return out
}

// leaveWorktree removes this member's worktree of a task placed on another
// member, once nothing runs in it: its commits are in this clone and on the
// remote (a pending push keeps the actor until it landed), and a job here
// again makes it anew from the remote. Under the task's job lock, so no job
// of this member can be using it; a worktree it cannot lock (or remove) is
// left, and logged.
func (a *TaskActor) leaveWorktree() {
	if a.deps.Remote == "" || a.task == nil || a.running != nil || a.pushPending() {
		return
	}
	tr := a.taskRepo()
	if !tr.on() {
		return
	}
	if _, err := os.Lstat(tr.Worktree); errors.Is(err, os.ErrNotExist) {
		return
	}
	lock, err := gitx.TryLock(a.lockPath(), "remove the worktree of a task that moved to another member")
	if err != nil {
		a.log.Info("the task moved to another member; its worktree here is left", "err", err)
		return
	}
	defer lock.Unlock()
	if err := tr.Remove(); err != nil {
		a.log.Warn("remove the worktree of a task that moved to another member", "err", err)
		return
	}
	a.log.Info("the task moved to another member; its worktree here is removed", "worktree", tr.Worktree)
}
