package client

import (
	"context"
	"encoding/json"
	"fmt"

	"lazy/api"
	"lazy/httpapi"
	"lazy/review"
	"lazy/store"
	"lazy/task"
)

// Caller is one RPC call (Client and Conn both are).
type Caller interface {
	Call(ctx context.Context, cmd string, args, out any) error
	Stream(ctx context.Context, cmd string, args any, fn func([]byte) error) error
}

// Review is the daemon's review actions over its RPC: what the dev web
// server hands the same echo handler the daemon serves.
type Review struct{ C Caller }

var _ httpapi.ReviewActions = Review{}

func (r Review) Queue(ctx context.Context) ([]api.QueueItem, error) {
	var out []api.QueueItem
	return out, r.C.Call(ctx, "reviewQueue", nil, &out)
}

func (r Review) Diff(ctx context.Context, ref string, o api.DiffOptions) (*api.DiffResult, error) {
	var out api.DiffResult
	return &out, r.C.Call(ctx, "reviewDiff", map[string]any{"task": ref, "since": o.Since, "full": o.Full, "context": o.Context, "skip_merge": o.SkipMerge}, &out)
}

func (r Review) Comments(ctx context.Context, ref string) (*review.Payload, error) {
	var out review.Payload
	return &out, r.C.Call(ctx, "reviewComments", map[string]any{"task": ref}, &out)
}

func (r Review) PostComment(ctx context.Context, ref string, a api.PostCommentArgs) (*review.ReviewComment, error) {
	var out review.ReviewComment
	args := map[string]any{"task": ref, "body": a.Body, "file": a.File, "line": a.Line, "side": a.Side, "intent": a.Intent, "thread_id": a.ThreadID, "start_line": a.StartLine}
	return &out, r.C.Call(ctx, "reviewPostComment", args, &out)
}

func (r Review) RetryAsk(ctx context.Context, ref, id string) (*api.ActionResult, error) {
	var out api.ActionResult
	return &out, r.C.Call(ctx, "reviewRetryAsk", map[string]any{"task": ref, "id": id}, &out)
}

func (r Review) Withdraw(ctx context.Context, ref, id string) (*api.ActionResult, error) {
	var out api.ActionResult
	return &out, r.C.Call(ctx, "reviewWithdrawComment", map[string]any{"task": ref, "id": id}, &out)
}

func (r Review) Unblock(ctx context.Context, ref, feedback string) (*api.Turn, error) {
	var out api.Turn
	return &out, r.C.Call(ctx, "reviewUnblock", map[string]any{"task": ref, "feedback": feedback}, &out)
}

func (r Review) Accept(ctx context.Context, ref string, a api.AcceptArgs) (*api.TaskInfo, error) {
	var out api.TaskInfo
	args := map[string]any{"task": ref, "reason": a.Reason, "passphrase": a.Passphrase, "allow_out_of_scope": a.AllowOutOfScope}
	return &out, r.C.Call(ctx, "reviewAccept", args, &out)
}

func (r Review) Sync(ctx context.Context, ref string, wait bool) (*api.SyncResult, error) {
	var out api.SyncResult
	return &out, r.C.Call(ctx, "sync", map[string]any{"task": ref, "wait": wait}, &out)
}

func (r Review) ViolationDecision(ctx context.Context, ref, decision string, files []string) error {
	return r.C.Call(ctx, "reviewViolationDecision", map[string]any{"task": ref, "decision": decision, "files": files}, nil)
}

func (r Review) Approve(ctx context.Context, ref string, files []string, passphrase string) error {
	return r.C.Call(ctx, "approve", map[string]any{"task": ref, "files": files, "passphrase": passphrase}, nil)
}

// Tasks is the task side of the dashboard for a process that is not the
// daemon: reads through the remote store (the storage RPC), writes and git
// through the daemon's commands.
type Tasks struct {
	C     Caller
	Store store.Store
}

var _ httpapi.Tasks = Tasks{}

