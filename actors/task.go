package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"lazy/agent"
	"lazy/api"
	"lazy/errkind"
	"lazy/gitx"
	"lazy/review"
	"lazy/store"
	"lazy/task"
)

// TurnLauncher runs one agent turn (agent.Launcher in production).
type TurnLauncher interface {
	RunTurn(ctx context.Context, req agent.TurnRequest) (agent.Result, agent.Outcome, error)
}

// SetupRunner runs the project's setup ([setup] run) in a task's sandbox
// and worktree before its first work turn (agent.Launcher in production).
type SetupRunner interface {
	SetupCommands() []string
	// RunSetup returns the commands' output; its error names the command
	// that failed.
	RunSetup(ctx context.Context, req agent.TurnRequest, commands []string) (string, error)
}

// TaskDeps is what every task actor needs from the daemon, given whole
// before the first actor starts (Validate names what is missing). What the
// actor tree itself gives each actor is TaskHost.
type TaskDeps struct {
	Store    store.Store  // required
	Launcher TurnLauncher // required
	Setup    SetupRunner  // nil: no setup
	LockDir  string       // required
	Log      *slog.Logger // required
	Now      func() time.Time
	// Root is the project's git top level (accept merges there).
	Root string
	// RecoveryDir keeps an unblock's message until its turn launched.
	RecoveryDir string
	// Outbox keeps the end of an agent turn the store could not take when
	// it ended, until the store has it (outbox.go; "" : held in memory only).
	Outbox string
	// Protect lists globs of paths whose changes need the passphrase.
	Protect []string
	// CheckPassphrase verifies the approval passphrase for a task (attempts
	// are rate-limited per task). Required.
	CheckPassphrase func(taskID, pass string) error
	// AskTimeout is reported in the reason of an ask that timed out.
	AskTimeout time.Duration
	// Remote, in a cluster, is the git remote task branches travel
	// through: a job first brings its branch and parent from it (making the
	// worktree under WorktreeDir when this member has none) and sends what
	// it changed back.
	Remote      string
	WorktreeDir string
	// Homes keeps each task's agent home (its sessions) in the shared
	// store, so the member a task moves to resumes the same conversation;
	// HomeFor is where this member keeps a task's agent home.
	Homes   HomeStore
	HomeFor func(ref string) string
	// PushRetryBase and PushRetryMax bound the backoff of a pending push's
	// retries (0: PushRetryBase, PushRetryMax).
	PushRetryBase, PushRetryMax time.Duration
	// Agent is the agent a turn launched now runs (driver name, command;
	// nil: not known), for telling the reviewer that the next turn starts
	// a new conversation.
	Agent func() (driver, command string)
	// Leases, in a cluster, fence each task's writes by its host's lease
	// (task_lease.go); LeaseHolder names this member (and its process's
	// life) in them; LeaseTTL is their TTL (0: DefaultLeaseTTL). Leases
	// nil: one daemon, no lease.
	Leases      store.Leases
	LeaseHolder string
	LeaseTTL    time.Duration

	// protect replaces Protect once SetProtect is called (a config reload)
	protect atomic.Pointer[[]string]
}

