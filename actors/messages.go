// Package actors holds the behaviours of the supervisor tree and every message
// they exchange: TaskActor (one per live task; its FIFO serialises work turns,
// asks and unblocks without blocking its mailbox), GrantsActor (owner of the
// proxy's grant registry) and TrafficHub (fan-out of task and traffic events to
// watchers). Messages are small typed structs, all in this file.
package actors

import (
	"lazy/api"
	"lazy/review"
	"lazy/store"
	"lazy/task"
)

// --- TaskActor ---

// StartWork queues a work turn. Reply: *WorkQueued or error.
type StartWork struct {
	Trigger string // start | comment | unblock
	Prompt  string
}

// WorkQueued is the reply to StartWork and Unblock: the turn, and Notice
// when it will start a new conversation (the agent changed).
type WorkQueued struct {
	Turn   store.Turn
	Notice string
}

// AddComment saves a task message, queued for the next work turn that
// launches; on a blocked task with nothing queued it queues that turn (the
// auto-react loop). An ended task refuses it. Reply: *CommentAdded or error.
type AddComment struct{ Body string }

// CommentAdded is the reply to AddComment.
type CommentAdded struct {
	Comment   review.ReviewComment // the task message (a comment on no line)
	Triggered *store.Turn          // the work turn it started, if any
	// Next names the work turn that will carry it ("" : none is queued
	// yet); Status is the task's; Notice as WorkQueued's
	Next   string
	Status task.Status
	Notice string
}

// CancelTask ends the task: the running turn is killed, queued turns are
// dropped, grants are revoked. Reply: error or nil (as *Done).
type CancelTask struct{}

// Done is an empty successful reply.
type Done struct{}

// GetHealth asks a task actor for its health row. Reply: ActorHealth.
type GetHealth struct{}

// InjectPanic makes the receiving actor panic (fault injection for tests and
// for checking supervision on a live daemon).
type InjectPanic struct{ Reason string }

// Wake makes a task actor load its queue from the store and start work.
// Reply: *Done.
type Wake struct{}

// Drain tells a task actor the cluster placed its task on another member:
// it lets the job it runs finish (a turn is not cut off because a member
// joined), starts no other, hands the task over (TaskDeps.Handoff) and
// stops. With nothing running it stops at once. Local only: never crosses
// members.
type Drain struct{}

// PostReviewComment saves a reviewer's ask or comment: durably first, then
// (an ask on an askable task) an Ask job is queued, or (not askable) the ask
// is recorded failed with the rule's reason. Reply: *review.ReviewComment.
type PostReviewComment struct{ Comment review.ReviewComment }

// RetryAsk re-sends a failed question. Reply: *ActionDone or error.
type RetryAsk struct{ ID string }

// WithdrawComment withdraws a reviewer's own unseen message. Reply: *ActionDone or error.
type WithdrawComment struct{ ID string }

// ActionDone is the reply of retry and withdraw: the record and a notice.
type ActionDone struct {
	Comment review.ReviewComment
	Notice  string
}

// Unblock queues the work turn that carries every queued comment and the
// reviewer's message. Reply: *WorkQueued or error.
type Unblock struct {
	Message string
	// ID is the turn's id, given once by the daemon: an unblock tried again
	// (a cluster call whose answer was lost) is the turn queued already
	ID string
}

// Sync merges the parent branch into the task branch. With Wait the reply
// (*SyncDone) comes when the merge is done; without, *SyncQueued at once.
type Sync struct{ Wait bool }

// SyncQueued is the immediate reply of Sync.
type SyncQueued struct{ Position int }

// SyncDone is the reply of a waited Sync.
type SyncDone struct {
	Status    string
	Conflicts []string
}

// SyncReply is the reply of Sync: *SyncQueued, or *SyncDone when waited.
type SyncReply interface{ syncReply() }

func (*SyncQueued) syncReply() {}
func (*SyncDone) syncReply()   {}

// Accept checks the task and merges it into its parent. Reply: *AcceptDone or
// a *review.Refusal (with its remedy) or another error.
type Accept struct {
	Reason, Passphrase string
	AllowOutOfScope    bool
	// Head is the branch head the reviewer saw ("" : whatever it is now,
	// for callers that showed no head); another head is refused.
	Head string
	// Method is how the task goes into its parent: gitx.MethodMerge ("":
	// the same), MethodSquash or MethodRebase
	Method string
}

// AcceptDone is the reply of a successful accept.
type AcceptDone struct{ Task store.Task }

// Approve records protected-path approvals after checking the passphrase.
// Reply: *Done or error.
type Approve struct {
	Files      []string
	Passphrase string
}

// ViolationDecision records the reviewer's decision on out-of-scope files:
// "allow" keeps them, "revert" puts them back on the task branch. Reply: *Done.
type ViolationDecision struct {
	Decision string
	Files    []string
}

// ApplySuggestion commits the suggestion of review comment ID to the task
// branch as the reviewer (Author, "Name <email>"), on an idle task only
// (a running turn owns the worktree: busy), and only while the branch
// head is Head, the one the reviewer saw. Reply: *SuggestionApplied or
// error (a *review.RuleError saying why it cannot be applied).
type ApplySuggestion struct {
	ID, Head                string
	AuthorName, AuthorEmail string
}

// SuggestionApplied is the reply of ApplySuggestion: the comment, the
// branch's new head and a notice.
type SuggestionApplied struct {
	Comment review.ReviewComment
	Commit  string
	Notice  string
}

// jobDone comes back to the task actor when its running job ends.
type jobDone struct {
	epoch int
}

// launched comes back when the running turn's agent process has started.
type launched struct {
	epoch int
}

// renderUnblock asks the actor, from a job about to start its agent, for the
// unblock prompt of the comments queued now. Reply: string or error.
type renderUnblock struct{ epoch int }

// renderPrompt asks the task's own actor, from a job goroutine, for the
// unblock prompt of the comments queued now.
type renderPrompt func() (string, error)

// --- GrantsActor ---

// MintGrants mints one placeholder per env var for (role, task). Reply:
// *Minted or error.
type MintGrants struct {
	Role, TaskRef, TaskID string
	// Vars maps env var → credential kind ("api_key", "oauth", "auth_token",
	// "editor") with the real value to copy the shape from ("" for synthetic).
	Vars  map[string]MintVar
	Local bool
}

// MintVar is one variable to mint for.
type MintVar struct{ Kind, ShapeOf string }

// Minted is the reply to MintGrants: env var → placeholder.
type Minted struct{ Env map[string]string }

// Tripwire tells a task actor that its traffic tripped a wire at the proxy:
// it records it on the task and revokes the task's grants. No reply.
type Tripwire struct{ What string }

// Rename gives the task a new title. Reply: *Done or error.
type Rename struct{ Title string }

// SetBudget changes the task's token budget. Reply: *Done or error.
type SetBudget struct{ Tokens int64 }

// RevokeTask drops every grant of a task. Reply: *Done or error.
type RevokeTask struct{ TaskID string }

// --- TrafficHub ---

// Subscribe registers a watcher. Events matching Filter are sent to Ch
// without blocking; a full channel drops the event and counts it.
type Subscribe struct {
	ID     string
	Filter Filter
	Ch     chan<- api.Event
}

// Unsubscribe removes a watcher.
type Unsubscribe struct{ ID string }

// Publish fans one event out to matching watchers. Remote marks an event
// another member of a cluster published.
type Publish struct {
	Event  api.Event
	Remote bool
}
