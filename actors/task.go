package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"lazy/agent"
	"lazy/gitx"
	"lazy/store"
	"lazy/task"
)

// TurnLauncher runs one agent turn (agent.Launcher in production).
type TurnLauncher interface {
	RunTurn(ctx context.Context, req agent.TurnRequest) (agent.Result, agent.Outcome, error)
}

// TaskDeps is what every task actor needs.
type TaskDeps struct {
	Store    store.Store
	Launcher TurnLauncher
	Publish  func(Event)
	Revoke   func(taskID string) error
	LockDir  string
	Log      *slog.Logger
	Now      func() time.Time
}

// ErrEnded refuses work on a task that has ended.
var ErrEnded = errors.New("task has ended")

type job struct {
	kind   string // work
	turnID string
	label  string
}

type jobResult struct {
	result  agent.Result
	outcome agent.Outcome
	err     error
}

// TaskActor owns one task. Its FIFO runs one job at a time in a goroutine
// whose end comes back as a message, so the mailbox answers health and other
// queries at once while a turn runs.
type TaskActor struct {
	id   string
	deps *TaskDeps
	log  *slog.Logger

	task    *store.Task
	queue   []job
	running *job
	since   time.Time
	epoch   int
	cancel  context.CancelFunc
	resCh   chan jobResult
	lastErr string
}

// NewTaskActor returns the producer of the actor for task id.
func NewTaskActor(id string, deps *TaskDeps) actor.Producer {
	return func() actor.Actor {
		return &TaskActor{id: id, deps: deps, log: deps.Log.With("task", task.ShortID(id))}
	}
}

func (a *TaskActor) now() time.Time {
	if a.deps.Now != nil {
		return a.deps.Now().UTC()
	}
	return time.Now().UTC()
}

// Receive handles one message.
func (a *TaskActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.reload()
		a.next(ctx)
	case *actor.Restarting:
		a.abort("the task actor restarted after a failure")
	case *actor.Stopping:
		a.abort("the daemon stopped")
	case *actor.Stopped:
	case *StartWork:
		turn, err := a.startWork(m.Trigger, m.Prompt)
		if err != nil {
			ctx.Respond(err)
			return
		}
		ctx.Respond(&WorkQueued{Turn: *turn})
		a.next(ctx)
	case *AddComment:
		res, err := a.addComment(m.Body)
		if err != nil {
			ctx.Respond(err)
			return
		}
		ctx.Respond(res)
		a.next(ctx)
	case *CancelTask:
		if err := a.cancelTask(); err != nil {
			ctx.Respond(err)
			return
		}
		ctx.Respond(&Done{})
		ctx.Stop(ctx.Self())
	case *Wake:
		ctx.Respond(&Done{})
		a.next(ctx)
	case *GetHealth:
		ctx.Respond(a.health())
	case *InjectPanic:
		panic(fmt.Sprintf("injected: %s", m.Reason))
	case *jobDone:
		if m.epoch != a.epoch || a.running == nil {
			return
		}
		a.finish(<-a.resCh)
		a.next(ctx)
	}
}

