package actors

import (
	"context"
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"lazy/gitx"
	"lazy/review"
	"lazy/store"
	"lazy/task"
)

// applySuggestion checks the comment in the actor and queues the commit as
// an exclusive job: refused (busy) while a turn runs or waits, so the
// agent's worktree never changes under a running turn.
func (a *TaskActor) applySuggestion(ctx actor.Context, m *ApplySuggestion) {
	if err := a.requireLive(); err != nil {
		ctx.Respond(err)
		return
	}
	c, err := a.loadComment(m.ID)
	if err != nil {
		ctx.Respond(err)
		return
	}
	s, v := review.CanApply(c, a.id)
	if !v.OK {
		ctx.Respond(v.Err())
		return
	}
	a.startExclusive(ctx, &job{spec: applySpec{comment: *c, sg: s, args: *m}, label: "apply suggestion " + task.ShortID(c.ID)})
}

type applySpec struct {
	gitJob
	comment review.ReviewComment
	sg      review.Suggestion
	args    ApplySuggestion
}

func (applySpec) kind() jobKind { return jobApply }

func (s applySpec) prepare(a *TaskActor, _ *job) runJob {
	t, deps := *a.task, a.deps
	return func(ctx context.Context, _ func(int), _ renderPrompt) jobResult {
		return runApply(ctx, deps, &t, s)
	}
}

func (s applySpec) finish(a *TaskActor, ctx actor.Context, j *job, r jobResult) {
	if r.err != nil {
		a.answer(ctx, j, a.gitReply(r))
		return
	}
	c, notice := s.comment, fmt.Sprintf("Suggestion applied as commit %s on %s, authored by %s.", short(r.head), a.task.Branch, s.args.AuthorName)
	// a suggestion still queued would ask the agent for a change already
	// made: it leaves the queue
	if c.Intent == review.Comment && c.DeliveryState == review.PendingDelivery && !c.IsWithdrawn() {
		now := a.now()
		c.WithdrawnAt = &now
		if err := a.deps.Store.SaveReviewComment(a.bg(), &c); err != nil {
			a.answer(ctx, j, err)
			return
		}
		notice += " The comment left the queue: the agent will not be asked to make it again."
	}
	a.answer(ctx, j, &SuggestionApplied{Comment: c, Commit: r.head, Notice: notice})
}

// runApply commits the suggestion in the task's worktree as the reviewer.
func runApply(ctx context.Context, deps *TaskDeps, t *store.Task, s applySpec) jobResult {
	from, to := s.comment.SuggestionRange()
	head, err := taskRepoOf(deps, t).ApplySuggestion(ctx, gitx.Suggestion{
		Path: s.comment.File, From: from, To: to, LineText: s.comment.LineText, Lines: s.sg.Lines,
		Head: s.args.Head, AuthorName: s.args.AuthorName, AuthorEmail: s.args.AuthorEmail,
		Message: suggestionMessage(&s.comment, from, to),
	})
	var se *gitx.SuggestionError
	if errors.As(err, &se) {
		return jobResult{err: &review.RuleError{Reason: "Not applied: " + se.Why}}
	}
	return jobResult{err: err, head: head}
}

func suggestionMessage(c *review.ReviewComment, from, to int) string {
	where := fmt.Sprintf("line %d", to)
	if from < to {
		where = fmt.Sprintf("lines %d-%d", from, to)
	}
	return fmt.Sprintf("Apply review suggestion to %s (%s)\n\nSuggested in review comment %s.\n", c.File, where, c.ID)
}

func short(sha string) string { return sha[:min(10, len(sha))] }
