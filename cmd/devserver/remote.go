package main

import (
	"context"

	"lazy/api"
	"lazy/client"
	"lazy/httpapi"
	"lazy/review"
)

// Review is the daemon's review actions over its RPC: what the dev web
// server hands the same echo handler the daemon serves.
type Review struct{ C client.Caller }

var _ httpapi.ReviewActions = Review{}

func (r Review) Queue(ctx context.Context) ([]api.QueueItem, error) {
	return client.Do(ctx, r.C, api.CmdReviewQueue, api.None{})
}

func (r Review) Diff(ctx context.Context, ref string, o api.DiffOptions) (*api.DiffResult, error) {
	return client.Do(ctx, r.C, api.CmdReviewDiff, api.ReviewDiffArgs{Task: ref, DiffOptions: o})
}

func (r Review) Comments(ctx context.Context, ref string) (*review.Payload, error) {
	return client.Do(ctx, r.C, api.CmdReviewComments, api.TaskRef{Task: ref})
}

func (r Review) PostComment(ctx context.Context, ref string, a api.PostCommentArgs) (*review.ReviewComment, error) {
	return client.Do(ctx, r.C, api.CmdReviewPostComment, api.ReviewCommentArgs{Task: ref, PostCommentArgs: a})
}

func (r Review) RetryAsk(ctx context.Context, ref, id string) (*api.ActionResult, error) {
	return client.Do(ctx, r.C, api.CmdReviewRetryAsk, api.CommentRef{Task: ref, ID: id})
}

func (r Review) Withdraw(ctx context.Context, ref, id string) (*api.ActionResult, error) {
	return client.Do(ctx, r.C, api.CmdReviewWithdrawComment, api.CommentRef{Task: ref, ID: id})
}

func (r Review) Unblock(ctx context.Context, ref, feedback string) (*api.Turn, error) {
	return client.Do(ctx, r.C, api.CmdReviewUnblock, api.ReviewUnblockArgs{Task: ref, Feedback: feedback})
}

func (r Review) Accept(ctx context.Context, ref string, a api.AcceptArgs) (*api.TaskInfo, error) {
	return client.Do(ctx, r.C, api.CmdReviewAccept, api.ReviewAcceptArgs{Task: ref, AcceptArgs: a})
}

func (r Review) Sync(ctx context.Context, ref string, wait bool) (*api.SyncResult, error) {
	return client.Do(ctx, r.C, api.CmdSync, api.SyncArgs{Task: ref, Wait: wait})
}

// Tasks is the task side of the dashboard for a process that is not the
// daemon: every read and write through the daemon's commands.
type Tasks struct{ C client.Caller }

var _ httpapi.Tasks = Tasks{}

// ListTasks is taskList.
func (t Tasks) ListTasks(ctx context.Context) ([]api.TaskInfo, error) {
	return client.Do(ctx, t.C, api.CmdTaskList, api.None{})
}

// ShowTask is taskShow.
func (t Tasks) ShowTask(ctx context.Context, ref string) (*api.TaskDetail, error) {
	return client.Do(ctx, t.C, api.CmdTaskShow, api.TaskRef{Task: ref})
}

func (t Tasks) TaskCommits(ctx context.Context, ref string) ([]api.CommitInfo, error) {
	return client.Do(ctx, t.C, api.CmdTaskCommits, api.TaskRef{Task: ref})
}

func (t Tasks) CommitDiff(ctx context.Context, sha string) (*api.CommitDiff, error) {
	return client.Do(ctx, t.C, api.CmdCommitDiff, api.CommitRef{ID: sha})
}

func (t Tasks) Actors(ctx context.Context) ([]api.ActorHealth, error) {
	return client.Do(ctx, t.C, api.CmdActors, api.None{})
}

// NewTask, Cancel and Comment are the task forms' commands, run by the
// daemon as `lazy task new`, `lazy task cancel` and `lazy comment` run them.
func (t Tasks) NewTask(ctx context.Context, a api.NewTaskArgs) (*api.NewTaskResult, error) {
	return client.Do(ctx, t.C, api.CmdTaskNew, a)
}

func (t Tasks) Cancel(ctx context.Context, ref string) (*api.TaskInfo, error) {
	return client.Do(ctx, t.C, api.CmdTaskCancel, api.TaskRef{Task: ref})
}

func (t Tasks) Comment(ctx context.Context, ref, body string) (*api.CommentResult, error) {
	return client.Do(ctx, t.C, api.CmdComment, api.CommentArgs{Task: ref, Body: body})
}
