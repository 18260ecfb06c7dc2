package daemon

import (
	"context"
	"encoding/json"
	"sort"

	"lazy/api"
	"lazy/gitx"
	"lazy/review"
	"lazy/store"
	"lazy/task"
)

// The web's wire types live in package api; these convert the daemon's own
// rows and git results to them, at the one place both are known.

// InfoOf converts a task row to its wire form.
func InfoOf(t *store.Task) api.TaskInfo {
	info := api.TaskInfo{ID: t.ID, ShortID: task.ShortID(t.ID), Code: t.CodeString(), Ref: t.Ref(), Title: t.Title,
		Status: string(t.Status), Role: t.Role, Branch: t.Branch, Parent: t.Parent, Turns: t.Turns, Asks: t.Asks, Setup: t.Setups,
		Agent:        AgentOf(t.Driver, t.AgentCommand),
		LastActivity: t.LastActivity, FailReason: t.FailReason, Tripwire: t.Tripwire, Worktree: t.Worktree, CreatedAt: t.CreatedAt,
		BudgetTokens: t.BudgetTokens, EndedAt: t.EndedAt, EndBase: t.EndBase, EndHead: t.EndHead}
	if t.PushSince != nil {
		info.Push = &api.PushPending{Since: *t.PushSince, Head: t.PushHead, LastError: t.PushError, NextTry: t.PushNext, Tries: t.PushTries}
	}
	return info
}

// CommitOf converts a git commit to its wire form.
func CommitOf(c gitx.Commit) api.CommitInfo {
	return api.CommitInfo{SHA: c.SHA, Subject: c.Subject, Author: c.Author, Time: c.Time}
}

// TurnOf converts a turn row to its wire form.
func TurnOf(t *store.Turn) *api.Turn {
	if t == nil {
		return nil
	}
	return &api.Turn{ID: t.ID, TaskID: t.TaskID, Number: t.Number, Seq: t.WorkNumber(), Label: t.Label(), Agent: t.Driver, Notice: t.Notice,
		Kind: t.Kind, Trigger: t.Trigger, Prompt: t.Prompt,
		Status: t.Status, Output: t.Output, Result: t.Result, Error: t.Error, SessionID: t.SessionID, ExitCode: t.ExitCode,
		QueuedAt: t.QueuedAt, StartedAt: t.StartedAt, EndedAt: t.EndedAt}
}

// TurnsOf converts turn rows.
func TurnsOf(ts []store.Turn) []api.Turn {
	out := make([]api.Turn, len(ts))
	for i := range ts {
		out[i] = *TurnOf(&ts[i])
	}
	return out
}

// AgentOf names an agent as the pages and the CLI do: "driver: command".
func AgentOf(driver, command string) string {
	if driver == "" {
		return ""
	}
	if command == "" {
		return driver
	}
	return driver + ": " + command
}

// CommentOf converts a comment row (a task message from before they were
// queued).
func CommentOf(c store.Comment) api.Comment {
	return api.Comment{ID: c.ID, TaskID: c.TaskID, Body: c.Body, CreatedAt: c.CreatedAt}
}

// MessageOf converts a task message (a review comment on no line).
func MessageOf(c review.ReviewComment) api.Comment {
	return api.Comment{ID: c.ID, TaskID: c.TaskID, Body: c.Body, DeliveryState: string(c.DeliveryState), DeliveredTurn: c.DeliveredTurn,
		WithdrawnAt: c.WithdrawnAt, CreatedAt: c.CreatedAt}
}

// CommentsOf is a task's messages, oldest first: the ones from before
// messages were queued (cs), then every task message of all.
func CommentsOf(cs []store.Comment, all []review.ReviewComment) []api.Comment {
	out := make([]api.Comment, 0, len(cs))
	for _, c := range cs {
		out = append(out, CommentOf(c))
	}
	for _, c := range all {
		if c.IsOwn() && c.IsTaskMessage() {
			out = append(out, MessageOf(c))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

// TaskReader is the part of a store a task's detail is read from.
type TaskReader interface {
	ListTurns(ctx context.Context, taskID string) ([]store.Turn, error)
	ListComments(ctx context.Context, taskID string) ([]store.Comment, error)
	ListReviewComments(ctx context.Context, taskID string) ([]review.ReviewComment, error)
	ListTranscripts(ctx context.Context, taskID string) ([]store.Transcript, error)
}

// DetailOf reads the detail of task show and the task page: the task's turns
// and comments from st, its branch's commits from commits.
func DetailOf(ctx context.Context, st TaskReader, info api.TaskInfo, commits func(context.Context) ([]api.CommitInfo, error)) (*api.TaskDetail, error) {
	turns, err := st.ListTurns(ctx, info.ID)
	if err != nil {
		return nil, err
	}
	cs, err := st.ListComments(ctx, info.ID)
	if err != nil {
		return nil, err
	}
	rc, err := st.ListReviewComments(ctx, info.ID)
	if err != nil {
		return nil, err
	}
	cm, err := commits(ctx)
	if err != nil {
		return nil, err
	}
	d := &api.TaskDetail{Task: info, Turns: TurnsOf(turns), Comments: CommentsOf(cs, rc), Commits: cm}
	ts, err := st.ListTranscripts(ctx, info.ID)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		var tr api.TurnTranscript
		if json.Unmarshal([]byte(t.Body), &tr) != nil {
			continue // a body this lazy cannot read is left out, not fatal
		}
		for i := range d.Turns {
			if d.Turns[i].Number == t.Turn {
				d.Turns[i].Transcript = &tr
			}
		}
	}
	return d, nil
}
