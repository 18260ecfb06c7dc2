package httpapi

import (
	"context"

	"lazy/api"
	"lazy/review"
)

// ReviewActions is everything the review routes need of
// the daemon. The daemon implements it directly; the dev web server through
// the daemon's RPC. The web layer never touches git, locks or storage writes.
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

// RawFiles serves a changed file's own bytes, streamed: the "raw file" link
// of a file too large to show, or binary. The daemon's review actions have
// it; where the injected ReviewActions lack it (the dev server's RPC
// client) the route says so.
type RawFiles interface {
	RawFile(ctx context.Context, ref, path, side string) (*api.RawFile, error)
}
