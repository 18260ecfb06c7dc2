// Package store persists tasks, turns, ordinary comments, review comments and
// approvals. It owns the GORM models, the versioned migrations and the Store
// interface with its implementations; it maps driver errors to ErrNotFound and
// ErrConflict. It holds no rules: what may change is decided by its callers.
package store

import (
	"context"
	"fmt"
	"time"

	"lazy/errkind"
	"lazy/review"
	"lazy/task"
)

// Errors every implementation maps its own failures to.
var (
	ErrNotFound = errkind.New(errkind.NotFound, "not found")
	ErrConflict = errkind.New(errkind.Conflict, "already exists")
)

// Task is one task row.
type Task struct {
	ID        string      `json:"id" gorm:"primaryKey;size:32"`
	Code      *string     `json:"code" gorm:"uniqueIndex"`
	Title     string      `json:"title"`
	Prompt    string      `json:"prompt"`
	Status    task.Status `json:"status" gorm:"size:16;index"`
	Role      string      `json:"role"`
	Branch    string      `json:"branch"`
	Parent    string      `json:"parent"`
	Worktree  string      `json:"worktree"`
	Scope     string      `json:"scope"` // JSON list of globs; empty means everything
	SessionID string      `json:"session_id"`
	// Driver and AgentCommand are the agent that made SessionID (the
	// driver's config name and the command it ran): a turn under another
	// agent starts a new conversation rather than resume this one. ""
	// for a task whose agent was not recorded yet.
	Driver       string `json:"driver,omitempty"`
	AgentCommand string `json:"agent_command,omitempty"`
	// Agent is the driver chosen for the task at its creation (lazy task
	// new --driver); "": the config's agent.driver.
	Agent string `json:"agent,omitempty"`
	// Turns counts the task's work turns that have begun (taken from the
	// queue: running or ended); Asks its ask turns, Setups its setup
	// turns. "turns" means work turns everywhere (docs/GUIDE.md, "Turns").
	Turns      int    `json:"turns"`
	Asks       int    `json:"asks"`
	Setups     int    `json:"setups"`
	FailReason string `json:"fail_reason"`
	// Tripwire says what tripped a wire at the proxy (the real credential
	// in a response, another task's placeholder): the grant was revoked and
	// no turn gets a new one until the reviewer unblocks the task.
	Tripwire string `json:"tripwire,omitempty"`
	// BudgetTokens bounds the input and output tokens of the task's model
	// calls (0: no bound); the proxy refuses a call once they are used up.
	BudgetTokens int64      `json:"budget_tokens"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	LastActivity time.Time  `json:"last_activity"`
	EndedAt      *time.Time `json:"ended_at"`
	// EndBase and EndHead are the commits an ended task's diff runs
	// between, recorded as it ended, so its pages show what it did after
	// its branch and its parent have moved on: for an accepted task the
	// parent's head it was merged onto and the head that went in; for a
	// cancelled one where its branch left the parent and the branch's head.
	// Both "" for a live task, or one that ended before they were kept.
	EndBase string `json:"end_base,omitempty"`
	EndHead string `json:"end_head,omitempty"`
	// PushSince, in a cluster, is when the host's push of the task branch
	// to the git remote first failed (nil: nothing waits to be pushed);
	// PushHead the commit that waits, PushError the last failure, PushNext
	// when the host tries again and PushTries how often it tried. The host
	// writes them; the task's later steps wait for the push to land.
	PushSince *time.Time `json:"push_since,omitempty"`
	PushHead  string     `json:"push_head,omitempty"`
	PushError string     `json:"push_error,omitempty"`
	PushNext  *time.Time `json:"push_next,omitempty"`
	PushTries int        `json:"push_tries,omitempty"`
}

// CodeString is the code, or "" when the task has none.
func (t *Task) CodeString() string {
	if t.Code == nil {
		return ""
	}
	return *t.Code
}

// Ref is the task ref a grant carries: the code, or the short id.
func (t *Task) Ref() string { return task.Ref(t.ID, t.CodeString()) }

// Turn kinds, triggers and states.
const (
	TurnWork  = task.TurnWork
	TurnAsk   = task.TurnAsk
	TurnSetup = task.TurnSetup

	TurnQueued      = task.TurnQueued
	TurnRunning     = task.TurnRunning
	TurnDone        = task.TurnDone
	TurnFailed      = task.TurnFailed
	TurnInterrupted = task.TurnInterrupted
)

// Turn is one agent turn: a work turn or a read-only ask turn.
type Turn struct {
	ID     string `json:"id" gorm:"primaryKey;size:32"`
	TaskID string `json:"task_id" gorm:"size:32;index"`
	Number int    `json:"number"` // the record's number among all the task's turns
	// Seq is the turn's number among the task's turns of its kind: work
	// turn 3, ask 2, setup 1 (what the CLI and the pages call it).
	Seq       int    `json:"seq"`
	Kind      string `json:"kind" gorm:"size:8"`
	Trigger   string `json:"trigger" gorm:"size:16"` // start | comment | unblock | ask
	Prompt    string `json:"prompt"`
	Status    string `json:"status" gorm:"size:16;index"`
	Output    string `json:"output"`
	Result    string `json:"result"`
	Error     string `json:"error"`
	SessionID string `json:"session_id"`
	// Driver is the agent that ran the turn ("driver: command"); Notice
	// what the turn said of its conversation (a new one, and why).
	Driver   string    `json:"driver,omitempty"`
	Notice   string    `json:"notice,omitempty"`
	ExitCode int       `json:"exit_code"`
	QueuedAt time.Time `json:"queued_at"`
	// StartedAt is when the agent process started (nil: it never launched).
	StartedAt *time.Time `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
}

