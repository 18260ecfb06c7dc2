package actors

// The asks of a task actor: review comments posted, re-sent and
// withdrawn, and the read-only ask turns that answer them.

import (
	"context"
	"errors"
	"fmt"

	"lazy/agent"
	"lazy/api"
	"lazy/gitx"
	"lazy/review"
	"lazy/store"
	"lazy/task"
)

// postReviewComment persists first, then decides what the message starts.
func (a *TaskActor) postReviewComment(c review.ReviewComment) (*review.ReviewComment, error) {
	// an ended task's page is its record: nothing is added to it
	if err := a.requireLive(); err != nil {
		return nil, err
	}
	now := a.now()
	if c.ID != "" {
		// the id the daemon gave the post: a post tried again (its first
		// try taken, its answer lost: a member died or a call timed out in
		// a cluster) is the comment stored already, not a second one
		if had, err := a.loadComment(c.ID); err != nil {
			return nil, err
		} else if had != nil {
			if had.TaskID != a.id {
				return nil, fmt.Errorf("comment %s is another task's", c.ID)
			}
			return had, nil
		}
	} else {
		c.ID = task.NewID(now)
	}
	c.TaskID, c.Actor, c.CreatedAt = a.id, review.Human, now
	c.AskState, c.AskError, c.DeliveryState, c.DeliveredTurn, c.WithdrawnAt = "", "", "", 0, nil
	if c.ThreadID == "" {
		c.ThreadID = c.ID
	}
	switch c.Intent {
	case review.Ask:
		c.AskState = review.AskPending
	case review.Comment:
		c.DeliveryState = review.PendingDelivery
	default:
		return nil, &review.RuleError{Reason: fmt.Sprintf("intent %q is neither ask nor comment", c.Intent)}
	}
	if err := a.store().AddReviewComment(a.bg(), &c); err != nil {
		return nil, fmt.Errorf("save the review comment: %w", err)
	}
	if c.Intent == review.Ask {
		if v := review.Askable(a.task.Status); !v.OK {
			c.AskState, c.AskError = review.AskFailed, v.Reason
			if err := a.store().SaveReviewComment(a.bg(), &c); err != nil {
				a.log.Error("record the refused ask", "err", err)
			}
		} else {
			a.queue = append(a.queue, newAskJob(c.ID, now))
		}
	}
	return &c, nil
}

