package api

import (
	"context"

	"lazy/review"
)

// Cmd is one RPC command (CONTRACT §8): its wire name, and as type
// parameters the JSON object it takes and the JSON reply it gives. The
// server's dispatch table (httpapi/rpc.go) and the typed client
// (client.Do) are both written against these values, so a command's
// arguments and reply are spelled once.
type Cmd[A, R any] struct{ Name string }

// Caller runs a command by its wire name, its arguments and its reply the
// command's own types: the daemon's table in process (httpapi.Commands:
// typed closures, no JSON) or its RPC (client.Client, client.Conn). Every
// caller — a page handler, the CLI, the dev server — goes through one.
type Caller interface {
	Call(ctx context.Context, cmd string, args, out any) error
}

// Do runs one typed command through c: a caller cannot send or read the
// wrong shape.
func Do[A, R any](ctx context.Context, c Caller, cmd Cmd[A, R], a A) (R, error) {
	var out R
	err := c.Call(ctx, cmd.Name, a, &out)
	return out, err
}

// Stream is a command that answers with a server-sent event stream of E.
type Stream[A, E any] struct{ Name string }

// None is the arguments of a command that takes none.
type None struct{}

// OK is the reply of a command that answers with nothing but success.
type OK struct {
	OK string `json:"ok"`
}

// TaskRef names one task by any ref form of CONTRACT §2.
type TaskRef struct {
	Task string `json:"task"`
}

// BudgetArgs are the arguments of taskBudget.
type BudgetArgs struct {
	Task   string `json:"task"`
	Tokens int64  `json:"tokens"` // 0: no budget
}

// RenameArgs are the arguments of taskRename.
type RenameArgs struct {
	Task  string `json:"task"`
	Title string `json:"title"`
}

// CommentArgs are the arguments of comment.
type CommentArgs struct {
	Task string `json:"task"`
	Body string `json:"body"`
}

// UnblockArgs are the arguments of unblock.
type UnblockArgs struct {
	Task    string `json:"task"`
	Message string `json:"message"`
}

// InjectPanicArgs are the arguments of injectPanic.
type InjectPanicArgs struct {
	Target string `json:"target"` // an actor name of `lazy actors`
}

// CommitRef names one commit.
type CommitRef struct {
	ID string `json:"id"`
}

// ReviewDiffArgs are the arguments of reviewDiff.
type ReviewDiffArgs struct {
	Task string `json:"task"`
	DiffOptions
}

// ReviewCommentArgs are the arguments of reviewPostComment.
type ReviewCommentArgs struct {
	Task string `json:"task"`
	PostCommentArgs
}

// CommentRef names one review comment of a task.
type CommentRef struct {
	Task string `json:"task"`
	ID   string `json:"id"`
}

// ApplySuggestionArgs are the arguments of reviewApplySuggestion: the
// comment whose suggestion is applied and the branch head the reviewer saw
// (CONTRACT §14: another head is refused).
type ApplySuggestionArgs struct {
	Task string `json:"task"`
	ID   string `json:"id"`
	Head string `json:"head"`
}

// ReviewUnblockArgs are the arguments of reviewUnblock: the reviewer's
// message is feedback (message is accepted too, as unblock spells it).
type ReviewUnblockArgs struct {
	Task     string `json:"task"`
	Feedback string `json:"feedback"`
	Message  string `json:"message,omitempty"`
}

// ReviewAcceptArgs are the arguments of reviewAccept.
type ReviewAcceptArgs struct {
	Task string `json:"task"`
	AcceptArgs
}

// ViolationArgs are the arguments of reviewViolationDecision.
type ViolationArgs struct {
	Task     string   `json:"task"`
	Decision string   `json:"decision"` // allow | revert
	Files    []string `json:"files"`
}

// SyncArgs are the arguments of sync.
type SyncArgs struct {
	Task string `json:"task"`
	Wait bool   `json:"wait"` // answer when the sync is done, not when it is queued
}

// ApproveArgs are the arguments of approve.
type ApproveArgs struct {
	Task       string   `json:"task"`
	Files      []string `json:"files"`
	Passphrase string   `json:"passphrase"`
}