// Validate names the required fields left out: a tree built without one
// refuses to start rather than fail on the first job that needs it.
func (d *TaskDeps) Validate() error {
	var missing []string
	for name, absent := range map[string]bool{
		"Store": d.Store == nil, "Launcher": d.Launcher == nil, "LockDir": d.LockDir == "", "Log": d.Log == nil,
		"CheckPassphrase": d.CheckPassphrase == nil,
	} {
		if absent {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("task actors: %s missing from TaskDeps (the daemon builds it whole before the actor tree)", strings.Join(missing, ", "))
	}
	return nil
}

// TaskHost is what the actor tree gives each of its task actors: where
// events go, how grants are revoked, and, in a cluster, the other members.
type TaskHost struct {
	Publish func(api.Event)           // nil: events are dropped
	Revoke  func(taskID string) error // nil: no grants to revoke
	// RunningElsewhere, in a cluster, reports whether another member's
	// actor of the task is running a job now (the task was moved here
	// while it ran): this actor then waits for it rather than record the
	// turn cut off. Handoff sends a wake to the task wherever the cluster
	// places it now (a drained actor's last act). Both nil outside a
	// cluster.
	RunningElsewhere func(taskID string) bool
	Handoff          func(taskID string)
}

// SetProtect changes the protected paths for every check from now on.
func (d *TaskDeps) SetProtect(paths []string) {
	p := slices.Clone(paths)
	d.protect.Store(&p)
}

// ProtectPaths are the protected paths in force.
func (d *TaskDeps) ProtectPaths() []string {
	if p := d.protect.Load(); p != nil {
		return *p
	}
	return d.Protect
}

// ErrEnded refuses work on a task that has ended.
var ErrEnded = errkind.New(errkind.Ended, "task has ended")

// BusyError refuses an operation that needs the task idle.
type BusyError struct{ What string }

func (e *BusyError) Error() string {
	return fmt.Sprintf("the task is busy (%s); try again when it is done", e.What)
}

type jobResult struct {
	result  agent.Result
	outcome agent.Outcome
	err     error
	// synced is what a sync did; merged: an accept merged the branch,
	// from base (the parent's head before) to head (the head that went in)
	synced     *SyncDone
	merged     bool
	base, head string
	// undone is what an ask changed and the daemon put back, in words
	undone string
	// setupOut is the setup's output; setupFailed: it failed (err says
	// which command) and the work turn did not run
	setupOut    string
	setupFailed bool
	// push is what the job's push of the task branch did (cluster only)
	push pushTry
}

// TaskActor owns one task. Its FIFO runs one job at a time — work turns,
// asks, syncs, accepts — in a goroutine whose end comes back as a message, so
// the mailbox answers queries at once while a job runs, and an ask is "in
// flight" exactly while its job waits or runs.
type TaskActor struct {
	id   string
	deps *TaskDeps
	host TaskHost
	log  *slog.Logger

	task    *store.Task
	queue   []*job
	running *job
	since   time.Time
	epoch   int
	cancel  context.CancelFunc
	resCh   chan jobResult
	lastErr string
	// delivering are the comments rendered into the prompt of the turn that
	// is starting now: from then on they can no longer be withdrawn
	delivering map[string]bool
	// place is the task's state in a cluster (moving away, or held while
	// another member may still run its job); see task_cluster.go
	place placement
	// lease is the actor's hold on the task's lease in a cluster
	// (task_lease.go)
	lease leasing
	// pushGen numbers the scheduled retries of a pending push
	pushGen int
	// outage is what waits for the store to answer again (task_store.go)
	outage storeWait
	// tripsAgain counts the wires tripped since the task's grant was
	// revoked (tripped)
	tripsAgain int
}

// epochs numbers jobs across every actor instance: a job's end that arrives
// after a restart must never be taken for the new instance's job.
var epochs atomic.Int64

func nextEpoch() int { return int(epochs.Add(1)) }

// NewTaskActor returns the producer of the actor for task id; deps must
// be valid (TaskDeps.Validate).
func NewTaskActor(id string, deps *TaskDeps, host TaskHost) actor.Producer {
	return func() actor.Actor {
		return &TaskActor{id: id, deps: deps, host: host, log: deps.Log.With("task", task.ShortID(id))}
	}
}

func (a *TaskActor) now() time.Time {
	if a.deps.Now != nil {
		return a.deps.Now().UTC()
	}
	return time.Now().UTC()
}

func (a *TaskActor) bg() context.Context { return context.Background() }

// Receive handles one message: lifecycle notices, the ends of the actor's
// own jobs and the cluster's placement here; every other message is a
// command (command).
func (a *TaskActor) Receive(ctx actor.Context) {
	a.arrived(ctx.Message())
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if a.startLease(ctx) {
			a.loadTask() // the rest once the lease is taken
			return
		}
		a.reload(false)
		a.recheckHeld(ctx)
		a.resumePush(ctx)
		a.next(ctx)
	case *actor.Restarting:
		a.abort(ctx, "the task actor restarted after a failure")
		a.endLease()
	case *actor.Stopping:
		a.abort(ctx, "the daemon stopped")
		a.endLease()
	case *leaseTaken:
		a.onLeaseTaken(ctx, m)
	case *leaseLost:
		a.onLeaseLost(ctx, m)
	case *Drain:
		a.drain(ctx)
	case *heldCheck:
		a.heldChecked(ctx, m)
	case *launched:
		a.onLaunchedMsg(m)
	case *renderUnblock:
		a.onRenderUnblock(ctx, m)
	case *jobDone:
		a.onJobDone(ctx, m)
	case *pushRetry:
		a.onPushRetry(ctx, m)
	case *storeRetry:
		a.onStoreRetry(ctx, m)
	case *GetHealth:
		ctx.Respond(a.health())
	case *InjectPanic:
		panic(fmt.Sprintf("injected: %s", m.Reason))
	default:
		a.command(ctx)
	}
}