// WorkNumber is what a turn is called by: its number among the turns of
// its kind (Seq), or its record number for a turn written before Seq.
func (t *Turn) WorkNumber() int {
	if t.Seq > 0 {
		return t.Seq
	}
	return t.Number
}

// Label names the turn as the CLI and the pages do: "work turn 3", "ask 2",
// "setup 1".
func (t *Turn) Label() string {
	switch t.Kind {
	case TurnWork:
		return fmt.Sprintf("work turn %d", t.WorkNumber())
	case TurnAsk:
		return fmt.Sprintf("ask %d", t.WorkNumber())
	}
	return fmt.Sprintf("%s %d", t.Kind, t.WorkNumber())
}

// Comment is an ordinary task comment (it feeds the auto-react loop).
type Comment struct {
	ID        string    `json:"id" gorm:"primaryKey;size:32"`
	TaskID    string    `json:"task_id" gorm:"size:32;index"`
	Body      string    `json:"body"`
	CreatedAt time.Time `json:"created_at"`
}

// Approval kinds.
const (
	ApprovalProtected = "protected" // approved with the passphrase
	ApprovalScope     = "scope"     // an out-of-scope change the reviewer allowed
)

// Approval records a reviewer's decision on one path of a task.
type Approval struct {
	TaskID     string    `json:"task_id" gorm:"primaryKey;size:32"`
	Path       string    `json:"path" gorm:"primaryKey"`
	Kind       string    `json:"kind" gorm:"primaryKey"`
	ApprovedAt time.Time `json:"approved_at"`
	// Blob is the git blob id of the path's content that was approved
	// (protected paths): other content needs a new approval. "" for a
	// deletion, and for approvals older than content pinning (they no
	// longer approve anything).
	Blob string `json:"blob,omitempty"`
}

