// Package grain carries task actor messages across the members of a
// cluster: task actors are protoactor cluster grains of kind "task" whose
// identity is the full task id. One protobuf envelope (grainpb.Call and
// grainpb.Reply) carries every message as JSON under the registered name of
// its Go type, so each message is defined once (package actors) and stays
// typed at both ends; domain errors cross with their kind, so every member's
// web layer answers them with the same status. Calls and events are signed
// with the cluster's secret (kept in the shared store) and bound to their
// task, a nonce and the time they were sent (see Link): a process that can
// reach a member's port but not the database cannot drive a task, and one
// that captured a call can neither replay it nor aim it at another task.
package grain

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"lazy/actors"
	"lazy/api"
	"lazy/approval"
	"lazy/gitx"
	"lazy/grain/grainpb"
	"lazy/review"
	"lazy/store"
)

// Kind is the cluster kind of task grains.
const Kind = "task"

// registry maps a wire name to the pointer type of a message or reply.
var (
	byName = map[string]reflect.Type{}
	byType = map[reflect.Type]string{}
)

func register(name string, v any) {
	t := reflect.TypeOf(v)
	byName[name], byType[t] = t, name
}

func init() {
	// what the task actor is sent
	register("StartWork", &actors.StartWork{})
	register("Unblock", &actors.Unblock{})
	register("AddComment", &actors.AddComment{})
	register("PostReviewComment", &actors.PostReviewComment{})
	register("RetryAsk", &actors.RetryAsk{})
	register("WithdrawComment", &actors.WithdrawComment{})
	register("Sync", &actors.Sync{})
	register("Accept", &actors.Accept{})
	register("ViolationDecision", &actors.ViolationDecision{})
	register("Approve", &actors.Approve{})
	register("CancelTask", &actors.CancelTask{})
	register("Wake", &actors.Wake{})
	register("Tripwire", &actors.Tripwire{})
	register("Rename", &actors.Rename{})
	register("SetBudget", &actors.SetBudget{})
	register("GetHealth", &actors.GetHealth{})
	register("InjectPanic", &actors.InjectPanic{})
	// what it answers
	register("WorkQueued", &actors.WorkQueued{})
	register("CommentAdded", &actors.CommentAdded{})
	register("ReviewComment", &review.ReviewComment{})
	register("ActionDone", &actors.ActionDone{})
	register("SyncQueued", &actors.SyncQueued{})
	register("SyncDone", &actors.SyncDone{})
	register("AcceptDone", &actors.AcceptDone{})
	register("Done", &actors.Done{})
	register("ActorHealth", api.ActorHealth{})
}

func marshal(v any) (string, []byte, error) {
	name, ok := byType[reflect.TypeOf(v)]
	if !ok {
		return "", nil, fmt.Errorf("grain: %T is not a registered task message (add it to package grain's registry)", v)
	}
	body, err := json.Marshal(v)
	return name, body, err
}

func unmarshal(name string, body []byte) (any, error) {
	t, ok := byName[name]
	if !ok {
		return nil, fmt.Errorf("grain: %q is not a task message this lazy knows (members of different versions?)", name)
	}
	if t.Kind() == reflect.Pointer {
		v := reflect.New(t.Elem())
		if err := json.Unmarshal(body, v.Interface()); err != nil {
			return nil, fmt.Errorf("grain: decode %s: %w", name, err)
		}
		return v.Interface(), nil
	}
	v := reflect.New(t)
	if err := json.Unmarshal(body, v.Interface()); err != nil {
		return nil, fmt.Errorf("grain: decode %s: %w", name, err)
	}
	return v.Elem().Interface(), nil
}

// EncodeReply wraps what a task actor answered: a value, or an error (an
// error reply is the error).
func EncodeReply(res any, err error) *grainpb.Reply {
	if e, ok := res.(error); ok && err == nil {
		err = e
	}
	if err != nil {
		return &grainpb.Reply{Error: encodeError(err)}
	}
	name, body, merr := marshal(res)
	if merr != nil {
		return &grainpb.Reply{Error: encodeError(merr)}
	}
	return &grainpb.Reply{Type: name, Body: body}
}