// command handles the task's commands (messages.go), one call each.
func (a *TaskActor) command(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *StartWork:
		wq, err := a.queueWork(m.Trigger, m.Prompt, "")
		reply(ctx, wq, err)
		a.next(ctx)
	case *Unblock:
		wq, err := a.unblock(m.Message, m.ID)
		reply(ctx, wq, err)
		a.next(ctx)
	case *AddComment:
		ca, err := a.addComment(m.Body)
		reply(ctx, ca, err)
		a.next(ctx)
	case *PostReviewComment:
		c, err := a.postReviewComment(m.Comment)
		reply(ctx, c, err)
		a.next(ctx)
	case *RetryAsk:
		ad, err := a.retryAsk(m.ID)
		reply(ctx, ad, err)
		a.next(ctx)
	case *WithdrawComment:
		ad, err := a.withdraw(m.ID)
		reply(ctx, ad, err)
	case *Sync:
		a.sync(ctx, m.Wait)
	case *Accept:
		a.startExclusive(ctx, &job{spec: acceptSpec{args: *m}, label: "accept"})
	case *ViolationDecision:
		a.startExclusive(ctx, &job{spec: decideSpec{args: *m}, label: m.Decision + " out-of-scope files"})
	case *ApplySuggestion:
		a.applySuggestion(ctx, m)
	case *Approve:
		reply(ctx, &Done{}, a.approve(m))
	case *CancelTask:
		a.cancelAndStop(ctx)
	case *Wake:
		ctx.Respond(&Done{})
		a.recheckHeld(ctx) // the member that ran it may have handed over
		a.next(ctx)
	case *Tripwire:
		a.tripped(m.What)
	case *Rename:
		a.rename(ctx, m.Title)
	case *SetBudget:
		reply(ctx, &Done{}, a.setBudget(m.Tokens))
	}
}

// sync queues a merge of the parent; with wait the sender hears when it is
// done, without at once where it stands in the queue.
func (a *TaskActor) sync(ctx actor.Context, wait bool) {
	if err := a.requireLive(); err != nil {
		ctx.Respond(err)
		return
	}
	j := newSyncJob(a.task.Parent, a.now())
	if wait {
		j.sender = ctx.Sender()
	} else {
		ctx.Respond(&SyncQueued{Position: len(a.queue) + a.busyCount()})
	}
	a.queue = append(a.queue, j)
	a.next(ctx)
}

// cancelAndStop ends the task and stops the actor.
func (a *TaskActor) cancelAndStop(ctx actor.Context) {
	if err := a.cancelTask(ctx); err != nil {
		ctx.Respond(err)
		return
	}
	ctx.Respond(&Done{})
	ctx.Stop(ctx.Self())
}

func (a *TaskActor) setBudget(tokens int64) error {
	if a.task == nil {
		return fmt.Errorf("task %s: %w", a.id, store.ErrNotFound)
	}
	a.task.BudgetTokens, a.task.UpdatedAt = tokens, a.now()
	if err := a.store().SaveTask(a.bg(), a.task); err != nil {
		return err
	}
	a.publish(api.Event{Kind: api.EventBudget, Detail: fmt.Sprintf("token budget set to %d", tokens)})
	return nil
}

// onLaunchedMsg: the running job's agent process started.
func (a *TaskActor) onLaunchedMsg(m *launched) {
	if m.epoch == a.epoch && a.running != nil {
		a.onLaunched(a.running)
	}
}

