package daemon

import (
	"context"
	"time"

	"lazy/api"
	"lazy/httpapi"
	"lazy/review"
)

// commands is the daemon's one command table: each typed command of
// package api, bound to the call that serves it. The RPC serves it
// (CONTRACT §8) and the dashboard's pages call it in process (api.Caller),
// so a page and the CLI run the same command. Adding a command is its
// types in api/commands.go, one line here, and what it calls
// (docs/ARCHITECTURE.md, "How to add a command").
func (d *Daemon) commands(stop func()) httpapi.Commands {
	s, r := d.svc, d.review
	ok := func(word string, err error) (api.OK, error) { return api.OK{OK: word}, err }
	return httpapi.Table(
		httpapi.Handle(api.CmdPing, func(context.Context, api.None) (api.OK, error) { return ok("pong", nil) }),
		httpapi.Handle(api.CmdStatus, func(context.Context, api.None) (api.DaemonInfo, error) { return d.Info(), nil }),
		httpapi.Handle(api.CmdStop, func(context.Context, api.None) (api.OK, error) {
			// the reply leaves before the listeners close
			time.AfterFunc(50*time.Millisecond, stop)
			return ok("stopping", nil)
		}),

		httpapi.Handle(api.CmdTaskNew, s.NewTask),
		httpapi.Handle(api.CmdTaskList, func(ctx context.Context, _ api.None) ([]api.TaskInfo, error) { return s.ListTasks(ctx) }),
		httpapi.Handle(api.CmdTaskShow, func(ctx context.Context, a api.TaskRef) (*api.TaskDetail, error) { return s.ShowTask(ctx, a.Task) }),
		httpapi.Handle(api.CmdTaskCancel, func(ctx context.Context, a api.TaskRef) (*api.TaskInfo, error) { return s.Cancel(ctx, a.Task) }),
		httpapi.Handle(api.CmdTaskBudget, func(ctx context.Context, a api.BudgetArgs) (*api.TaskInfo, error) {
			return s.SetBudget(ctx, a.Task, a.Tokens)
		}),
		httpapi.Handle(api.CmdTaskRename, s.Rename),
		httpapi.Handle(api.CmdTaskPrune, s.Prune),
		httpapi.Handle(api.CmdTaskCommits, func(ctx context.Context, a api.TaskRef) ([]api.CommitInfo, error) { return s.TaskCommits(ctx, a.Task) }),
		httpapi.Handle(api.CmdTaskTranscript, s.TaskTranscript),
		httpapi.Handle(api.CmdCommitDiff, func(ctx context.Context, a api.CommitRef) (*api.CommitDiff, error) { return s.CommitDiff(ctx, a.ID) }),
		httpapi.Handle(api.CmdComment, func(ctx context.Context, a api.CommentArgs) (*api.CommentResult, error) {
			return s.Comment(ctx, a.Task, a.Body)
		}),
		httpapi.Handle(api.CmdUnblock, func(ctx context.Context, a api.UnblockArgs) (*api.Turn, error) {
			return s.Unblock(ctx, a.Task, a.Message)
		}),

		httpapi.Handle(api.CmdClusterStatus, func(ctx context.Context, _ api.None) (*api.ClusterStatus, error) { return s.ClusterStatus(ctx) }),
		httpapi.Handle(api.CmdActors, func(ctx context.Context, _ api.None) ([]api.ActorHealth, error) { return s.Actors(ctx) }),
		httpapi.Handle(api.CmdInjectPanic, func(ctx context.Context, a api.InjectPanicArgs) (api.OK, error) {
			return ok("sent", s.InjectPanic(ctx, a.Target))
		}),
		httpapi.Events(api.CmdWatch, s.Watch),

		httpapi.Handle(api.CmdReviewQueue, func(ctx context.Context, _ api.None) ([]api.QueueItem, error) { return r.Queue(ctx) }),
		httpapi.Handle(api.CmdReviewDiff, func(ctx context.Context, a api.ReviewDiffArgs) (*api.DiffResult, error) {
			return r.Diff(ctx, a.Task, a.DiffOptions)
		}),
		httpapi.Handle(api.CmdReviewComments, func(ctx context.Context, a api.TaskRef) (*review.Payload, error) { return r.Comments(ctx, a.Task) }),
		httpapi.Handle(api.CmdReviewPostComment, func(ctx context.Context, a api.ReviewCommentArgs) (*review.ReviewComment, error) {
			return r.PostComment(ctx, a.Task, a.PostCommentArgs)
		}),
		httpapi.Handle(api.CmdReviewRetryAsk, func(ctx context.Context, a api.CommentRef) (*api.ActionResult, error) {
			return r.RetryAsk(ctx, a.Task, a.ID)
		}),
		httpapi.Handle(api.CmdReviewWithdrawComment, func(ctx context.Context, a api.CommentRef) (*api.ActionResult, error) {
			return r.Withdraw(ctx, a.Task, a.ID)
		}),
		httpapi.Handle(api.CmdReviewApplySuggestion, r.ApplySuggestion),
		httpapi.Handle(api.CmdReviewUnblock, func(ctx context.Context, a api.ReviewUnblockArgs) (*api.Turn, error) {
			if a.Feedback == "" {
				a.Feedback = a.Message // as unblock spells it
			}
			return r.Unblock(ctx, a.Task, a.Feedback)
		}),
		httpapi.Handle(api.CmdReviewAccept, func(ctx context.Context, a api.ReviewAcceptArgs) (*api.TaskInfo, error) {
			return r.Accept(ctx, a.Task, a.AcceptArgs)
		}),
		httpapi.Handle(api.CmdReviewViolationDecision, func(ctx context.Context, a api.ViolationArgs) (api.OK, error) {
			return ok("true", r.ViolationDecision(ctx, a.Task, a.Decision, a.Files))
		}),
		httpapi.Handle(api.CmdSync, func(ctx context.Context, a api.SyncArgs) (*api.SyncResult, error) { return r.Sync(ctx, a.Task, a.Wait) }),
		httpapi.Handle(api.CmdApprove, func(ctx context.Context, a api.ApproveArgs) (api.OK, error) {
			return ok("true", r.Approve(ctx, a.Task, a.Files, a.Passphrase))
		}),
		httpapi.Handle(api.CmdReviewState, r.State),
		httpapi.Handle(api.CmdReviewViewed, r.MarkViewed),
		httpapi.Handle(api.CmdReviewResolve, r.Resolve),
		httpapi.Handle(api.CmdReviewSeen, r.Seen),
	)
}
