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

	"lazy/actors"
	"lazy/api"
	"lazy/errkind"
	"lazy/grain/grainpb"
	"lazy/review"
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
	register("ApplySuggestion", &actors.ApplySuggestion{})
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
	register("SuggestionApplied", &actors.SuggestionApplied{})
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

// encodeError carries err's words and its kind (errkind: the one list the
// web's status answers by); a refused accept also its remedy and the kind
// of what caused it.
func encodeError(err error) *grainpb.Error {
	var ref *review.Refusal
	if errors.As(err, &ref) {
		e := &grainpb.Error{Message: err.Error(), Kind: string(errkind.Refusal)}
		if ref.Remedy != nil {
			e.Remedy, _ = json.Marshal(ref.Remedy)
		}
		if ref.Cause != nil {
			e.Cause = wireKind(ref.Cause)
		}
		return e
	}
	return &grainpb.Error{Message: err.Error(), Kind: wireKind(err)}
}

// wireKind is err's kind on the wire ("other" when it has none).
func wireKind(err error) string {
	if k := errkind.Of(err); k != errkind.Other {
		return string(k)
	}
	return "other"
}

// decodeError is an error that came from another member: its words as
// they were and its kind, so it answers with the status it would have
// there and is errors.Is the domain's sentinel of its kind. A refusal is
// rebuilt whole, remedy and cause.
func decodeError(e *grainpb.Error) error {
	switch k := errkind.Parse(e.GetKind()); k {
	case errkind.Refusal:
		ref := &review.Refusal{Message: e.GetMessage()}
		if len(e.GetRemedy()) > 0 {
			var r review.Remedy
			if json.Unmarshal(e.GetRemedy(), &r) == nil {
				ref.Remedy = &r
			}
		}
		if e.GetCause() != "" {
			ref.Cause = decodeError(&grainpb.Error{Kind: e.GetCause(), Message: e.GetMessage()})
		}
		return ref
	case errkind.Rule:
		return &review.RuleError{Reason: e.GetMessage()}
	case errkind.Other:
		return errors.New(e.GetMessage())
	default:
		return &errkind.Error{Kind: k, Msg: e.GetMessage()}
	}
}