// onRenderUnblock answers the running job's request for its unblock prompt.
func (a *TaskActor) onRenderUnblock(ctx actor.Context, m *renderUnblock) {
	if m.epoch != a.epoch || a.running == nil {
		ctx.Respond(errors.New("the turn was cut off before it launched"))
		return
	}
	prompt, err := a.renderUnblock(a.running)
	reply(ctx, prompt, err)
}

// onJobDone records the end of the running job and starts the next (or,
// moving away, hands the task over).
func (a *TaskActor) onJobDone(ctx actor.Context, m *jobDone) {
	if m.epoch != a.epoch || a.running == nil {
		return
	}
	r := <-a.resCh
	if !a.storeUp() {
		// the store does not answer: the job's end waits, held in the
		// actor, until it does (task_store.go)
		a.holdEnd(ctx, r)
		return
	}
	a.completeJob(ctx, r)
}

// completeJob records the end of the running job (its result r) and
// starts the next job.
func (a *TaskActor) completeJob(ctx actor.Context, r jobResult) {
	j := a.running
	a.running, a.cancel = nil, nil
	a.settlePush(ctx, r.push)
	j.spec.finish(a, ctx, j, r)
	a.settleKept(j)
	if a.place.draining {
		if a.pushPending() {
			// the commits are on this clone only: the task is handed
			// over once they are on the remote (task_push.go)
			return
		}
		a.handOver(ctx)
		return
	}
	a.next(ctx)
}

// reply answers the sender (when there is one) with v, or with err when
// there is an error: every handler returns (T, error) and this is the one
// place they become a reply.
func reply[T any](ctx actor.Context, v T, err error) {
	if ctx.Sender() == nil {
		return
	}
	if err != nil {
		ctx.Respond(err)
		return
	}
	ctx.Respond(v)
}

func (a *TaskActor) busyCount() int {
	if a.running != nil {
		return 1
	}
	return 0
}

// reload rebuilds state from the store: the task row, its queued turns and
// pending asks in the order they were queued. A turn still marked running
// was cut off by a restart, unless (in a cluster, before that is settled:
// settled false) another member may still be running it: then the actor is
// held.
func (a *TaskActor) reload(settled bool) {
	t, err := a.store().GetTask(a.bg(), a.id)
	if err != nil {
		a.log.Error("load task", "err", err)
		a.task = nil
		return
	}
	a.task = t
	a.queue = nil
	held := a.readHeld()
	if t.Status.Ended() {
		a.discardHeld(held, fmt.Sprintf("the task has ended (%s)", t.Status))
		return
	}
	if a.deps.Remote != "" {
		// this member's own worktree of the task (made by the first job)
		t.Worktree = filepath.Join(a.deps.WorktreeDir, t.Ref())
	}
	turns, err := a.store().ListTurns(a.bg(), a.id)
	if err != nil {
		a.log.Error("load turns", "err", err)
		return
	}
	// a turn whose end this machine's outbox kept is recorded from it
	replay := heldTurn(held, turns)
	for i := range turns {
		tu := &turns[i]
		switch tu.Status {
		case store.TurnQueued:
			a.queue = append(a.queue, newWorkJob(tu, tu.QueuedAt))
		case store.TurnRunning:
			if replay != nil && (tu.ID == replay.ID || tu.ID == held.SetupID) {
				continue
			}
			if !settled && a.host.RunningElsewhere != nil {
				a.place.held = true
				a.log.Info("a turn of this task is marked running: waiting to learn whether another member still runs it", "turn", tu.Number)
				continue
			}
			cause := "the task actor restarted during the turn"
			if a.deps.Remote != "" {
				cause = "its host stopped it: the member stopped, or lost the task's lease (the store did not answer for 7 s)"
			}
			a.endTurn(tu, agent.Outcome{}, "", store.TurnInterrupted, cause)
			if a.deps.Remote != "" && tu.Kind == store.TurnWork && t.Status == task.Running {
				// placed anew after its host stopped it: the turn's work
				// since its last push is gone, and the reviewer decides what
				// next; the comments it carried go with the next work turn
				again := ""
				if n := a.requeueDelivered(tu); n > 0 {
					again = fmt.Sprintf("; the %d comments it carried are queued again for the next work turn", n)
				}
				a.setStatus(task.Failed, fmt.Sprintf("work turn %d was cut off: %s; its work since the turn began is lost%s. Unblock the task to run it again", tu.Number, cause, again))
			}
		}
	}
	if !settled && a.host.RunningElsewhere != nil && t.PushSince != nil {
		// the member that made the task's last commits may still be
		// pushing them: wait until it is done (task_push.go)
		a.place.held = true
		a.log.Info("a push of this task's branch is pending: waiting to learn whether another member still has it")
	}
	push := false
	if replay != nil {
		push = a.replayHeld(held, replay, turns)
	} else if held != nil {
		a.discardHeld(held, staleWhy(held, turns))
	}
	cs, err := a.store().ListReviewComments(a.bg(), a.id)
	if err != nil {
		a.log.Error("load review comments", "err", err)
		return
	}
	for i := range cs {
		if cs[i].InFlight() {
			a.queue = append(a.queue, newAskJob(cs[i].ID, cs[i].CreatedAt))
		}
	}
	sort.SliceStable(a.queue, func(i, j int) bool { return a.queue[i].queuedAt.Before(a.queue[j].queuedAt) })
	if push {
		// before any other job: the next one's arrival must find the
		// branch on the remote
		a.queue = append([]*job{{spec: pushSpec{}, label: "push of the task branch", queuedAt: a.now()}}, a.queue...)
	}
}

