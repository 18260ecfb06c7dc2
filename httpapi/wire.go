package httpapi

import (
	"context"
	"lazy/api"
	"lazy/gitx"
	"lazy/store"
	"lazy/task"
)

// The web's wire types live in package api; these convert the daemon's own
// rows and git results to them, at the one place both are known.

// InfoOf converts a task row to its wire form.
func InfoOf(t *store.Task) api.TaskInfo {
	return api.TaskInfo{ID: t.ID, ShortID: task.ShortID(t.ID), Code: t.CodeString(), Ref: t.Ref(), Title: t.Title,
		Status: string(t.Status), Role: t.Role, Branch: t.Branch, Parent: t.Parent, Turns: t.Turns,
		LastActivity: t.LastActivity, FailReason: t.FailReason, Tripwire: t.Tripwire, Worktree: t.Worktree, CreatedAt: t.CreatedAt,
		BudgetTokens: t.BudgetTokens, EndedAt: t.EndedAt, EndBase: t.EndBase, EndHead: t.EndHead}
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
	return &api.Turn{ID: t.ID, TaskID: t.TaskID, Number: t.Number, Kind: t.Kind, Trigger: t.Trigger, Prompt: t.Prompt,
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

// CommentOf converts a comment row.
func CommentOf(c store.Comment) api.Comment {
	return api.Comment{ID: c.ID, TaskID: c.TaskID, Body: c.Body, CreatedAt: c.CreatedAt}
}

// CommentsOf converts comment rows.
func CommentsOf(cs []store.Comment) []api.Comment {
	out := make([]api.Comment, len(cs))
	for i, c := range cs {
		out[i] = CommentOf(c)
	}
	return out
}

// TaskReader is the part of a store a task's detail is read from.
type TaskReader interface {
	ListTurns(ctx context.Context, taskID string) ([]store.Turn, error)
	ListComments(ctx context.Context, taskID string) ([]store.Comment, error)
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
	cm, err := commits(ctx)
	if err != nil {
		return nil, err
	}
	return &api.TaskDetail{Task: info, Turns: TurnsOf(turns), Comments: CommentsOf(cs), Commits: cm}, nil
}
