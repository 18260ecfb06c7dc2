package grain

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"lazy/actors"
	"lazy/api"
)

// clock is a member's clock that a test turns.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// TestCallsAreBound: a signed call is taken once, by the grain of its own
// task, within the window of its send time; a replay, a re-aimed call and a
// late one are refused, each saying why.
func TestCallsAreBound(t *testing.T) {
	sender, receiver := &clock{time.Unix(1_700_000_000, 0)}, &clock{time.Unix(1_700_000_000, 0)}
	out, in := NewLink(secret, sender.now), NewLink(secret, receiver.now)

	c, err := out.Encode(&actors.Accept{Reason: "fine", Passphrase: "correct horse"}, "task-1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Decode(c, "task-2"); !errors.Is(err, ErrOtherTask) {
		t.Errorf("a call for task-1 at the grain of task-2: %v", err)
	}
	if msg, err := in.Decode(c, "task-1"); err != nil || msg.(*actors.Accept).Passphrase != "correct horse" {
		t.Fatalf("the call at its own task: %#v, %v", msg, err)
	}
	if _, err := in.Decode(c, "task-1"); !errors.Is(err, ErrReplayed) {
		t.Errorf("the same call again: %v", err)
	}
	// another member with its own memory takes a call once too
	if _, err := NewLink(secret, receiver.now).Decode(c, "task-1"); err != nil {
		t.Errorf("the call at a member that has not seen it: %v", err)
	}

	// the window holds either way, clock skew within it is fine
	for _, tc := range []struct {
		skew time.Duration // the receiver's clock minus the sender's
		want error
	}{
		{0, nil},
		{Window - time.Second, nil},
		{-(Window - time.Second), nil},
		{Window + time.Second, ErrStale},
		{-(Window + time.Second), ErrStale},
	} {
		c, err := out.Encode(&actors.CancelTask{}, "task-1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		receiver.t = sender.t.Add(tc.skew)
		if _, err := in.Decode(c, "task-1"); !errors.Is(err, tc.want) {
			t.Errorf("skew %s: got %v, want %v", tc.skew, err, tc.want)
		}
	}
	receiver.t = sender.t

	// a call without a nonce is no call of this cluster
	c, _ = out.Encode(&actors.Wake{}, "task-1", time.Minute)
	c.Nonce = nil
	c.Mac = out.signCall(c)
	if _, err := in.Decode(c, "task-1"); !errors.Is(err, ErrUnsigned) {
		t.Errorf("a call without a nonce: %v", err)
	}
}

// TestNoncesAreBounded: a member forgets a nonce once its call is out of the
// window (then the call is refused as late), and past MaxSeen remembered
// nonces it refuses a call rather than forget one early.
func TestNoncesAreBounded(t *testing.T) {
	now := &clock{time.Unix(1_700_000_000, 0)}
	link := NewLink(secret, now.now)
	for i := 0; i < 100; i++ {
		c, err := link.Encode(&actors.Wake{}, "task-1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := link.Decode(c, "task-1"); err != nil {
			t.Fatal(err)
		}
	}
	if len(link.seen) != 100 {
		t.Fatalf("remembered %d nonces, want 100", len(link.seen))
	}
	old, _ := link.Encode(&actors.Wake{}, "task-1", time.Minute)
	now.t = now.t.Add(Window + sweepEvery)
	fresh, _ := link.Encode(&actors.Wake{}, "task-1", time.Minute)
	if _, err := link.Decode(fresh, "task-1"); err != nil {
		t.Fatal(err)
	}
	if len(link.seen) != 1 {
		t.Errorf("after the window %d nonces are remembered, want only the fresh call's", len(link.seen))
	}
	if _, err := link.Decode(old, "task-1"); !errors.Is(err, ErrStale) {
		t.Errorf("a call older than the window, its nonce forgotten: %v", err)
	}

	for i := len(link.seen); i < MaxSeen; i++ {
		link.seen[fmt.Sprint(i)] = now.t.Add(Window)
	}
	full, _ := link.Encode(&actors.Wake{}, "task-1", time.Minute)
	if _, err := link.Decode(full, "task-1"); !errors.Is(err, ErrFull) {
		t.Errorf("a call past MaxSeen: %v", err)
	}
	now.t = now.t.Add(Window + sweepEvery)
	full, _ = link.Encode(&actors.Wake{}, "task-1", time.Minute)
	if _, err := link.Decode(full, "task-1"); err != nil || len(link.seen) != 1 {
		t.Errorf("once they fell out of the window: %v (%d remembered)", err, len(link.seen))
	}
}

// TestEventsAreBound: an event is taken once, within its window, and only
// with the cluster's signature.
func TestEventsAreBound(t *testing.T) {
	now := &clock{time.Unix(1_700_000_000, 0)}
	out, in := NewLink(secret, now.now), NewLink(secret, now.now)
	ev, err := out.EncodeEvent(api.Event{Kind: "status", TaskID: "task-1", Detail: "blocked"})
	if err != nil {
		t.Fatal(err)
	}
	if e, err := in.DecodeEvent(ev); err != nil || e.Detail != "blocked" {
		t.Fatalf("the event: %+v, %v", e, err)
	}
	if _, err := in.DecodeEvent(ev); !errors.Is(err, ErrReplayed) {
		t.Errorf("the same event again: %v", err)
	}
	late, _ := out.EncodeEvent(api.Event{Kind: "status"})
	now.t = now.t.Add(Window + time.Second)
	if _, err := in.DecodeEvent(late); !errors.Is(err, ErrStale) {
		t.Errorf("a late event: %v", err)
	}
	forged, _ := NewLink([]byte("another cluster"), now.now).EncodeEvent(api.Event{Kind: "status"})
	if _, err := in.DecodeEvent(forged); err == nil {
		t.Error("an event of another secret was taken")
	}
	// a call's signature does not pass as an event's
	c, _ := out.Encode(&actors.Wake{}, "", time.Minute)
	ev.Body, ev.Nonce, ev.SentMs, ev.Mac = c.Body, c.Nonce, c.SentMs, c.Mac
	if _, err := in.DecodeEvent(ev); err == nil {
		t.Error("a call's signature passed as an event's")
	}
}
