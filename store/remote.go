package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"lazy/errkind"
	"lazy/review"
)

// Caller is the RPC the remote store rides on (client.Client in practice).
type Caller interface {
	Call(ctx context.Context, cmd string, args, out any) error
}

// Remote is the store of a running daemon, reached over its storage RPC
// (`storage.<op>`). The dev web server reads through it; it never opens a
// store file itself. The storage RPC is read-only: every write goes through a
// review or task command (and so through the task actor and its rules), so
// the write methods here refuse without calling.
type Remote struct{ c Caller }

var _ Store = (*Remote)(nil)

// NewRemote returns a store that calls the daemon through c.
func NewRemote(c Caller) *Remote { return &Remote{c: c} }

// StorageArgs is the argument object of every storage.<op> command.
type StorageArgs struct {
	ID       string                `json:"id,omitempty"`
	TaskID   string                `json:"task_id,omitempty"`
	State    string                `json:"state,omitempty"`
	Task     *Task                 `json:"task,omitempty"`
	Turn     *Turn                 `json:"turn,omitempty"`
	Comment  *Comment              `json:"comment,omitempty"`
	Review   *review.ReviewComment `json:"review,omitempty"`
	Approval *Approval             `json:"approval,omitempty"`
	At       time.Time             `json:"at,omitempty"`
	IDs      []string              `json:"ids,omitempty"`
	Reviewer string                `json:"reviewer,omitempty"`
}

// call maps the daemon's not-found and conflict kinds back to ErrNotFound
// and ErrConflict.
func (r *Remote) call(ctx context.Context, op string, a StorageArgs, out any) error {
	err := r.c.Call(ctx, "storage."+op, a, out)
	if err == nil {
		return nil
	}
	switch errkind.Of(err) {
	case errkind.NotFound:
		return fmt.Errorf("%s: %w (%v)", op, ErrNotFound, err)
	case errkind.Conflict:
		return fmt.Errorf("%s: %w (%v)", op, ErrConflict, err)
	}
	return fmt.Errorf("storage.%s: %w", op, err)
}

func (r *Remote) CreateTask(ctx context.Context, t *Task) error { return readOnly("createTask") }

func (r *Remote) GetTask(ctx context.Context, id string) (*Task, error) {
	var t Task
	return &t, r.call(ctx, "getTask", StorageArgs{ID: id}, &t)
}

func (r *Remote) ListTasks(ctx context.Context) ([]Task, error) {
	var ts []Task
	return ts, r.call(ctx, "listTasks", StorageArgs{}, &ts)
}

func (r *Remote) SaveTask(ctx context.Context, t *Task) error { return readOnly("saveTask") }

func (r *Remote) CreateTurn(ctx context.Context, t *Turn) error { return readOnly("createTurn") }

func (r *Remote) SaveTurn(ctx context.Context, t *Turn) error { return readOnly("saveTurn") }

func (r *Remote) ListTurns(ctx context.Context, taskID string) ([]Turn, error) {
	var ts []Turn
	return ts, r.call(ctx, "listTurns", StorageArgs{TaskID: taskID}, &ts)
}

func (r *Remote) TurnsInState(ctx context.Context, state string) ([]Turn, error) {
	var ts []Turn
	return ts, r.call(ctx, "turnsInState", StorageArgs{State: state}, &ts)
}

func (r *Remote) MarkLaunched(ctx context.Context, turnID string, at time.Time, delivered []string) error {
	return readOnly("markLaunched")
}

func (r *Remote) AddComment(ctx context.Context, c *Comment) error { return readOnly("addComment") }

func (r *Remote) ListComments(ctx context.Context, taskID string) ([]Comment, error) {
	var cs []Comment
	return cs, r.call(ctx, "listComments", StorageArgs{TaskID: taskID}, &cs)
}

func (r *Remote) AddReviewComment(ctx context.Context, c *review.ReviewComment) error {
	return readOnly("addReviewComment")
}

func (r *Remote) SaveReviewComment(ctx context.Context, c *review.ReviewComment) error {
	return readOnly("saveReviewComment")
}

// AnswerAsk is refused: the storage RPC is read-only.
func (r *Remote) AnswerAsk(ctx context.Context, askID string, reply *review.ReviewComment) error {
	return readOnly("answerAsk")
}

func (r *Remote) GetReviewComment(ctx context.Context, id string) (*review.ReviewComment, error) {
	var c review.ReviewComment
	return &c, r.call(ctx, "getReviewComment", StorageArgs{ID: id}, &c)
}

func (r *Remote) ListReviewComments(ctx context.Context, taskID string) ([]review.ReviewComment, error) {
	var cs []review.ReviewComment
	return cs, r.call(ctx, "listReviewComments", StorageArgs{TaskID: taskID}, &cs)
}

func (r *Remote) AsksInState(ctx context.Context, state review.AskState) ([]review.ReviewComment, error) {
	var cs []review.ReviewComment
	return cs, r.call(ctx, "asksInState", StorageArgs{State: string(state)}, &cs)
}

func (r *Remote) AddApproval(ctx context.Context, a *Approval) error { return readOnly("addApproval") }

func (r *Remote) AddUsage(ctx context.Context, _ ...*UsageCall) error { return readOnly("addUsage") }