// requeueDelivered puts the comments a work turn carried back in the queue
// when the turn was cut off and its work lost (they showed "delivered"
// while nothing of them reached the branch): the next work turn carries
// them again. It returns how many.
func (a *TaskActor) requeueDelivered(tu *store.Turn) int {
	cs, err := a.store().ListReviewComments(a.bg(), a.id)
	if err != nil {
		a.log.Error("requeue the comments of a cut-off turn", "turn", tu.Number, "err", err)
		return 0
	}
	n := 0
	for i := range cs {
		c := &cs[i]
		if c.DeliveryState != review.Delivered || c.DeliveredTurn != tu.WorkNumber() {
			continue
		}
		c.DeliveryState, c.DeliveredTurn = review.PendingDelivery, 0
		if err := a.store().SaveReviewComment(a.bg(), c); err != nil {
			a.log.Error("requeue a comment of a cut-off turn", "comment", c.ID, "err", err)
			continue
		}
		n++
	}
	return n
}

// loadTask loads the task row alone, with this member's worktree, for the
// commands taken while the actor waits for the task's lease.
func (a *TaskActor) loadTask() {
	t, err := a.deps.Store.GetTask(a.bg(), a.id)
	if err != nil {
		a.log.Error("load task", "err", err)
		return
	}
	if a.deps.Remote != "" {
		t.Worktree = filepath.Join(a.deps.WorktreeDir, t.Ref())
	}
	a.task = t
}

// refreshTask reads the task row again (keeping this member's worktree).
func (a *TaskActor) refreshTask() {
	t, err := a.store().GetTask(a.bg(), a.id)
	if err != nil {
		a.log.Error("load task", "err", err)
		return
	}
	if a.task != nil {
		t.Worktree = a.task.Worktree
	}
	a.task = t
}

func (a *TaskActor) requireLive() error {
	if a.task == nil {
		return fmt.Errorf("task %s: %w", a.id, store.ErrNotFound)
	}
	if a.task.Status.Ended() {
		return fmt.Errorf("task %s is %s: %w; start a new task instead", a.task.Ref(), a.task.Status, ErrEnded)
	}
	return nil
}

func (a *TaskActor) approve(m *Approve) error {
	if err := a.requireLive(); err != nil {
		return err
	}
	if len(m.Files) == 0 {
		return &review.RuleError{Reason: "name the files to approve: --file PATH"}
	}
	if err := a.deps.CheckPassphrase(a.id, m.Passphrase); err != nil {
		return &review.Refusal{Message: err.Error(), Cause: err}
	}
	// the content approved is the branch's now: a later change to the
	// file needs a new approval
	return approveAt(a.bg(), a.deps, a.id, a.task.Branch, m.Files, a.now())
}

