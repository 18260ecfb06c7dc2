package actors

// Pushes that wait. In a cluster a job that changed the task branch pushes
// it to the git remote as it departs (travel.depart). When the remote
// refuses or cannot be reached, the commit is on this member's clone only:
// the task records the push pending (store.Task.Push*, shown on the task),
// and the host tries again with backoff until it lands. Meanwhile the
// task's later steps wait for it: an accept pushes the branch first and is
// refused as busy while that fails; a drained actor does not hand the task
// over while its push is pending (it reports a job running, so the new
// host stays held until it lands).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"lazy/api"
	"lazy/gitx"
	"lazy/store"
	"lazy/task"
)

// pushTry is what a job's push of the task branch did.
type pushTry struct {
	tried bool
	head  string // the commit pushed (or that waits)
	err   error
	// lost: the commit that waited is not in this clone (the member that
	// made it left before its push landed): nobody can push it now
	lost string
}

// Backoff of the push retries: the first after PushRetryBase, doubling,
// at most PushRetryMax, each jittered by up to a fifth either way.
const (
	PushRetryBase = 2 * time.Second
	PushRetryMax  = 2 * time.Minute
)

// pushRetry asks the actor to try the pending push again (gen: the retry's
// number; only the latest counts).
type pushRetry struct{ gen int }

// pushBackoff is the wait before try n+1 after n failed tries.
func pushBackoff(base, most time.Duration, tries int) time.Duration {
	d := base << min(max(tries-1, 0), 16)
	if d <= 0 || d > most {
		d = most
	}
	jitter := time.Duration(rand.Int64N(int64(d)/5+1)) * 2
	return d - d/5 + jitter
}

func (a *TaskActor) pushBase() (time.Duration, time.Duration) {
	base, most := PushRetryBase, PushRetryMax
	if a.deps.PushRetryBase > 0 {
		base = a.deps.PushRetryBase
	}
	if a.deps.PushRetryMax > 0 {
		most = a.deps.PushRetryMax
	}
	return base, most
}

// pushPending: a push of the task branch waits to land.
func (a *TaskActor) pushPending() bool { return a.task != nil && a.task.PushSince != nil }

// settlePush records on the task what a job's push did: landed (a pending
// push is cleared), or failed (the push is pending, a retry scheduled).
func (a *TaskActor) settlePush(ctx actor.Context, p pushTry) {
	if !p.tried || a.task == nil {
		return
	}
	now := a.now()
	if p.lost != "" {
		// the task is failed with the reason, so the reviewer learns it
		// (task show, the task's JSON and page, an event) and decides
		a.task.PushSince, a.task.PushNext, a.task.PushError, a.task.PushHead, a.task.PushTries = nil, nil, "", "", 0
		note := lostWords(p.lost, a.deps.Remote, a.task.Branch)
		a.log.Error("a pending push cannot be made from this member: its commit is lost", "commit", p.lost)
		a.markLost(p.lost)
		a.setStatus(task.Failed, note)
		a.publish(api.Event{Kind: api.EventPush, Detail: note})
		return
	}
	if p.err == nil {
		if a.task.PushSince == nil {
			return
		}
		since := *a.task.PushSince
		a.task.PushSince, a.task.PushNext, a.task.PushError, a.task.PushHead, a.task.PushTries = nil, nil, "", "", 0
		a.saveTask("record the push landed")
		a.log.Info("the task branch's pending push landed", "pending_for", now.Sub(since).Round(time.Millisecond))
		a.publish(api.Event{Kind: api.EventPush, Detail: fmt.Sprintf("pushed to the cluster's git remote (pending since %s)", since.Format(time.RFC3339))})
		return
	}
	if a.task.PushSince == nil {
		a.task.PushSince = &now
	}
	a.task.PushTries++
	base, most := a.pushBase()
	next := now.Add(pushBackoff(base, most, a.task.PushTries))
	a.task.PushNext, a.task.PushError = &next, p.err.Error()
	if p.head != "" {
		a.task.PushHead = p.head
	}
	a.saveTask("record the pending push")
	a.log.Warn("push of the task branch to the cluster's git remote failed; trying again", "tries", a.task.PushTries, "next", next, "err", p.err)
	a.publish(api.Event{Kind: api.EventPush, Detail: api.PushWords(a.task.PushSince, a.task.PushError, a.task.PushNext, now)})
	a.schedulePush(ctx, next.Sub(now))
}

// markLost records on the last work turn that ended done that its commit
// was lost: the task's reason goes with its next turn, the turn's record
// stays (lazy task show lists it beside the turn).
func (a *TaskActor) markLost(commit string) {
	turns, err := a.store().ListTurns(a.bg(), a.id)
	if err != nil {
		a.log.Error("load turns", "err", err)
		return
	}
	for i := len(turns) - 1; i >= 0; i-- {
		if tu := &turns[i]; tu.Kind == store.TurnWork && tu.Status == store.TurnDone {
			tu.Error = fmt.Sprintf("its commit %s never reached the cluster's git remote and was lost with the member that made it", commit[:min(12, len(commit))])
			if err := a.store().SaveTurn(a.bg(), tu); err != nil {
				a.log.Error("record the lost commit on its turn", "err", err)
			}
			return
		}
	}
}