// reload rebuilds state from the store: the task row and its queued turns,
// in order. A turn still marked running here was cut off by a restart.
func (a *TaskActor) reload() {
	bg := context.Background()
	t, err := a.deps.Store.GetTask(bg, a.id)
	if err != nil {
		a.log.Error("load task", "err", err)
		a.task = nil
		return
	}
	a.task = t
	a.queue = nil
	turns, err := a.deps.Store.ListTurns(bg, a.id)
	if err != nil {
		a.log.Error("load turns", "err", err)
		return
	}
	for i := range turns {
		tu := &turns[i]
		switch tu.Status {
		case store.TurnQueued:
			a.queue = append(a.queue, job{kind: tu.Kind, turnID: tu.ID, label: fmt.Sprintf("%s turn %d", tu.Kind, tu.Number)})
		case store.TurnRunning:
			a.endTurn(tu, agent.Outcome{}, "", store.TurnInterrupted, "the task actor restarted during the turn")
		}
	}
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

func (a *TaskActor) startWork(trigger, prompt string) (*store.Turn, error) {
	if err := a.requireLive(); err != nil {
		return nil, err
	}
	now := a.now()
	tu := &store.Turn{ID: task.NewID(now), TaskID: a.id, Kind: store.TurnWork, Trigger: trigger, Prompt: prompt, Status: store.TurnQueued, QueuedAt: now}
	if err := a.deps.Store.CreateTurn(context.Background(), tu); err != nil {
		return nil, fmt.Errorf("queue work turn: %w", err)
	}
	a.queue = append(a.queue, job{kind: store.TurnWork, turnID: tu.ID, label: fmt.Sprintf("work turn %d", tu.Number)})
	return tu, nil
}

func (a *TaskActor) addComment(body string) (*CommentAdded, error) {
	if a.task == nil {
		return nil, fmt.Errorf("task %s: %w", a.id, store.ErrNotFound)
	}
	c := store.Comment{ID: task.NewID(a.now()), TaskID: a.id, Body: body, CreatedAt: a.now()}
	if err := a.deps.Store.AddComment(context.Background(), &c); err != nil {
		return nil, fmt.Errorf("save comment: %w", err)
	}
	res := &CommentAdded{Comment: c}
	// The auto-react loop: a plain comment on a blocked, idle task is a work turn.
	if a.task.Status == task.Blocked && a.running == nil && len(a.queue) == 0 {
		tu, err := a.startWork("comment", body)
		if err != nil {
			return nil, err
		}
		res.Triggered = tu
	}
	return res, nil
}

// next starts the head of the queue when nothing runs.
func (a *TaskActor) next(ctx actor.Context) {
	for a.running == nil && len(a.queue) > 0 && a.task != nil && !a.task.Status.Ended() {
		j := a.queue[0]
		a.queue = a.queue[1:]
		a.start(ctx, j)
	}
}

func (a *TaskActor) start(ctx actor.Context, j job) {
	bg := context.Background()
	tu, err := a.loadTurn(j.turnID)
	if err != nil {
		a.log.Error("load queued turn", "turn", j.turnID, "err", err)
		return
	}
	lock, err := gitx.TryLock(filepath.Join(a.deps.LockDir, a.id+".lock"), j.label)
	if err != nil {
		a.endTurn(tu, agent.Outcome{}, "", store.TurnFailed, err.Error())
		a.setStatus(task.Failed, fmt.Sprintf("%s could not start: %v", j.label, err))
		return
	}
	now := a.now()
	tu.Status, tu.StartedAt = store.TurnRunning, &now
	if err := a.deps.Store.SaveTurn(bg, tu); err != nil {
		lock.Unlock()
		a.log.Error("mark turn running", "err", err)
		return
	}
	if tu.Kind == store.TurnWork {
		a.task.Turns++
	}
	a.setStatus(task.Running, "")
	a.publish(Event{Kind: "turn_start", Turn: tu.Number, Detail: tu.Kind + " turn (" + tu.Trigger + ")"})

	jctx, cancel := context.WithCancel(context.Background())
	a.epoch++
	a.running, a.since, a.cancel = &j, now, cancel
	a.resCh = make(chan jobResult, 1)
	epoch, resCh := a.epoch, a.resCh
	self, root := ctx.Self(), ctx.ActorSystem().Root
	req := agent.TurnRequest{TaskID: a.id, Ref: a.task.Ref(), Role: a.task.Role, Worktree: a.task.Worktree,
		Session: a.task.SessionID, Ask: tu.Kind == store.TurnAsk, Prompt: tu.Prompt, Number: tu.Number}
	launcher := a.deps.Launcher
	go func() {
		r, out, err := launcher.RunTurn(jctx, req)
		// release before reporting: the next job takes the lock as soon as
		// the actor hears of this one's end
		lock.Unlock()
		resCh <- jobResult{result: r, outcome: out, err: err}
		root.Send(self, &jobDone{epoch: epoch})
	}()
}

func (a *TaskActor) loadTurn(id string) (*store.Turn, error) {
	turns, err := a.deps.Store.ListTurns(context.Background(), a.id)
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

// finish records the end of the running job.
func (a *TaskActor) finish(r jobResult) {
	j := a.running
	a.running, a.cancel = nil, nil
	tu, err := a.loadTurn(j.turnID)
	if err != nil {
		a.log.Error("load finished turn", "err", err)
		return
	}
	if r.err != nil {
		a.lastErr = r.err.Error()
		a.endTurn(tu, r.outcome, r.result.Text, store.TurnFailed, r.err.Error())
		a.setStatus(task.Failed, fmt.Sprintf("%s failed: %v", j.label, r.err))
		return
	}
	if r.result.SessionID != "" {
		tu.SessionID = r.result.SessionID
		a.task.SessionID = r.result.SessionID
	}
	a.endTurn(tu, r.outcome, r.result.Text, store.TurnDone, "")
	a.setStatus(task.Blocked, "")
}

func (a *TaskActor) endTurn(tu *store.Turn, out agent.Outcome, result, state, errText string) {
	now := a.now()
	tu.Status, tu.EndedAt, tu.Error, tu.Result = state, &now, errText, result
	if out.Stdout != nil || out.Stderr != nil {
		tu.Output, tu.ExitCode = out.Combined(), out.ExitCode
	}
	if err := a.deps.Store.SaveTurn(context.Background(), tu); err != nil {
		a.log.Error("record turn end", "turn", tu.Number, "err", err)
	}
	a.publish(Event{Kind: "turn_end", Turn: tu.Number, Status: state, Detail: errText})
}

// abort kills the running job (restart or stop) and records it as interrupted.
func (a *TaskActor) abort(cause string) {
	if a.running == nil {
		return
	}
	j := a.running
	a.cancel()
	var r jobResult
	select {
	case r = <-a.resCh:
	case <-time.After(15 * time.Second):
		r.err = errors.New("the agent did not stop within 15s")
	}
	a.running, a.cancel = nil, nil
	a.epoch++
	tu, err := a.loadTurn(j.turnID)
	if err != nil {
		a.log.Error("load aborted turn", "err", err)
		return
	}
	a.endTurn(tu, r.outcome, "", store.TurnInterrupted, cause)
	if a.task != nil && !a.task.Status.Ended() {
		a.setStatus(task.Failed, fmt.Sprintf("%s interrupted: %s; unblock the task to continue", j.label, cause))
	}
}

func (a *TaskActor) cancelTask() error {
	if err := a.requireLive(); err != nil {
		return err
	}
	a.abort("the task was cancelled")
	for _, j := range a.queue {
		if tu, err := a.loadTurn(j.turnID); err == nil {
			a.endTurn(tu, agent.Outcome{}, "", store.TurnFailed, "the task was cancelled before this turn ran")
		}
	}
	a.queue = nil
	now := a.now()
	a.task.EndedAt = &now
	a.setStatus(task.Cancelled, "")
	if a.deps.Revoke != nil {
		if err := a.deps.Revoke(a.id); err != nil {
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
	if err := a.deps.Store.SaveTask(context.Background(), a.task); err != nil {
		a.log.Error("save task", "err", err)
	}
	if changed {
		a.publish(Event{Kind: "status", Status: string(s), Detail: reason})
	}
}

func (a *TaskActor) publish(e Event) {
	if a.deps.Publish == nil || a.task == nil {
		return
	}
	e.Time, e.TaskID, e.TaskRef = a.now(), a.id, a.task.Ref()
	a.deps.Publish(e)
}

func (a *TaskActor) health() ActorHealth {
	h := ActorHealth{Name: "task/" + a.id, Kind: "task", TaskID: a.id, Queued: []string{}, Responsive: true, LastFailure: a.lastErr}
	if a.task != nil {
		h.TaskRef = a.task.Ref()
	}
	for _, j := range a.queue {
		h.Queued = append(h.Queued, j.label)
	}
	if a.running != nil {
		since := a.since
		h.Running, h.RunningSince = a.running.label, &since
	}
	return h
}