func (r *Remote) AddEgress(ctx context.Context, e *EgressCall) error { return readOnly("addEgress") }

// SaveTranscript is refused: the storage RPC is read-only.
func (r *Remote) SaveTranscript(ctx context.Context, t *Transcript) error {
	return readOnly("saveTranscript")
}

// ListTranscripts lists a task's turn transcripts over the storage RPC.
func (r *Remote) ListTranscripts(ctx context.Context, taskID string) ([]Transcript, error) {
	var ts []Transcript
	return ts, r.call(ctx, "listTranscripts", StorageArgs{TaskID: taskID}, &ts)
}

func (r *Remote) ListEgress(ctx context.Context, taskID string) ([]EgressCall, error) {
	var es []EgressCall
	return es, r.call(ctx, "listEgress", StorageArgs{TaskID: taskID}, &es)
}

func (r *Remote) ListUsage(ctx context.Context, taskID string) ([]UsageCall, error) {
	var us []UsageCall
	return us, r.call(ctx, "listUsage", StorageArgs{TaskID: taskID}, &us)
}

func (r *Remote) ListApprovals(ctx context.Context, taskID string) ([]Approval, error) {
	var as []Approval
	return as, r.call(ctx, "listApprovals", StorageArgs{TaskID: taskID}, &as)
}

// UpdatePassphraseTries is the daemon's alone: the storage RPC refuses it.
func (r *Remote) UpdatePassphraseTries(context.Context, string, func(int, time.Time) (int, time.Time)) error {
	return readOnly("updatePassphraseTries")
}

func (r *Remote) SetViewed(context.Context, ViewedFile, bool) error { return readOnly("setViewed") }

func (r *Remote) SetResolved(context.Context, ResolvedThread, bool) error {
	return readOnly("setResolved")
}

func (r *Remote) SeeHead(context.Context, string, string, string, time.Time) (*ReviewedHead, error) {
	return nil, readOnly("seeHead")
}

func (r *Remote) ReviewState(ctx context.Context, reviewer, taskID string) (*ReviewState, error) {
	var st ReviewState
	if err := r.call(ctx, "reviewState", StorageArgs{Reviewer: reviewer, TaskID: taskID}, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Close has nothing to release.
func (r *Remote) Close() error { return nil }

// ErrBadStorageCall is a storage RPC with missing or unknown arguments.
var ErrBadStorageCall = errkind.New(errkind.BadCall, "bad storage call")

// ErrReadOnly is a write asked of the storage RPC.
var ErrReadOnly = errkind.New(errkind.ReadOnly, "the storage RPC is read-only")

func readOnly(op string) error {
	return fmt.Errorf("storage.%s: %w: every write goes through a review or task command (reviewPostComment, reviewUnblock, reviewAccept, approve, taskNew, …), which the task actor checks against its rules", op, ErrReadOnly)
}

// Serve runs one read-only storage.<op> against st: the daemon's side of
// Remote. A write op is refused (ErrReadOnly, 403).
func Serve(ctx context.Context, st Store, op string, raw []byte) (any, error) {
	var a StorageArgs
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, fmt.Errorf("%w: storage.%s arguments: %v", ErrBadStorageCall, op, err)
		}
	}
	switch op {
	case "getTask":
		return st.GetTask(ctx, a.ID)
	case "listTasks":
		return nonNil(st.ListTasks(ctx))
	case "listTurns":
		return nonNil(st.ListTurns(ctx, a.TaskID))
	case "turnsInState":
		return nonNil(st.TurnsInState(ctx, a.State))
	case "listComments":
		return nonNil(st.ListComments(ctx, a.TaskID))
	case "getReviewComment":
		return st.GetReviewComment(ctx, a.ID)
	case "listReviewComments":
		return nonNil(st.ListReviewComments(ctx, a.TaskID))
	case "asksInState":
		return nonNil(st.AsksInState(ctx, review.AskState(a.State)))
	case "listApprovals":
		return nonNil(st.ListApprovals(ctx, a.TaskID))
	case "listUsage":
		return nonNil(st.ListUsage(ctx, a.TaskID))
	case "listEgress":
		return nonNil(st.ListEgress(ctx, a.TaskID))
	case "listTranscripts":
		return nonNil(st.ListTranscripts(ctx, a.TaskID))
	case "reviewState":
		return st.ReviewState(ctx, a.Reviewer, a.TaskID)
	case "createTask", "saveTask", "createTurn", "saveTurn", "markLaunched", "addComment",
		"addReviewComment", "saveReviewComment", "answerAsk", "addApproval", "addUsage", "addEgress", "saveTranscript",
		"setViewed", "setResolved", "seeHead":
		return nil, readOnly(op)
	}
	return nil, fmt.Errorf("%w: unknown storage op %q", ErrBadStorageCall, op)
}

// Served is the storage RPC over st, as the web handler serves it
// (httpapi.Deps.Storage).
func Served(st Store) func(ctx context.Context, op string, raw []byte) (any, error) {
	return func(ctx context.Context, op string, raw []byte) (any, error) { return Serve(ctx, st, op, raw) }
}

func nonNil[T any](xs []T, err error) (any, error) {
	if xs == nil {
		xs = []T{}
	}
	return xs, err
}