// lostWords tells the reviewer that commit never reached the remote and
// what to do.
func lostWords(commit, remote, branch string) string {
	return fmt.Sprintf("commit %s never reached the cluster's git remote: the member that made it left the cluster before its push landed, "+
		"and no other member has it, so the task branch is as the remote has it, without that commit. Unblock the task to redo that work; "+
		"or, if that member's clone is still there, push the commit from it first (git push %s %s:refs/heads/%s) and then unblock",
		commit[:min(12, len(commit))], remote, commit, branch)
}

// schedulePush sends the actor a pushRetry after wait.
func (a *TaskActor) schedulePush(ctx actor.Context, wait time.Duration) {
	a.pushGen++
	self, root, gen := ctx.Self(), ctx.ActorSystem().Root, a.pushGen
	time.AfterFunc(max(wait, 0), func() { root.Send(self, &pushRetry{gen: gen}) })
}

// resumePush schedules the retry of a push the store says is pending (an
// actor that starts on the member that made it: its clone has the commit).
func (a *TaskActor) resumePush(ctx actor.Context) {
	if !a.pushPending() || a.deps.Remote == "" {
		return
	}
	wait := time.Duration(0)
	if a.task.PushNext != nil {
		wait = a.task.PushNext.Sub(a.now())
	}
	a.schedulePush(ctx, wait)
}

// pushFirst, as the task is taken up on this member, tries a pending push
// at once, ahead of its queue: when this clone has the commit (this member
// made it) it goes out, and when it does not (the member that made it left
// the cluster) the task says the commit is lost before any job here works
// on the branch without it.
func (a *TaskActor) pushFirst(ctx actor.Context) {
	if !a.pushPending() || a.deps.Remote == "" || a.running != nil || a.task.Status.Ended() {
		a.resumePush(ctx)
		return
	}
	a.start(ctx, &job{spec: pushSpec{}, label: "push of the task branch", queuedAt: a.now()})
}

// onPushRetry tries the pending push again: as the next job, ahead of the
// queue, when nothing runs; a job running now pushes as it departs, or
// the retry is scheduled again when it ends.
func (a *TaskActor) onPushRetry(ctx actor.Context, m *pushRetry) {
	if m.gen != a.pushGen || !a.pushPending() || a.task.Status.Ended() {
		return
	}
	if a.running != nil || a.place.held {
		base, _ := a.pushBase()
		a.schedulePush(ctx, base)
		return
	}
	a.start(ctx, &job{spec: pushSpec{}, label: "push of the task branch", queuedAt: a.now()})
}

// saveTask writes the task row; a failure is logged (what names the step).
func (a *TaskActor) saveTask(what string) {
	a.task.UpdatedAt = a.now()
	if err := a.store().SaveTask(a.bg(), a.task); err != nil {
		a.log.Error(what, "err", err)
	}
}

// pushSpec is the retry of a pending push: no arrival (the commit is in
// this clone), just the push.
type pushSpec struct{ gitJob }

func (pushSpec) kind() jobKind { return jobPush }

func (pushSpec) prepare(a *TaskActor, _ *job) runJob {
	root, remote, branch, want := a.deps.Root, a.deps.Remote, a.task.Branch, a.task.PushHead
	return func(ctx context.Context, _ func(int), _ renderPrompt) jobResult {
		if want != "" {
			if _, err := gitx.RevParse(ctx, root, want+"^{commit}"); err != nil {
				// not in this clone: on the remote after all (the push
				// landed, its record did not), or lost
				if err := gitx.Fetch(ctx, root, remote, branch); err != nil {
					return jobResult{push: pushTry{tried: true, head: want, err: err}}
				}
				if _, err := gitx.RevParse(ctx, root, want+"^{commit}"); err != nil {
					return jobResult{push: pushTry{tried: true, lost: want}}
				}
				if err := gitx.Follow(ctx, root, remote, branch); err != nil {
					return jobResult{push: pushTry{tried: true, head: want, err: err}}
				}
			}
		}
		return jobResult{push: pushBranch(ctx, root, remote, branch)}
	}
}

func (pushSpec) finish(*TaskActor, actor.Context, *job, jobResult) {}

// pushBranch sends the task branch to the remote (nothing when the remote
// has it already).
func pushBranch(ctx context.Context, root, remote, branch string) pushTry {
	head, _ := gitx.RevParse(ctx, root, "refs/heads/"+branch)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return pushTry{tried: true, head: head, err: gitx.Depart(ctx, root, remote, branch)}
}