// TranscriptArgs names a task and one of its turns (its record number, as
// events and `lazy task show` give it; 0: the latest with a transcript).
type TranscriptArgs struct {
	Task string `json:"task"`
	Turn int    `json:"turn,omitempty"`
}

// The commands. Wire names are CONTRACT §8's and never change.
var (
	CmdPing   = Cmd[None, OK]{"ping"}
	CmdStatus = Cmd[None, DaemonInfo]{"status"}
	CmdStop   = Cmd[None, OK]{"stop"}

	CmdTaskNew     = Cmd[NewTaskArgs, *NewTaskResult]{"taskNew"}
	CmdTaskList    = Cmd[None, []TaskInfo]{"taskList"}
	CmdTaskShow    = Cmd[TaskRef, *TaskDetail]{"taskShow"}
	CmdTaskCancel  = Cmd[TaskRef, *TaskInfo]{"taskCancel"}
	CmdTaskBudget  = Cmd[BudgetArgs, *TaskInfo]{"taskBudget"}
	CmdTaskRename  = Cmd[RenameArgs, *TaskInfo]{"taskRename"}
	CmdTaskCommits = Cmd[TaskRef, []CommitInfo]{"taskCommits"}
	CmdTaskPrune   = Cmd[PruneArgs, *PruneResult]{"taskPrune"}
	// CmdTaskTranscript is what the model said in one turn of a task (the
	// latest turn that has a transcript when Turn is 0), the running
	// turn's so far
	CmdTaskTranscript = Cmd[TranscriptArgs, *TurnTranscript]{"taskTranscript"}
	CmdCommitDiff     = Cmd[CommitRef, *CommitDiff]{"commitDiff"}
	CmdComment        = Cmd[CommentArgs, *CommentResult]{"comment"}
	CmdUnblock        = Cmd[UnblockArgs, *Turn]{"unblock"}

	CmdActors        = Cmd[None, []ActorHealth]{"actors"}
	CmdClusterStatus = Cmd[None, *ClusterStatus]{"clusterStatus"}
	CmdInjectPanic   = Cmd[InjectPanicArgs, OK]{"injectPanic"}
	CmdWatch         = Stream[WatchArgs, Event]{"watch"}

	CmdReviewQueue             = Cmd[None, []QueueItem]{"reviewQueue"}
	CmdReviewDiff              = Cmd[ReviewDiffArgs, *DiffResult]{"reviewDiff"}
	CmdReviewComments          = Cmd[TaskRef, *review.Payload]{"reviewComments"}
	CmdReviewPostComment       = Cmd[ReviewCommentArgs, *review.ReviewComment]{"reviewPostComment"}
	CmdReviewRetryAsk          = Cmd[CommentRef, *ActionResult]{"reviewRetryAsk"}
	CmdReviewWithdrawComment   = Cmd[CommentRef, *ActionResult]{"reviewWithdrawComment"}
	CmdReviewUnblock           = Cmd[ReviewUnblockArgs, *Turn]{"reviewUnblock"}
	CmdReviewApplySuggestion   = Cmd[ApplySuggestionArgs, *ActionResult]{"reviewApplySuggestion"}
	CmdReviewAccept            = Cmd[ReviewAcceptArgs, *TaskInfo]{"reviewAccept"}
	CmdReviewViolationDecision = Cmd[ViolationArgs, OK]{"reviewViolationDecision"}
	CmdSync                    = Cmd[SyncArgs, *SyncResult]{"sync"}
	CmdApprove                 = Cmd[ApproveArgs, OK]{"approve"}

	// the reviewer's own state on a task (api/reviewstate.go): read it,
	// mark a file viewed, resolve a thread, record the head reviewed; each
	// change answers the state after it
	CmdReviewState   = Cmd[ReviewStateArgs, *ReviewState]{"reviewState"}
	CmdReviewViewed  = Cmd[ViewedArgs, *ReviewState]{"reviewViewed"}
	CmdReviewResolve = Cmd[ResolveArgs, *ReviewState]{"reviewResolve"}
	CmdReviewSeen    = Cmd[SeenArgs, *ReviewState]{"reviewSeen"}
)