// startExclusive runs accept and violation decisions only on an idle task.
func (a *TaskActor) startExclusive(ctx actor.Context, j *job) {
	if err := a.requireLive(); err != nil {
		ctx.Respond(err)
		return
	}
	if a.running != nil {
		ctx.Respond(&BusyError{What: a.running.label})
		return
	}
	if a.place.held {
		ctx.Respond(&BusyError{What: "a turn another cluster member is finishing"})
		return
	}
	if a.lease.lost {
		// another member took the task's lease: this member waits for it
		ctx.Respond(&BusyError{What: "the task's lease, which another cluster member holds until it is released or runs out"})
		return
	}
	// an actor that has not taken its lease yet (it just started) runs
	// the job once it has
	if len(a.queue) > 0 {
		ctx.Respond(&BusyError{What: a.queue[0].label + " is queued"})
		return
	}
	if a.task.Status == task.Running {
		ctx.Respond(&BusyError{What: "a work turn"})
		return
	}
	j.sender, j.queuedAt = ctx.Sender(), a.now()
	a.queue = append(a.queue, j)
	a.next(ctx)
}

// next starts the head of the queue when nothing runs (and the task is
// neither moving away nor waiting for another member's job).
func (a *TaskActor) next(ctx actor.Context) {
	if a.place.paused() || a.leasePending() {
		return
	}
	for a.running == nil && len(a.queue) > 0 && a.task != nil && !a.task.Status.Ended() {
		if !a.storeUp() {
			// a job's start writes to the store: it waits until it answers
			a.waitStore(ctx)
			return
		}
		if !a.leaseRecent() {
			// and, in a cluster, until the task's lease is renewed
			a.waitLease(ctx)
			return
		}
		j := a.queue[0]
		a.queue = a.queue[1:]
		a.start(ctx, j)
	}
}

func (a *TaskActor) lockPath() string { return filepath.Join(a.deps.LockDir, a.id+".lock") }

// start prepares a job in the actor and runs its slow part in a goroutine.
func (a *TaskActor) start(ctx actor.Context, j *job) {
	run := j.spec.prepare(a, j)
	if run == nil {
		return // refused or failed while preparing; already recorded
	}
	jctx, cancel := context.WithCancel(a.jobParent())
	a.epoch = nextEpoch()
	a.running, a.since, a.cancel = j, a.now(), cancel
	a.resCh = make(chan jobResult, 1)
	epoch, resCh := a.epoch, a.resCh
	self, root := ctx.Self(), ctx.ActorSystem().Root
	lockPath, lockWhat := a.lockPath(), j.label
	travel := a.trip(j)
	go func() {
		var r jobResult
		lock, err := gitx.TryLock(lockPath, lockWhat)
		if err == nil && travel != nil {
			if err = travel.arrive(jctx); err != nil {
				lock.Unlock()
			}
		}
		if err != nil {
			r.err = err
		} else {
			render := func() (string, error) {
				res, err := root.RequestFuture(self, &renderUnblock{epoch: epoch}, time.Minute).Result()
				if err != nil {
					return "", err
				}
				switch v := res.(type) {
				case string:
					return v, nil
				case error:
					return "", v
				}
				return "", fmt.Errorf("renderUnblock: the actor replied %T, not the prompt", res)
			}
			r = run(jctx, func(int) { root.Send(self, &launched{epoch: epoch}) }, render)
			if travel != nil {
				if p := travel.depart(jctx); p.tried {
					r.push = p
				}
			}
			// release before reporting: the next job takes the lock as soon
			// as the actor hears of this one's end
			lock.Unlock()
		}
		resCh <- r
		root.Send(self, &jobDone{epoch: epoch})
	}()
}

func (a *TaskActor) loadTurn(id string) (*store.Turn, error) {
	turns, err := a.store().ListTurns(a.bg(), a.id)
	if err != nil {
		return nil, err
	}
	for i := range turns {
		if turns[i].ID == id {
			return &turns[i], nil
		}
	}
	return nil, fmt.Errorf("turn %s: %w", id, store.ErrNotFound)
}