// UsageCall is a task's model calls as the proxy saw them: what the
// upstream's replies said they cost (zero tokens for count_tokens and
// refused calls, which count as requests). A row counts Requests calls of
// one task, turn, role, status and refusal cause, their tokens summed (the
// daemon writes one row for such calls of one batch); At and ID are its
// first call's. Rows written before schema version 32 are one call each.
type UsageCall struct {
	ID                       string `json:"id" gorm:"primaryKey;size:32"`
	TaskID                   string `json:"task_id" gorm:"size:32;index"`
	Turn                     int    `json:"turn"` // the turn that was running (0: none)
	Role                     string `json:"role"`
	Status                   int    `json:"status"`
	Refused                  string `json:"refused,omitempty"`
	InputTokens              int64  `json:"input_tokens"`
	OutputTokens             int64  `json:"output_tokens"`
	CacheReadInputTokens     int64  `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64  `json:"cache_creation_input_tokens"`
	// ChargedTokens is what the call counted against the task's budget
	// beyond its own input + output tokens: what the proxy held for a call
	// cut before its reply ended (0: input + output, all it cost)
	ChargedTokens int64     `json:"charged_tokens,omitempty"`
	At            time.Time `json:"at"`
	// Requests is how many calls the row counts (0, in a row of a file
	// store written before it was counted: one)
	Requests int64 `json:"requests,omitempty" gorm:"not null;default:1"`
	// Writer is the daemon process that counted the calls (its random id
	// for one life; "" before it was kept): a cluster member adds the rows
	// of other writers, read from the store, to the calls it counted itself
	Writer string `json:"writer,omitempty"`
}

// Calls is how many calls the row counts.
func (c UsageCall) Calls() int64 { return max(c.Requests, 1) }

// Charged is what the row's calls count against the task's budget.
func (c UsageCall) Charged() int64 { return max(c.ChargedTokens, c.InputTokens+c.OutputTokens) }

// Merge adds call d (of the same task, turn, role, status and refusal) to
// the row c: its requests and tokens. What they charged stays the sum of
// each one's Charged.
func (c *UsageCall) Merge(d UsageCall) {
	if c.ChargedTokens != 0 || d.ChargedTokens != 0 {
		c.ChargedTokens = c.Charged() + d.Charged()
	}
	c.Requests = c.Calls() + d.Calls()
	c.InputTokens += d.InputTokens
	c.OutputTokens += d.OutputTokens
	c.CacheReadInputTokens += d.CacheReadInputTokens
	c.CacheCreationInputTokens += d.CacheCreationInputTokens
}

// TableName is the table of usage calls.
func (UsageCall) TableName() string { return "usage_calls" }

// EgressCall is one egress connection of a task as the proxy saw it
// (CONTRACT §15): a CONNECT tunnel or a plain http:// request, its
// destination (host:port), status, bytes each way, and the cause when it
// was refused.
type EgressCall struct {
	ID        string    `json:"id" gorm:"primaryKey;size:32"`
	TaskID    string    `json:"task_id" gorm:"size:32;index"`
	Turn      int       `json:"turn"` // the turn that was running (0: none)
	Method    string    `json:"method"`
	Dest      string    `json:"dest"`
	Path      string    `json:"path"`
	Status    int       `json:"status"`
	Refused   string    `json:"refused,omitempty"`
	BytesUp   int64     `json:"bytes_up"`
	BytesDown int64     `json:"bytes_down"`
	Millis    int64     `json:"ms"`
	At        time.Time `json:"at"`
}

// TableName is the table of egress calls.
func (EgressCall) TableName() string { return "egress_calls" }

// Transcript is a turn's transcript as the proxy read it (CONTRACT §17):
// Body is the JSON of an api.TurnTranscript — scrubbed, bounded by
// api.MaxTurnTranscript — kept once the turn ends, one per task and turn.
type Transcript struct {
	TaskID string    `json:"task_id" gorm:"primaryKey;size:32"`
	Turn   int       `json:"turn" gorm:"primaryKey"`
	Body   string    `json:"body"`
	At     time.Time `json:"at"`
}

// TableName is the table of turn transcripts.
func (Transcript) TableName() string { return "turn_transcripts" }

// Store is what the daemon persists. Every method is durable when it returns.
type Store interface {
	CreateTask(ctx context.Context, t *Task) error
	GetTask(ctx context.Context, id string) (*Task, error)
	ListTasks(ctx context.Context) ([]Task, error)
	SaveTask(ctx context.Context, t *Task) error

	// CreateTurn assigns the turn its per-task Number and saves it.
	CreateTurn(ctx context.Context, t *Turn) error
	SaveTurn(ctx context.Context, t *Turn) error
	ListTurns(ctx context.Context, taskID string) ([]Turn, error)
	// TurnsInState lists turns in one state across all tasks, oldest first.
	TurnsInState(ctx context.Context, state string) ([]Turn, error)
	// MarkLaunched records, all at once, that a turn's agent process started:
	// the turn's started_at, and every comment it carries delivered with its
	// work turn number (Seq). A crash leaves either all of it or none.
	MarkLaunched(ctx context.Context, turnID string, at time.Time, delivered []string) error

	AddComment(ctx context.Context, c *Comment) error
	ListComments(ctx context.Context, taskID string) ([]Comment, error)

	// AddReviewComment saves a new review comment; it is durable on return.
	AddReviewComment(ctx context.Context, c *review.ReviewComment) error
	// SaveReviewComment writes a comment's state fields only (ask_state,
	// ask_error, delivery_state, delivered_turn, withdrawn_at): words never change.
	SaveReviewComment(ctx context.Context, c *review.ReviewComment) error
	// AnswerAsk saves the agent's reply to a pending ask and marks the ask
	// answered, in one write: a crash leaves both or neither, and an ask
	// that is not pending any more (answered by another member meanwhile)
	// is ErrConflict, so an ask is answered once.
	AnswerAsk(ctx context.Context, askID string, reply *review.ReviewComment) error
	GetReviewComment(ctx context.Context, id string) (*review.ReviewComment, error)
	ListReviewComments(ctx context.Context, taskID string) ([]review.ReviewComment, error)
	// AsksInState lists reviewer asks in one ask state across tasks, oldest first.
	AsksInState(ctx context.Context, state review.AskState) ([]review.ReviewComment, error)

	AddApproval(ctx context.Context, a *Approval) error
	ListApprovals(ctx context.Context, taskID string) ([]Approval, error)

	// AddUsage records model calls (of one task or several), in one
	// transaction where the store has them; ListUsage lists a task's,
	// oldest first.
	AddUsage(ctx context.Context, calls ...*UsageCall) error
	ListUsage(ctx context.Context, taskID string) ([]UsageCall, error)

	// UpdatePassphraseTries runs fn on the count of wrong approval
	// passphrases kept under name and the time before which no attempt is
	// checked (0 and the zero time when there is none), and keeps what fn
	// returns (0: forgets name). fn runs in one transaction with every other
	// update of name, on every daemon sharing the store: no count is lost
	// to a race. It must be quick (no passphrase is hashed inside).
	UpdatePassphraseTries(ctx context.Context, name string, fn func(wrong int, until time.Time) (int, time.Time)) error
	// AddEgress records one egress connection of a task; ListEgress lists
	// a task's, oldest first.
	AddEgress(ctx context.Context, e *EgressCall) error
	ListEgress(ctx context.Context, taskID string) ([]EgressCall, error)
	// SaveTranscript keeps a turn's transcript (a second save of the same
	// task and turn replaces the first); ListTranscripts lists a task's,
	// by turn.
	SaveTranscript(ctx context.Context, t *Transcript) error
	ListTranscripts(ctx context.Context, taskID string) ([]Transcript, error)

	// The review state (reviewstate.go). SetViewed marks a file viewed by
	// a reviewer at one content of its diff (on), replacing the marks on
	// its other contents, or not viewed (off). SetResolved marks a thread
	// resolved or not. SeeHead records the head a reviewer last reviewed
	// and returns the row (its Prev the head seen before, when it moved).
	// ReviewState reads a reviewer's state on a task.
	SetViewed(ctx context.Context, v ViewedFile, on bool) error
	SetResolved(ctx context.Context, r ResolvedThread, on bool) error
	SeeHead(ctx context.Context, reviewer, taskID, head string, at time.Time) (*ReviewedHead, error)
	ReviewState(ctx context.Context, reviewer, taskID string) (*ReviewState, error)

	Close() error
}

// Option configures how a store opens.
type Option func(*openOptions)

type openOptions struct {
	sync bool
	upTo int // migrate only this far (0: all): tests that build an older store
}

// migrateUpTo stops the migrations at version n (tests of upgrades).
func migrateUpTo(n int) Option { return func(o *openOptions) { o.upTo = n } }

// WithSync: true (the default) syncs every acknowledged write to disk before
// returning, so it survives a power cut; false leaves that to the OS (and to
// SQLite's checkpoints), so a write survives a crash of lazy but maybe not of
// the machine.
func WithSync(on bool) Option { return func(o *openOptions) { o.sync = on } }

func options(opts []Option) openOptions {
	o := openOptions{sync: true}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// synchronous is SQLite's pragma value for the option.
func (o openOptions) synchronous() string {
	if o.sync {
		return "FULL"
	}
	return "NORMAL"
}
