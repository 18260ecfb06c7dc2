package actors

// The work turns of a task actor: queued by start, comment and unblock,
// rendered at launch, finished into the task row.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"lazy/agent"
	"lazy/api"
	"lazy/gitx"
	"lazy/review"
	"lazy/store"
	"lazy/task"
)

// queueWork saves a queued work turn and appends it to the FIFO.
func (a *TaskActor) queueWork(trigger, prompt, id string) (*WorkQueued, error) {
	if err := a.requireLive(); err != nil {
		return nil, err
	}
	now := a.now()
	if id == "" {
		id = task.NewID(now)
	}
	tu := &store.Turn{ID: id, TaskID: a.id, Kind: store.TurnWork, Trigger: trigger, Prompt: prompt, Status: store.TurnQueued, QueuedAt: now}
	if err := a.store().CreateTurn(a.bg(), tu); err != nil {
		return nil, fmt.Errorf("queue work turn: %w", err)
	}
	a.queue = append(a.queue, newWorkJob(tu, now))
	return &WorkQueued{Turn: *tu, Notice: a.agentNotice()}, nil
}

// agentNotice says, when the agent in force is not the one that made the
// task's conversation, that the next turn starts a new one ("" : it
// resumes, or there is none to resume).
func (a *TaskActor) agentNotice() string {
	if a.deps.Agent == nil || a.task.SessionID == "" || a.task.Driver == "" {
		return ""
	}
	if a.task.Agent != "" {
		return "" // the task's own agent (task new --driver) never changes
	}
	drv, cmd := a.deps.Agent()
	if drv == a.task.Driver && cmd == a.task.AgentCommand {
		return ""
	}
	return agent.ChangedNotice(agent.AgentName(a.task.Driver, a.task.AgentCommand), agent.AgentName(drv, cmd))
}

func (a *TaskActor) recoveryPath(turnID string) string {
	return filepath.Join(a.deps.RecoveryDir, "unblock-"+turnID+".txt")
}

// unblock writes the reviewer's message to the recovery dir before anything
// else, then queues the work turn behind every ask already queued.
func (a *TaskActor) unblock(message, id string) (*WorkQueued, error) {
	if id != "" {
		// tried again after its first try was taken: the turn queued then
		if tu, err := a.loadTurn(id); err == nil && tu != nil {
			return &WorkQueued{Turn: *tu, Notice: a.agentNotice()}, nil
		}
	}
	if err := a.requireLive(); err != nil {
		return nil, err
	}
	// the size rule is checked now, with the comments queued now, so the
	// reviewer hears of it at once (it is checked again at launch)
	if all, err := a.store().ListReviewComments(a.bg(), a.id); err == nil {
		if err := review.UnblockFits(len(review.RenderUnblockPrompt(review.Queued(all), func(string) []review.ReviewComment { return nil }, message))); err != nil {
			return nil, err
		}
	}
	if id == "" {
		id = task.NewID(a.now())
	}
	if a.deps.RecoveryDir != "" {
		if err := os.MkdirAll(a.deps.RecoveryDir, 0o755); err != nil {
			return nil, fmt.Errorf("save your unblock message to %s first: %w; nothing was queued", a.deps.RecoveryDir, err)
		}
		body := fmt.Sprintf("task: %s\nturn: %s\n\n%s\n", a.task.Ref(), id, message)
		if err := os.WriteFile(a.recoveryPath(id), []byte(body), 0o644); err != nil {
			_ = os.Remove(a.recoveryPath(id))
			return nil, fmt.Errorf("save your unblock message to %s first: %w; nothing was queued (free some disk space and unblock again)", a.deps.RecoveryDir, err)
		}
	}
	res, err := a.queueWork("unblock", message, id)
	if err != nil {
		_ = os.Remove(a.recoveryPath(id))
		return nil, err
	}
	if a.task.Tripwire != "" {
		// the reviewer's unblock re-arms the task: its next turn gets a new grant
		a.task.Tripwire = ""
		if err := a.store().SaveTask(a.bg(), a.task); err != nil {
			a.log.Error("clear tripwire", "err", err)
		}
	}
	return res, nil
}

