package supervisor

import (
	"errors"
	"testing"

	"lazy/actors"
	"lazy/api"
)

// TestAskChecksTheReplyType: a reply of the type asked for comes back
// typed; a reply of another type is a *ReplyError naming both, not a panic.
func TestAskChecksTheReplyType(t *testing.T) {
	l := newScripted()
	h := newHarness(t, &fakeLauncher{fn: l.RunTurn})
	if _, err := Ask[api.ActorHealth](h.sup, h.taskID, &actors.GetHealth{}); err != nil {
		t.Fatalf("the right type: %v", err)
	}
	_, err := Ask[*actors.WorkQueued](h.sup, h.taskID, &actors.GetHealth{})
	var re *ReplyError
	if !errors.As(err, &re) || re.Want != "*actors.WorkQueued" || re.Got != "api.ActorHealth" {
		t.Fatalf("a reply of another type: %v", err)
	}
}