// DecodeReply unwraps a reply into the value or the error it carries.
func DecodeReply(r *grainpb.Reply) (any, error) {
	if r.GetError() != nil {
		return nil, decodeError(r.GetError())
	}
	return unmarshal(r.GetType(), r.GetBody())
}

// Error kinds on the wire.
const (
	kindRefusal  = "refusal"
	kindRule     = "rule"
	kindBusy     = "busy"
	kindTooLarge = "too_large"
	kindEnded    = "ended"
	kindLocked   = "locked"
	kindNotFound = "not_found"
	kindConflict = "conflict"
	kindWrong    = "wrong_passphrase"
	kindWait     = "wait"
	kindOther    = "other"
)

func encodeError(err error) *grainpb.Error {
	e := &grainpb.Error{Message: err.Error(), Kind: kindOf(err)}
	var ref *review.Refusal
	if errors.As(err, &ref) {
		if ref.Remedy != nil {
			e.Remedy, _ = json.Marshal(ref.Remedy)
		}
		if ref.Cause != nil {
			e.Cause = kindOf(ref.Cause)
		}
	}
	var wait *approval.WaitError
	if errors.As(err, &wait) {
		e.RetryAfterMs = wait.Wait.Milliseconds()
	}
	return e
}

func kindOf(err error) string {
	var (
		ref  *review.Refusal
		rule *review.RuleError
		busy *actors.BusyError
		big  *review.TooLargeError
		wait *approval.WaitError
	)
	switch {
	case errors.As(err, &ref):
		return kindRefusal
	case errors.As(err, &wait):
		return kindWait
	case errors.Is(err, approval.ErrWrong):
		return kindWrong
	case errors.As(err, &rule):
		return kindRule
	case errors.As(err, &busy):
		return kindBusy
	case errors.As(err, &big):
		return kindTooLarge
	case errors.Is(err, actors.ErrEnded):
		return kindEnded
	case errors.Is(err, gitx.ErrLocked):
		return kindLocked
	case errors.Is(err, store.ErrNotFound):
		return kindNotFound
	case errors.Is(err, store.ErrConflict):
		return kindConflict
	}
	return kindOther
}

// remoteError is an error that came from another member: its words as they
// were, and what it is (errors.Is) for the status it answers with.
type remoteError struct {
	msg  string
	kind error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.kind }

func decodeError(e *grainpb.Error) error {
	switch e.GetKind() {
	case kindRefusal:
		ref := &review.Refusal{Message: e.GetMessage()}
		if len(e.GetRemedy()) > 0 {
			var r review.Remedy
			if json.Unmarshal(e.GetRemedy(), &r) == nil {
				ref.Remedy = &r
			}
		}
		if e.GetCause() != "" {
			ref.Cause = decodeError(&grainpb.Error{Kind: e.GetCause(), Message: e.GetMessage(), RetryAfterMs: e.GetRetryAfterMs()})
		}
		return ref
	case kindRule:
		return &review.RuleError{Reason: e.GetMessage()}
	case kindBusy:
		return &remoteError{msg: e.GetMessage(), kind: &actors.BusyError{What: "another job"}}
	case kindTooLarge:
		return &remoteError{msg: e.GetMessage(), kind: &review.TooLargeError{}}
	case kindWait:
		return &remoteError{msg: e.GetMessage(), kind: &approval.WaitError{Wait: time.Duration(e.GetRetryAfterMs()) * time.Millisecond}}
	case kindWrong:
		return &remoteError{msg: e.GetMessage(), kind: approval.ErrWrong}
	case kindEnded:
		return &remoteError{msg: e.GetMessage(), kind: actors.ErrEnded}
	case kindLocked:
		return &remoteError{msg: e.GetMessage(), kind: gitx.ErrLocked}
	case kindNotFound:
		return &remoteError{msg: e.GetMessage(), kind: store.ErrNotFound}
	case kindConflict:
		return &remoteError{msg: e.GetMessage(), kind: store.ErrConflict}
	}
	return errors.New(e.GetMessage())
}