// addComment saves a task message: a review comment on no line, queued
// like any other and delivered with the next work turn that launches (the
// one rule of review.Queued, rendered and marked delivered at launch). On
// a blocked, idle task it queues that work turn (the auto-react loop). An
// ended task takes no message: no agent will read it.
func (a *TaskActor) addComment(body string) (*CommentAdded, error) {
	if a.task == nil {
		return nil, fmt.Errorf("task %s: %w", a.id, store.ErrNotFound)
	}
	if a.task.Status.Ended() {
		return nil, fmt.Errorf("task %s: %w (%s), so no agent will read a message; start a new task (lazy task new -m ...) to go on", a.task.Ref(), ErrEnded, a.task.Status)
	}
	now := a.now()
	c := review.ReviewComment{ID: task.NewID(now), TaskID: a.id, Intent: review.Comment, Body: body, Actor: review.Human,
		DeliveryState: review.PendingDelivery, CreatedAt: now}
	c.ThreadID = c.ID
	if err := a.store().AddReviewComment(a.bg(), &c); err != nil {
		return nil, fmt.Errorf("save the message: %w", err)
	}
	res := &CommentAdded{Comment: c, Status: a.task.Status}
	if tu := a.nextCarrier(); tu != nil {
		res.Next = tu.Label()
	} else if a.task.Status == task.Blocked && a.running == nil && len(a.queue) == 0 {
		// the message is the turn's: its prompt is what is queued at launch
		wq, err := a.queueWork("comment", "", "")
		if err != nil {
			return nil, err
		}
		res.Triggered, res.Next, res.Notice = &wq.Turn, wq.Turn.Label(), wq.Notice
	}
	return res, nil
}

// nextCarrier is the work turn that will carry what is queued now: the
// running one while its agent has not started, else the first queued one
// (nil: none yet).
func (a *TaskActor) nextCarrier() *store.Turn {
	if j := a.running; j != nil && j.kind() == jobWork && !j.launched && j.turn != nil {
		return j.turn
	}
	for _, j := range a.queue {
		if w, ok := j.spec.(workSpec); ok {
			if tu, err := a.loadTurn(w.turnID); err == nil {
				return tu
			}
		}
	}
	return nil
}

// prepareWork marks a work turn running; an unblock renders every queued
// comment into its prompt now, so comments posted while it waited ride along.
func (a *TaskActor) prepareWork(j *job, turnID string) runJob {
	tu, err := a.loadTurn(turnID)
	if err != nil {
		a.log.Error("load queued turn", "turn", turnID, "err", err)
		return nil
	}
	tu.Status = store.TurnRunning // started_at is set when the agent process starts
	if err := a.store().SaveTurn(a.bg(), tu); err != nil {
		a.log.Error("mark turn running", "err", err)
		return nil
	}
	j.turn = tu
	a.task.Turns++
	a.setStatus(task.Running, "")
	a.publish(api.Event{Kind: api.EventTurnStart, Turn: tu.Number, Label: tu.Label(), Detail: tu.Label() + " (" + tu.Trigger + ")"})
	req := agent.TurnRequest{TaskID: a.id, Ref: a.task.Ref(), Role: a.task.Role, Worktree: a.task.Worktree, Branch: a.task.Branch,
		Session: a.task.SessionID, SessionDriver: a.task.Driver, SessionCommand: a.task.AgentCommand, Brief: a.task.Prompt,
		Prompt: tu.Prompt, Number: tu.Number, Driver: a.task.Agent}
	launcher, repo := a.deps.Launcher, a.taskRepo()
	j.message = tu.Prompt
	setup, commands := a.startSetup(j)
	return func(ctx context.Context, onStart func(int), render renderPrompt) jobResult {
		req.OnStart = onStart
		// every work turn carries the messages queued when its agent
		// starts, not when the turn began waiting for a slot: one
		// withdrawn meanwhile is never sent
		req.RenderPrompt = func(context.Context) (string, error) { return render() }
		// the turn starts from the project's branch (verified), and what it
		// committed comes back only through a verified import
		if !repo.on() {
			r, out, err := launcher.RunTurn(ctx, req)
			return jobResult{result: r, outcome: out, err: err}
		}
		if err := repo.Prepare(ctx); err != nil {
			return jobResult{err: fmt.Errorf("prepare the task repository: %w", err)}
		}
		var setupOut string
		if len(commands) > 0 {
			out, err := setup.RunSetup(ctx, req, commands)
			if err != nil {
				return jobResult{err: err, setupOut: out, setupFailed: true}
			}
			setupOut = out
		}
		r, out, err := launcher.RunTurn(ctx, req)
		if _, ierr := repo.Import(ctx); ierr != nil {
			if err == nil {
				err = ierr
			} else {
				err = fmt.Errorf("%w; %v", err, ierr)
			}
		}
		return jobResult{result: r, outcome: out, err: err, setupOut: setupOut}
	}
}

