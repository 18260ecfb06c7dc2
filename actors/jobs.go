package actors

// The kinds of job a task actor's FIFO runs. Each kind is a small type
// behind jobSpec: what it needs before it runs (prepare, in the actor), how
// its slow part runs (the runJob prepare returns, in a goroutine), how it
// ends (finish, in the actor), and what becomes of it when it is cut off or
// dropped. A new kind is one type here, one jobKind constant, and the place
// that queues it.

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"lazy/agent"
	"lazy/store"
	"lazy/task"
)

// jobKind names a kind of job; its traits say how the store and the
// cluster carry it.
type jobKind uint8

const (
	jobWork   jobKind = iota + 1 // a work turn (start, comment, unblock)
	jobAsk                       // a read-only ask turn answering a review question
	jobSync                      // the parent merged into the task branch
	jobAccept                    // the task merged into its parent
	jobDecide                    // out-of-scope files allowed or reverted
	jobApply                     // a reviewer's suggestion committed to the task branch
	jobPush                      // a pending push of the task branch tried again (task_push.go)
	jobHome                      // the agent home kept in the store again (task_store.go)
)

func (k jobKind) String() string {
	switch k {
	case jobWork:
		return "work"
	case jobAsk:
		return "ask"
	case jobSync:
		return "sync"
	case jobAccept:
		return "accept"
	case jobDecide:
		return "decide"
	case jobApply:
		return "apply"
	case jobPush:
		return "push"
	case jobHome:
		return "home"
	}
	return fmt.Sprintf("jobKind(%d)", uint8(k))
}

// agentTurn: the job runs the agent (a turn row in the store holds it, so a
// reload from the store finds it again, and it carries the agent's home
// across members). Other jobs live only in the actor's memory.
func (k jobKind) agentTurn() bool { return k == jobWork || k == jobAsk }

// changesBranch: the job may move the task branch, which a cluster member
// then sends to the git remote (an accept publishes the parent itself).
func (k jobKind) changesBranch() bool {
	return k == jobWork || k == jobSync || k == jobDecide || k == jobApply
}

// runJob is a job's slow part: it reads only what prepare captured.
// onStart reports the agent process started; render asks the actor for an
// unblock's prompt at launch.
type runJob func(ctx context.Context, onStart func(int), render renderPrompt) jobResult

// jobSpec is what one kind of job does.
type jobSpec interface {
	kind() jobKind
	// prepare checks, in the actor, that the job can run now and records its
	// start; nil: refused or failed, and already recorded.
	prepare(a *TaskActor, j *job) runJob
	// finish records, in the actor, how the job ended and answers its waiter.
	finish(a *TaskActor, ctx actor.Context, j *job, r jobResult)
	// interrupted: the running job was cut off (a restart, a stop, a
	// cancel); its turn rows and waiter are already told.
	interrupted(a *TaskActor, j *job, cause string)
	// dropped: the task was cancelled while the job waited in the queue
	// (its waiter is told by the caller).
	dropped(a *TaskActor, j *job)
}

type job struct {
	spec     jobSpec
	label    string
	queuedAt time.Time
	sender   *actor.PID // who waits for the result (sync, accept, decide)

	// set when the job starts
	turn      *store.Turn // the work or ask turn row
	setup     *store.Turn // the setup turn row run before the first work turn
	delivered []string    // comments rendered into an unblock prompt
	launched  bool
	// launchedAt is when its agent process started (recorded with the
	// turn's start; again at its end when the store did not answer)
	launchedAt time.Time
	message    string // an unblock's own message, rendered after its comments at launch
}

func (j *job) kind() jobKind { return j.spec.kind() }

// --- work ---

type workSpec struct{ turnID string }

func newWorkJob(tu *store.Turn, queuedAt time.Time) *job {
	return &job{spec: workSpec{tu.ID}, label: tu.Label(), queuedAt: queuedAt}
}