func (t Tasks) resolve(ctx context.Context, ref string) (*store.Task, error) {
	all, err := t.Store.ListTasks(ctx)
	if err != nil {
		return nil, err
	}
	idents := make([]task.Ident, len(all))
	for i := range all {
		idents[i] = task.Ident{ID: all[i].ID, Code: all[i].CodeString()}
	}
	id, err := task.Resolve(ref, idents)
	if err != nil {
		return nil, err
	}
	return t.Store.GetTask(ctx, id.ID)
}

// ListTasks reads every task through the storage RPC.
func (t Tasks) ListTasks(ctx context.Context) ([]api.TaskInfo, error) {
	all, err := t.Store.ListTasks(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.TaskInfo, len(all))
	for i := range all {
		out[i] = httpapi.InfoOf(&all[i])
	}
	return out, nil
}

// ShowTask reads the task, turns and comments through the storage RPC; the
// branch's commits come from the daemon (git stays there).
func (t Tasks) ShowTask(ctx context.Context, ref string) (*api.TaskDetail, error) {
	tk, err := t.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	turns, err := t.Store.ListTurns(ctx, tk.ID)
	if err != nil {
		return nil, err
	}
	cs, err := t.Store.ListComments(ctx, tk.ID)
	if err != nil {
		return nil, err
	}
	var commits []api.CommitInfo
	if err := t.C.Call(ctx, "taskCommits", map[string]any{"task": tk.ID}, &commits); err != nil {
		return nil, err
	}
	return &api.TaskDetail{Task: httpapi.InfoOf(tk), Turns: httpapi.TurnsOf(turns), Comments: httpapi.CommentsOf(cs), Commits: commits}, nil
}

func (t Tasks) NewTask(ctx context.Context, a api.NewTaskArgs) (*api.NewTaskResult, error) {
	var out api.NewTaskResult
	return &out, t.C.Call(ctx, "taskNew", a, &out)
}

func (t Tasks) Comment(ctx context.Context, ref, body string) (*api.CommentResult, error) {
	var out api.CommentResult
	return &out, t.C.Call(ctx, "comment", map[string]any{"task": ref, "body": body}, &out)
}

func (t Tasks) Unblock(ctx context.Context, ref, message string) (*api.Turn, error) {
	var out api.Turn
	return &out, t.C.Call(ctx, "unblock", map[string]any{"task": ref, "message": message}, &out)
}

func (t Tasks) Cancel(ctx context.Context, ref string) (*api.TaskInfo, error) {
	var out api.TaskInfo
	return &out, t.C.Call(ctx, "taskCancel", map[string]any{"task": ref}, &out)
}

func (t Tasks) Actors(ctx context.Context) ([]api.ActorHealth, error) {
	var out []api.ActorHealth
	return out, t.C.Call(ctx, "actors", nil, &out)
}

func (t Tasks) InjectPanic(ctx context.Context, target string) error {
	return t.C.Call(ctx, "injectPanic", map[string]any{"target": target}, nil)
}

func (t Tasks) SetBudget(ctx context.Context, ref string, tokens int64) (*api.TaskInfo, error) {
	var out api.TaskInfo
	return &out, t.C.Call(ctx, "taskBudget", map[string]any{"task": ref, "tokens": tokens}, &out)
}

func (t Tasks) TaskCommits(ctx context.Context, ref string) ([]api.CommitInfo, error) {
	var out []api.CommitInfo
	return out, t.C.Call(ctx, "taskCommits", map[string]any{"task": ref}, &out)
}

func (t Tasks) CommitDiff(ctx context.Context, sha string) (*api.CommitDiff, error) {
	var out api.CommitDiff
	return &out, t.C.Call(ctx, "commitDiff", map[string]any{"id": sha}, &out)
}

// Watch relays the daemon's event stream into a channel.
func (t Tasks) Watch(ctx context.Context, a api.WatchArgs) (<-chan api.Event, func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan api.Event, 256)
	go func() {
		defer close(ch)
		_ = t.C.Stream(ctx, "watch", a, func(b []byte) error {
			var e api.Event
			if err := json.Unmarshal(b, &e); err != nil {
				return fmt.Errorf("bad event: %w", err)
			}
			select {
			case ch <- e:
			case <-ctx.Done():
				return ctx.Err()
			}
			return nil
		})
	}()
	return ch, cancel, nil
}