// startSetup records the setup turn a task's first work turn runs first,
// when [setup] run has commands, and returns what runs it.
func (a *TaskActor) startSetup(j *job) (SetupRunner, []string) {
	if a.deps.Setup == nil || j.turn.Trigger != "start" || !a.taskRepo().on() {
		return nil, nil
	}
	commands := a.deps.Setup.SetupCommands()
	if len(commands) == 0 {
		return nil, nil
	}
	now := a.now()
	st := &store.Turn{ID: task.NewID(now), TaskID: a.id, Kind: store.TurnSetup, Trigger: "start", Prompt: strings.Join(commands, "\n"),
		Status: store.TurnRunning, QueuedAt: now, StartedAt: &now}
	if err := a.store().CreateTurn(a.bg(), st); err != nil {
		a.log.Error("record the setup turn", "err", err)
		st = nil
	} else {
		a.task.Setups++
		a.publish(api.Event{Kind: api.EventTurnStart, Turn: st.Number, Label: st.Label(), Detail: "setup"})
	}
	j.setup = st
	return a.deps.Setup, commands
}

// finishSetup records the setup turn's end.
func (a *TaskActor) finishSetup(j *job, r jobResult) {
	if j.setup == nil {
		return
	}
	out := agent.Outcome{Stdout: []byte(r.setupOut)}
	if r.setupFailed {
		a.endTurn(j.setup, out, "", store.TurnFailed, r.err.Error())
	} else if r.setupOut != "" || r.err == nil {
		a.endTurn(j.setup, out, "", store.TurnDone, "")
	} else {
		a.endTurn(j.setup, out, "", store.TurnFailed, "not finished: "+r.err.Error())
	}
	j.setup = nil
}

// noteAgent records on a turn the agent that ran it and what it said of
// its conversation, and tells watchers when it started a new one.
func (a *TaskActor) noteAgent(tu *store.Turn, r agent.Result) {
	if tu == nil || r.Driver == "" {
		return
	}
	tu.Driver, tu.Notice = agent.AgentName(r.Driver, r.Command), r.Notice
	if r.Notice != "" {
		a.log.Info("a turn started a new conversation", "turn", tu.Label(), "why", r.Notice)
		a.publish(api.Event{Kind: api.EventTurnNote, Turn: tu.Number, Label: tu.Label(), Detail: r.Notice})
	}
}

// taskRepo is the task's own repository, its worktree and the project it is
// imported into.
func (a *TaskActor) taskRepo() repo { return repo{taskRepoOf(a.deps, a.task)} }

func taskRepoOf(deps *TaskDeps, t *store.Task) gitx.TaskRepo {
	return gitx.TaskRepo{Project: deps.Root, Worktree: t.Worktree, Branch: t.Branch, Parent: t.Parent}
}

// repo is a task's repository for its turns.
type repo struct{ gitx.TaskRepo }

// on: the task has a project and a worktree (a task made by the daemon
// always has both; tests of the actor tree without git have neither).
func (r repo) on() bool { return r.Project != "" && r.Worktree != "" }