func (a *TaskActor) loadComment(id string) (*review.ReviewComment, error) {
	c, err := a.store().GetReviewComment(a.bg(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return c, err
}

func (a *TaskActor) retryAsk(id string) (*ActionDone, error) {
	if err := a.requireLive(); err != nil {
		return nil, err
	}
	c, err := a.loadComment(id)
	if err != nil {
		return nil, err
	}
	v := review.CanRetry(c, a.id)
	if !v.OK {
		return nil, v.Err()
	}
	if v.NoOp {
		return &ActionDone{Comment: *c, Notice: v.Reason}, nil
	}
	if ask := review.Askable(a.task.Status); !ask.OK {
		c.AskError = ask.Reason
		if err := a.store().SaveReviewComment(a.bg(), c); err != nil {
			return nil, err
		}
		return &ActionDone{Comment: *c, Notice: "Not re-sent: " + ask.Reason}, nil
	}
	c.AskState, c.AskError = review.AskPending, ""
	if err := a.store().SaveReviewComment(a.bg(), c); err != nil {
		return nil, err
	}
	a.queue = append(a.queue, newAskJob(c.ID, a.now()))
	return &ActionDone{Comment: *c, Notice: "Re-sent to the agent; the answer will appear in the thread."}, nil
}

func (a *TaskActor) withdraw(id string) (*ActionDone, error) {
	if err := a.requireLive(); err != nil {
		return nil, err
	}
	c, err := a.loadComment(id)
	if err != nil {
		return nil, err
	}
	if v := review.CanWithdraw(c, a.id); !v.OK {
		return nil, v.Err()
	}
	if a.delivering[c.ID] {
		return nil, review.BeingDelivered().Err()
	}
	now := a.now()
	c.WithdrawnAt = &now
	if err := a.store().SaveReviewComment(a.bg(), c); err != nil {
		return nil, err
	}
	return &ActionDone{Comment: *c, Notice: "Withdrawn: it stays in the thread, struck through, and will not reach the agent."}, nil
}

// failAsk records a failed question with an actionable reason.
func (a *TaskActor) failAsk(c *review.ReviewComment, reason string) {
	c.AskState, c.AskError = review.AskFailed, reason
	if err := a.store().SaveReviewComment(a.bg(), c); err != nil {
		a.log.Error("record failed ask", "err", err)
	}
	a.publish(api.Event{Kind: api.EventAskEnd, Status: string(review.AskFailed), Detail: reason})
}

// prepareAsk checks an ask can run now and starts its read-only turn.
func (a *TaskActor) prepareAsk(j *job, commentID string) runJob {
	c, err := a.loadComment(commentID)
	if err != nil || c == nil || !c.InFlight() {
		return nil // withdrawn, answered or gone meanwhile
	}
	if v := review.Askable(a.task.Status); !v.OK {
		a.failAsk(c, v.Reason)
		return nil
	}
	if a.task.SessionID == "" {
		a.failAsk(c, "The agent has no session to resume yet: its first turn has not finished. Re-send when the task is blocked.")
		return nil
	}
	now := a.now()
	tu := &store.Turn{ID: task.NewID(now), TaskID: a.id, Kind: store.TurnAsk, Trigger: "ask", Prompt: review.RenderAskPrompt(c),
		Status: store.TurnRunning, QueuedAt: c.CreatedAt}
	if err := a.store().CreateTurn(a.bg(), tu); err != nil {
		a.failAsk(c, "could not record the ask turn: "+err.Error())
		return nil
	}
	j.turn = tu
	a.task.Asks++
	if err := a.store().SaveTask(a.bg(), a.task); err != nil {
		a.log.Error("count the ask", "err", err)
	}
	a.publish(api.Event{Kind: api.EventTurnStart, Turn: tu.Number, Label: tu.Label(), Detail: "ask turn"})
	req := agent.TurnRequest{TaskID: a.id, Ref: a.task.Ref(), Role: a.task.Role, Worktree: a.task.Worktree, Branch: a.task.Branch,
		Session: a.task.SessionID, SessionDriver: a.task.Driver, SessionCommand: a.task.AgentCommand, Ask: true, Prompt: tu.Prompt, Number: tu.Number, Driver: a.task.Agent}
	launcher, repo := a.deps.Launcher, a.taskRepo()
	return func(ctx context.Context, onStart func(int), _ renderPrompt) jobResult {
		req.OnStart = onStart
		// the task repository starts from the project's branch; nothing an
		// ask turn does is imported
		if !repo.on() {
			r, out, err := launcher.RunTurn(ctx, req)
			return jobResult{result: r, outcome: out, err: err}
		}
		if err := repo.Prepare(ctx); err != nil {
			return jobResult{err: fmt.Errorf("prepare the task repository: %w", err)}
		}
		// an ask changes nothing: a sandbox shows it the task read-only;
		// whatever it changed anyway (a runner without one) is put back
		snap, snapErr := repo.Snapshot(ctx)
		r, out, err := launcher.RunTurn(ctx, req)
		res := jobResult{result: r, outcome: out, err: err}
		if snapErr != nil {
			return res
		}
		undone, uerr := repo.Restore(context.WithoutCancel(ctx), snap)
		switch {
		case uerr != nil:
			res.undone = "This ask was read-only, but it changed the task and putting it back failed (" + uerr.Error() + "): look at the worktree before the next turn."
		case undone.Changed():
			res.undone = undone.Say()
		}
		return res
	}
}

// askFailure words why an ask failed and what to do.
func (a *TaskActor) askFailure(err error) string {
	var le *gitx.LockedError
	switch {
	case errors.As(err, &le):
		return fmt.Sprintf("The worktree is busy (409 from the ask launcher): %s holds its lock. Re-send when it is free.", le.Holder.What)
	case errors.Is(err, agent.ErrTimeout):
		return fmt.Sprintf("The agent did not answer within %s and was stopped. Re-send to try again, or raise agent.ask_timeout.", a.deps.AskTimeout)
	case errors.Is(err, agent.ErrUnavailable):
		return "The agent could not be started: " + err.Error() + ". Fix that, then re-send."
	}
	return "The agent failed while answering: " + err.Error() + ". Re-send to try again."
}

func (a *TaskActor) finishAsk(j *job, commentID string, r jobResult) {
	a.recordLaunch(j)
	c, err := a.loadComment(commentID)
	if err != nil || c == nil {
		a.log.Error("load asked comment", "comment", commentID, "err", err)
		return
	}
	if r.err != nil {
		reason := a.askFailure(r.err)
		if r.undone != "" {
			reason += " " + r.undone
		}
		a.lastErr = reason
		if j.turn != nil {
			a.endTurn(j.turn, r.outcome, r.result.Text, store.TurnFailed, r.err.Error())
		}
		a.failAsk(c, reason)
		return
	}
	now := a.now()
	body := r.result.Text
	if r.undone != "" {
		body += "\n\n(lazy) " + r.undone
		a.log.Warn("an ask changed the task; put back", "what", r.undone)
	}
	reply := review.ReviewComment{ID: task.NewID(now), TaskID: a.id, ThreadID: c.ThreadID, File: c.File, Line: c.Line, Side: c.Side,
		LineText: c.LineText, Intent: review.Ask, Body: body, Actor: review.Agent, CreatedAt: now}
	// the reply and the answered state in one write: a crash between them
	// would have the ask asked (and answered) again on the next host
	if err := a.store().AnswerAsk(a.bg(), c.ID, &reply); errors.Is(err, store.ErrConflict) {
		// answered meanwhile (withdrawn, or by the member that hosted the
		// task before): this answer is dropped, the turn still ends
		a.log.Warn("the ask is no longer pending; this answer is dropped", "ask", c.ID)
	} else if err != nil {
		if j.turn != nil {
			a.endTurn(j.turn, r.outcome, r.result.Text, store.TurnFailed, err.Error())
		}
		a.failAsk(c, "the answer could not be saved: "+err.Error())
		return
	}
	c.AskState, c.AskError = review.AskAnswered, ""
	a.noteAgent(j.turn, r.result)
	if r.result.SessionID != "" {
		a.task.SessionID = r.result.SessionID
		a.task.Driver, a.task.AgentCommand = r.result.Driver, r.result.Command
	}
	a.endTurn(j.turn, r.outcome, r.result.Text, store.TurnDone, "")
	a.task.LastActivity = now
	if err := a.store().SaveTask(a.bg(), a.task); err != nil {
		a.log.Error("save task", "err", err)
	}
	a.publish(api.Event{Kind: api.EventAskEnd, Status: string(review.AskAnswered)})
}
