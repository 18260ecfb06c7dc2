package grain

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"lazy/actors"
	"lazy/api"
	"lazy/approval"
	"lazy/gitx"
	"lazy/grain/grainpb"
	"lazy/httpapi"
	"lazy/review"
	"lazy/store"
)

var secret = []byte("the cluster's secret")

// TestMessagesRoundTrip: every registered message crosses a member
// boundary as the same typed value.
func TestMessagesRoundTrip(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, msg := range []any{
		&actors.StartWork{Trigger: "start", Prompt: "do it"},
		&actors.Unblock{Message: "go on"},
		&actors.PostReviewComment{Comment: review.ReviewComment{ID: "c1", File: "a.go", Line: 3, StartLine: 1, Side: review.New, Intent: review.Ask, Body: "why?", CreatedAt: now}},
		&actors.Accept{Reason: "fine", Passphrase: "pw", AllowOutOfScope: true},
		&actors.Approve{Files: []string{".github/ci.yml"}, Passphrase: "pw"},
		&actors.Sync{Wait: true},
		&actors.SetBudget{Tokens: 5_000_000_000},
		&actors.WorkQueued{Turn: store.Turn{ID: "t", Number: 2, QueuedAt: now}},
		&actors.SyncDone{Status: "conflict", Conflicts: []string{"a.go"}},
		&actors.Done{},
		api.ActorHealth{Name: "task/x", Queued: []string{"ask 1"}},
	} {
		link := NewLink(secret, nil)
		c, err := link.Encode(msg, "task-1", time.Minute)
		if err != nil {
			t.Fatalf("%T: %v", msg, err)
		}
		b, err := proto.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var back grainpb.Call
		if err := proto.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		got, err := link.Decode(&back, "task-1")
		if err != nil || !reflect.DeepEqual(got, msg) {
			t.Errorf("%T: got %#v, %v", msg, got, err)
		}
		res, err := DecodeReply(EncodeReply(msg, nil))
		if err != nil || !reflect.DeepEqual(res, msg) {
			t.Errorf("reply %T: got %#v, %v", msg, res, err)
		}
	}
}

// TestCallsAreSigned: a call signed with another secret, or changed on the
// way (any field: its message, its task, its nonce, its time), is refused
// before it is decoded.
func TestCallsAreSigned(t *testing.T) {
	link := NewLink(secret, nil)
	for name, change := range map[string]func(c *grainpb.Call){
		"nothing":     func(*grainpb.Call) {},
		"the type":    func(c *grainpb.Call) { c.Type = "Wake" },
		"the body":    func(c *grainpb.Call) { c.Body = []byte(`{"Title":"x"}`) },
		"the timeout": func(c *grainpb.Call) { c.TimeoutMs++ },
		"the task":    func(c *grainpb.Call) { c.Task = "task-2" },
		"the nonce":   func(c *grainpb.Call) { c.Nonce[0] ^= 1 },
		"the time":    func(c *grainpb.Call) { c.SentMs++ },
	} {
		c, err := link.Encode(&actors.Rename{Title: "t"}, "task-1", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		change(c)
		_, err = link.Decode(c, "task-1")
		if name == "nothing" {
			if err != nil {
				t.Errorf("an unchanged call: %v", err)
			}
			continue
		}
		if !errors.Is(err, ErrUnsigned) {
			t.Errorf("a changed %s: %v", name, err)
		}
	}
	c, _ := link.Encode(&actors.CancelTask{}, "task-1", time.Second)
	if _, err := NewLink([]byte("another cluster"), nil).Decode(c, "task-1"); !errors.Is(err, ErrUnsigned) {
		t.Errorf("another secret: %v", err)
	}
	if _, err := link.Encode(struct{}{}, "task-1", time.Second); err == nil || !strings.Contains(err.Error(), "not a registered") {
		t.Errorf("an unregistered message: %v", err)
	}
}

// TestErrorsKeepTheirStatus: a domain error from another member answers
// with the status it would have here, in the same words.
func TestErrorsKeepTheirStatus(t *testing.T) {
	remedy := &review.Remedy{Reason: review.ReasonPassphraseRequired, Next: "give the passphrase", UIAction: review.ActionPassphrase}
	for _, err := range []error{
		&review.Refusal{Message: "protected files", Remedy: remedy},
		&review.Refusal{Message: "wrong", Cause: approval.ErrWrong},
		&review.Refusal{Message: "wait", Cause: &approval.WaitError{Wait: 3 * time.Second}},
		&review.RuleError{Reason: "not askable"},
		&actors.BusyError{What: "work turn 2"},
		&review.TooLargeError{What: "the message", Size: 10, Limit: 5},
		errors.Join(errors.New("task x is accepted"), actors.ErrEnded),
		&gitx.LockedError{Path: "p"},
		errors.Join(errors.New("task y"), store.ErrNotFound),
		errors.Join(errors.New("code taken"), store.ErrConflict),
		errors.New("disk full"),
	} {
		_, back := DecodeReply(EncodeReply(nil, err))
		if back == nil || back.Error() != err.Error() || httpapi.Status(back) != httpapi.Status(err) {
			t.Errorf("%v: came back as %v (status %d, want %d)", err, back, httpapi.Status(back), httpapi.Status(err))
		}
	}
	var ref *review.Refusal
	_, back := DecodeReply(EncodeReply(nil, &review.Refusal{Message: "m", Remedy: remedy}))
	if !errors.As(back, &ref) || !reflect.DeepEqual(ref.Remedy, remedy) {
		t.Errorf("the remedy did not cross: %#v", back)
	}
	if httpapi.Status(&review.Refusal{Message: "wait", Cause: &approval.WaitError{Wait: time.Second}}) != http.StatusTooManyRequests {
		t.Error("a refusal caused by waiting is not a 429 here")
	}
}

// FuzzDecode: whatever bytes reach a member as a call are refused or
// decoded, never a panic.
func FuzzDecode(f *testing.F) {
	link := NewLink(secret, nil)
	c, _ := link.Encode(&actors.Unblock{Message: "go"}, "task-1", time.Second)
	b, _ := proto.Marshal(c)
	f.Add(b)
	f.Add([]byte{0x0a, 0x04, 'D', 'o', 'n', 'e'})
	f.Fuzz(func(t *testing.T, b []byte) {
		var c grainpb.Call
		if proto.Unmarshal(b, &c) != nil {
			return
		}
		_, _ = link.Decode(&c, "task-1")
		c.Mac = link.signCall(&c)
		_, _ = link.Decode(&c, c.GetTask())
		var r grainpb.Reply
		if proto.Unmarshal(b, &r) == nil {
			_, _ = DecodeReply(&r)
		}
	})
}
