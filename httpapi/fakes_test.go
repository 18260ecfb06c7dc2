package httpapi

import (
	"context"

	"lazy/api"
	"lazy/review"
)

// Tasks and ReviewActions are what the tests' fakes serve, in the shape of
// the daemon's Service and Review; pages turns them into the command table
// the pages call (Deps.Call), as the daemon's own table does.
type Tasks interface {
	ListTasks(ctx context.Context) ([]api.TaskInfo, error)
	ShowTask(ctx context.Context, ref string) (*api.TaskDetail, error)
	CommitDiff(ctx context.Context, sha string) (*api.CommitDiff, error)
	Actors(ctx context.Context) ([]api.ActorHealth, error)
	NewTask(ctx context.Context, a api.NewTaskArgs) (*api.NewTaskResult, error)
	Cancel(ctx context.Context, ref string) (*api.TaskInfo, error)
	Comment(ctx context.Context, ref, body string) (*api.CommentResult, error)
}

type ReviewActions interface {
	Queue(ctx context.Context) ([]api.QueueItem, error)
	Diff(ctx context.Context, ref string, o api.DiffOptions) (*api.DiffResult, error)
	Comments(ctx context.Context, ref string) (*review.Payload, error)
	PostComment(ctx context.Context, ref string, a api.PostCommentArgs) (*review.ReviewComment, error)
	RetryAsk(ctx context.Context, ref, id string) (*api.ActionResult, error)
	Withdraw(ctx context.Context, ref, id string) (*api.ActionResult, error)
	Unblock(ctx context.Context, ref, feedback string) (*api.Turn, error)
	Accept(ctx context.Context, ref string, a api.AcceptArgs) (*api.TaskInfo, error)
	Sync(ctx context.Context, ref string, wait bool) (*api.SyncResult, error)
}

// pages is the command table over the fakes; a fake Tasks with Watch
// serves the watch stream too.
func pages(t Tasks, r ReviewActions) Commands {
	cs := []Command{
		Handle(api.CmdTaskList, func(ctx context.Context, _ api.None) ([]api.TaskInfo, error) { return t.ListTasks(ctx) }),
		Handle(api.CmdTaskShow, func(ctx context.Context, a api.TaskRef) (*api.TaskDetail, error) { return t.ShowTask(ctx, a.Task) }),
		Handle(api.CmdCommitDiff, func(ctx context.Context, a api.CommitRef) (*api.CommitDiff, error) { return t.CommitDiff(ctx, a.ID) }),
		Handle(api.CmdActors, func(ctx context.Context, _ api.None) ([]api.ActorHealth, error) { return t.Actors(ctx) }),
		Handle(api.CmdTaskNew, t.NewTask),
		Handle(api.CmdTaskCancel, func(ctx context.Context, a api.TaskRef) (*api.TaskInfo, error) { return t.Cancel(ctx, a.Task) }),
		Handle(api.CmdComment, func(ctx context.Context, a api.CommentArgs) (*api.CommentResult, error) {
			return t.Comment(ctx, a.Task, a.Body)
		}),
	}
	if w, ok := t.(TaskEvents); ok {
		cs = append(cs, Events(api.CmdWatch, w.Watch))
	}
	if r != nil {
		cs = append(cs,
			Handle(api.CmdReviewQueue, func(ctx context.Context, _ api.None) ([]api.QueueItem, error) { return r.Queue(ctx) }),
			Handle(api.CmdReviewDiff, func(ctx context.Context, a api.ReviewDiffArgs) (*api.DiffResult, error) {
				return r.Diff(ctx, a.Task, a.DiffOptions)
			}),
			Handle(api.CmdReviewComments, func(ctx context.Context, a api.TaskRef) (*review.Payload, error) { return r.Comments(ctx, a.Task) }),
			Handle(api.CmdReviewPostComment, func(ctx context.Context, a api.ReviewCommentArgs) (*review.ReviewComment, error) {
				return r.PostComment(ctx, a.Task, a.PostCommentArgs)
			}),
			Handle(api.CmdReviewRetryAsk, func(ctx context.Context, a api.CommentRef) (*api.ActionResult, error) {
				return r.RetryAsk(ctx, a.Task, a.ID)
			}),
			Handle(api.CmdReviewWithdrawComment, func(ctx context.Context, a api.CommentRef) (*api.ActionResult, error) {
				return r.Withdraw(ctx, a.Task, a.ID)
			}),
			Handle(api.CmdReviewApplySuggestion, func(ctx context.Context, a api.ApplySuggestionArgs) (*api.ActionResult, error) {
				// the daemon's rule, as far as a page without git can see it
				return nil, &review.RuleError{Reason: "Not applied: the branch moved since you reviewed it (you saw " + a.Head + ")"}
			}),
			Handle(api.CmdReviewUnblock, func(ctx context.Context, a api.ReviewUnblockArgs) (*api.Turn, error) {
				return r.Unblock(ctx, a.Task, a.Feedback)
			}),
			Handle(api.CmdReviewAccept, func(ctx context.Context, a api.ReviewAcceptArgs) (*api.TaskInfo, error) {
				return r.Accept(ctx, a.Task, a.AcceptArgs)
			}),
			Handle(api.CmdSync, func(ctx context.Context, a api.SyncArgs) (*api.SyncResult, error) { return r.Sync(ctx, a.Task, a.Wait) }),
			// the pages render with the reviewer's state: none kept by the fakes
			Handle(api.CmdReviewState, func(_ context.Context, a api.ReviewStateArgs) (*api.ReviewState, error) {
				return &api.ReviewState{Task: a.Task, Reviewer: a.Reviewer, Viewed: map[string]string{}, Resolved: map[string]api.ResolvedMark{}}, nil
			}))
	}
	return Table(cs...)
}