func (a *TaskActor) endTurn(tu *store.Turn, out agent.Outcome, result, state, errText string) {
	if tu == nil {
		return
	}
	now := a.now()
	tu.Status, tu.EndedAt, tu.Error, tu.Result = state, &now, errText, result
	if out.Stdout != nil || out.Stderr != nil {
		tu.Output, tu.ExitCode = out.Combined(), out.ExitCode
	}
	if err := a.store().SaveTurn(a.bg(), tu); err != nil {
		a.log.Error("record turn end", "turn", tu.Number, "err", err)
	}
	a.publish(api.Event{Kind: api.EventTurnEnd, Turn: tu.Number, Label: tu.Label(), Status: state, Detail: errText})
}

// abort kills the running job (restart or stop). A work or ask turn is
// recorded interrupted; an interrupted ask stays pending and runs again
// after the restart; a waiter of sync or accept gets the cause.
func (a *TaskActor) abort(ctx actor.Context, cause string) {
	if a.running == nil {
		return
	}
	j := a.running
	a.cancel()
	var r jobResult
	if a.outage.ended != nil {
		r, a.outage.ended = *a.outage.ended, nil // ended already, waiting for the store
		if a.endKept(ctx, j, r, cause) {
			return
		}
	} else {
		select {
		case r = <-a.resCh:
		case <-time.After(15 * time.Second):
			r.err = errors.New("the agent did not stop within 15s")
		}
	}
	a.running, a.cancel = nil, nil
	a.epoch = nextEpoch()
	if j.setup != nil {
		a.endTurn(j.setup, agent.Outcome{Stdout: []byte(r.setupOut)}, "", store.TurnInterrupted, cause)
		j.setup = nil
	}
	if j.turn != nil {
		a.endTurn(j.turn, r.outcome, "", store.TurnInterrupted, cause)
	}
	if j.sender != nil {
		ctx.Send(j.sender, fmt.Errorf("%s was interrupted: %s", j.label, cause))
	}
	j.spec.interrupted(a, j, cause)
}

func (a *TaskActor) cancelTask(ctx actor.Context) error {
	if err := a.requireLive(); err != nil {
		return err
	}
	a.abort(ctx, "the task was cancelled")
	for _, j := range a.queue {
		j.spec.dropped(a, j)
		if j.sender != nil {
			ctx.Send(j.sender, fmt.Errorf("%s: the task was cancelled", j.label))
		}
	}
	a.queue = nil
	a.keepLeft()
	if err := a.endTask(task.Cancelled); err != nil {
		return err
	}
	// what the task left is on its branch (kept for tasks.keep_branches):
	// the worktree goes now, as an accepted task's does
	a.removeRepo()
	return nil
}

// removeRepo removes an ended task's worktree and repository. A failure is
// logged: the daemon's sweep of ended tasks tries again.
func (a *TaskActor) removeRepo() {
	if a.running != nil {
		return // a job that did not stop still works there: the sweep removes it later
	}
	if tr := a.taskRepo(); tr.on() {
		if err := tr.Remove(); err != nil {
			a.log.Warn("remove the worktree and repository of an ended task", "err", err)
		}
	}
}

// keepLeft records, on a task being cancelled, what was left on its branch:
// where the branch left its parent and its head, so its page shows that diff
// whatever happens to the parent after. A task whose branch cannot be read
// ends all the same (its page then diffs the branch as it is).
func (a *TaskActor) keepLeft() {
	ctx, cancel := context.WithTimeout(a.bg(), 30*time.Second)
	defer cancel()
	head, err := gitx.RevParse(ctx, a.deps.Root, a.task.Branch)
	if err == nil {
		var base string
		if base, err = gitx.Run(ctx, a.deps.Root, "merge-base", a.task.Parent, head); err == nil {
			a.task.EndBase, a.task.EndHead = base, head
			return
		}
	}
	a.log.Warn("record what a cancelled task left on its branch", "err", err)
}