func (workSpec) kind() jobKind                                             { return jobWork }
func (s workSpec) prepare(a *TaskActor, j *job) runJob                     { return a.prepareWork(j, s.turnID) }
func (workSpec) finish(a *TaskActor, _ actor.Context, j *job, r jobResult) { a.finishWork(j, r) }

// interrupted: the work turn did not finish, so the task failed.
func (workSpec) interrupted(a *TaskActor, j *job, cause string) {
	if a.task != nil && !a.task.Status.Ended() {
		a.setStatus(task.Failed, fmt.Sprintf("%s interrupted: %s; unblock the task to continue", j.label, cause))
	}
}

func (s workSpec) dropped(a *TaskActor, _ *job) {
	if tu, err := a.loadTurn(s.turnID); err == nil {
		a.endTurn(tu, agent.Outcome{}, "", store.TurnFailed, "the task was cancelled before this turn ran")
	}
}

// --- ask ---

type askSpec struct{ commentID string }

func newAskJob(commentID string, queuedAt time.Time) *job {
	return &job{spec: askSpec{commentID}, label: "ask " + task.ShortID(commentID), queuedAt: queuedAt}
}

func (askSpec) kind() jobKind                         { return jobAsk }
func (s askSpec) prepare(a *TaskActor, j *job) runJob { return a.prepareAsk(j, s.commentID) }
func (s askSpec) finish(a *TaskActor, _ actor.Context, j *job, r jobResult) {
	a.finishAsk(j, s.commentID, r)
}

// interrupted: the ask stays pending and runs again after the restart.
func (askSpec) interrupted(*TaskActor, *job, string) {}

func (s askSpec) dropped(a *TaskActor, _ *job) {
	if c, err := a.loadComment(s.commentID); err == nil && c != nil {
		a.failAsk(c, "The task was cancelled before the agent answered.")
	}
}

// --- sync, accept, decide: git jobs with a waiter ---

// gitJob is what the git jobs share: nothing in the store to put right when
// one is cut off or dropped (its waiter hears of it).
type gitJob struct{}

func (gitJob) interrupted(*TaskActor, *job, string) {}
func (gitJob) dropped(*TaskActor, *job)             {}

type syncSpec struct{ gitJob }

func newSyncJob(parent string, queuedAt time.Time) *job {
	return &job{spec: syncSpec{}, label: "sync with " + parent, queuedAt: queuedAt}
}

func (syncSpec) kind() jobKind { return jobSync }

func (syncSpec) prepare(a *TaskActor, _ *job) runJob {
	tr := taskRepoOf(a.deps, a.task)
	return func(ctx context.Context, _ func(int), _ renderPrompt) jobResult { return runSync(ctx, tr) }
}

func (syncSpec) finish(a *TaskActor, ctx actor.Context, j *job, r jobResult) {
	a.answer(ctx, j, a.finishSync(r))
}

type acceptSpec struct {
	gitJob
	args Accept
}

func (acceptSpec) kind() jobKind { return jobAccept }

func (s acceptSpec) prepare(a *TaskActor, _ *job) runJob {
	t, deps, args := *a.task, a.deps, s.args
	return func(ctx context.Context, _ func(int), _ renderPrompt) jobResult {
		return runAccept(ctx, deps, &t, args)
	}
}

func (acceptSpec) finish(a *TaskActor, ctx actor.Context, j *job, r jobResult) {
	reply, ended := a.finishAccept(r)
	a.answer(ctx, j, reply)
	if ended {
		ctx.Stop(ctx.Self())
	}
}

type decideSpec struct {
	gitJob
	args ViolationDecision
}

func (decideSpec) kind() jobKind { return jobDecide }

func (s decideSpec) prepare(a *TaskActor, _ *job) runJob {
	t, deps, args := *a.task, a.deps, s.args
	return func(ctx context.Context, _ func(int), _ renderPrompt) jobResult {
		return runDecide(ctx, deps, &t, args)
	}
}

func (decideSpec) finish(a *TaskActor, ctx actor.Context, j *job, r jobResult) {
	a.answer(ctx, j, a.gitReply(r))
}