// renderUnblock renders an unblock's prompt from the comments still queued
// now, in the actor (so no withdrawal interleaves), and holds them as being
// delivered until the launch is recorded. A prompt over MaxUnblockPrompt is
// refused: the comments stay queued.
func (a *TaskActor) renderUnblock(j *job) (string, error) {
	all, err := a.store().ListReviewComments(a.bg(), a.id)
	if err != nil {
		return "", fmt.Errorf("could not read the queued comments: %w", err)
	}
	queued := review.Queued(all)
	byThread := map[string][]review.ReviewComment{}
	for _, c := range all {
		byThread[c.ThreadID] = append(byThread[c.ThreadID], c)
	}
	prompt := review.RenderUnblockPrompt(queued, func(id string) []review.ReviewComment { return byThread[id] }, j.message)
	if err := review.UnblockFits(len(prompt)); err != nil {
		return "", err
	}
	j.delivered = j.delivered[:0]
	a.delivering = map[string]bool{}
	for _, c := range queued {
		j.delivered = append(j.delivered, c.ID)
		a.delivering[c.ID] = true
	}
	j.turn.Prompt = prompt
	if err := a.store().SaveTurn(a.bg(), j.turn); err != nil {
		a.log.Error("record the unblock prompt", "err", err)
	}
	return prompt, nil
}

// onLaunched marks an unblock's comments delivered once its agent runs, and
// removes the recovery copy of the message.
func (a *TaskActor) onLaunched(j *job) {
	if j.launched || j.turn == nil {
		return
	}
	j.launched, j.launchedAt = true, a.now()
	a.recordLaunch(j)
	a.delivering = nil
}

// recordLaunch records that job j's turn launched, when it did and the
// store does not have it yet: at the launch, and again as the turn ends
// (the store did not answer at the launch).
func (a *TaskActor) recordLaunch(j *job) {
	if !j.launched || j.turn == nil || j.turn.StartedAt != nil {
		return
	}
	at := j.launchedAt
	// one write: the turn launched and its comments are delivered, or neither
	if err := a.store().MarkLaunched(a.bg(), j.turn.ID, at, j.delivered); err != nil {
		a.log.Error("record the launch", "turn", j.turn.Number, "err", err)
		return
	}
	j.turn.StartedAt = &at
	if j.turn.Trigger == "unblock" {
		if err := os.Remove(a.recoveryPath(j.turn.ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
			a.log.Warn("remove recovery file", "err", err)
		}
	}
}

func (a *TaskActor) finishWork(j *job, r jobResult) {
	a.delivering = nil // a launch that failed delivered nothing
	a.recordLaunch(j)
	tu := j.turn
	a.finishSetup(j, r)
	if r.setupFailed {
		// the work turn never ran: the task fails with the command named
		a.lastErr = r.err.Error()
		a.endTurn(tu, agent.Outcome{}, "", store.TurnFailed, "not run: the setup failed")
		a.setStatus(task.Failed, r.err.Error())
		return
	}
	if r.err != nil {
		var le *gitx.LockedError
		if errors.As(r.err, &le) || !j.launched {
			r.err = fmt.Errorf("the turn could not launch: %w", r.err)
		}
		a.lastErr = r.err.Error()
		a.endTurn(tu, r.outcome, r.result.Text, store.TurnFailed, r.err.Error())
		reason := fmt.Sprintf("%s failed: %v", j.label, r.err)
		if !j.launched && len(j.delivered) > 0 {
			reason += fmt.Sprintf("; its %d comments stay queued for the next work turn", len(j.delivered))
		}
		a.noteAgent(tu, r.result)
		a.setStatus(task.Failed, reason)
		return
	}
	a.noteAgent(tu, r.result)
	if r.result.SessionID != "" {
		tu.SessionID = r.result.SessionID
		a.task.SessionID = r.result.SessionID
		// the session is the agent's that made it: another agent starts
		// its own
		a.task.Driver, a.task.AgentCommand = r.result.Driver, r.result.Command
	}
	a.endTurn(tu, r.outcome, r.result.Text, store.TurnDone, "")
	a.setStatus(task.Blocked, "")
}