// tripped records a tripwire on the task and revokes its grants. Until the
// reviewer unblocks the task, no turn is given a new grant.
func (a *TaskActor) tripped(what string) {
	if a.task == nil {
		return
	}
	if a.task.Tripwire != "" {
		// tripped already and not re-armed since (an unblock does it): the
		// grant is revoked and the task says so. An agent that keeps
		// sending decoys is counted in the log, not written to the store
		// and sent to every watcher once a request (an outside attack pass
		// saw 6,541 identical events)
		a.tripsAgain++
		if a.tripsAgain == 1 || a.tripsAgain%1000 == 0 {
			a.log.Warn("tripwire again; the task's grant is revoked already", "task", a.task.Ref(), "what", what, "times", a.tripsAgain)
		}
		return
	}
	a.tripsAgain = 0
	note := fmt.Sprintf("tripwire: %s at %s; the task's grant was revoked. Review what the agent did; unblocking the task gives its next turn a new grant", what, a.now().UTC().Format(time.RFC3339))
	a.task.Tripwire, a.task.UpdatedAt = note, a.now()
	if err := a.store().SaveTask(a.bg(), a.task); err != nil {
		a.log.Error("record tripwire", "task", a.task.Ref(), "err", err)
	}
	if a.host.Revoke != nil {
		if err := a.host.Revoke(a.id); err != nil {
			a.log.Error("revoke grants after a tripwire", "task", a.task.Ref(), "err", err)
		}
	}
	a.log.Warn("tripwire", "task", a.task.Ref(), "what", what)
	a.publish(api.Event{Kind: api.EventTripwire, Detail: note})
}

// endTask moves the task to an end state and revokes its grants.
func (a *TaskActor) endTask(s task.Status) error {
	now := a.now()
	a.task.EndedAt = &now
	a.setStatus(s, "")
	if a.host.Revoke != nil {
		if err := a.host.Revoke(a.id); err != nil {
			return fmt.Errorf("revoke grants: %w", err)
		}
	}
	return nil
}

func (a *TaskActor) setStatus(s task.Status, reason string) {
	if a.task == nil {
		return
	}
	changed := a.task.Status != s
	a.task.Status, a.task.FailReason = s, reason
	a.task.LastActivity, a.task.UpdatedAt = a.now(), a.now()
	if err := a.store().SaveTask(a.bg(), a.task); err != nil {
		a.log.Error("save task", "err", err)
	}
	if changed {
		a.publish(api.Event{Kind: api.EventStatus, Status: string(s), Detail: reason})
	}
}

// rename saves a new title; an ended task keeps its own, as its record.
func (a *TaskActor) rename(ctx actor.Context, title string) {
	if err := a.requireLive(); err != nil {
		ctx.Respond(err)
		return
	}
	old := a.task.Title
	a.task.Title, a.task.UpdatedAt = title, a.now()
	if err := a.store().SaveTask(a.bg(), a.task); err != nil {
		a.task.Title = old
		ctx.Respond(err)
		return
	}
	a.publish(api.Event{Kind: api.EventTitle, Detail: "renamed: " + title})
	ctx.Respond(&Done{})
}

func (a *TaskActor) publish(e api.Event) {
	if a.host.Publish == nil || a.task == nil || a.lease.lost {
		return
	}
	e.Time, e.TaskID, e.TaskRef = a.now(), a.id, a.task.Ref()
	a.host.Publish(e)
}

func (a *TaskActor) health() api.ActorHealth {
	h := api.ActorHealth{Name: "task/" + a.id, Kind: "task", TaskID: a.id, Queued: []string{}, Responsive: true, LastFailure: a.lastErr}
	if a.task != nil {
		h.TaskRef = a.task.Ref()
	}
	for _, j := range a.queue {
		h.Queued = append(h.Queued, j.label)
	}
	if a.running != nil {
		since := a.since
		h.Running, h.RunningSince = a.running.label, &since
		if a.outage.ended != nil {
			h.Running += " (ended; its record waits for the store: " + a.outage.lastErr + ")"
		}
	} else if a.place.draining && a.pushPending() {
		// moving away with commits only this clone has: the new host
		// waits for them as for a running job
		h.Running, h.RunningSince = "push of the task branch (pending)", a.task.PushSince
	}
	return h
}
