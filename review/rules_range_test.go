package review

import (
	"strings"
	"testing"
)

func TestRangeAnchor(t *testing.T) {
	c := ReviewComment{File: "a.go", Line: 12, StartLine: 10, Side: New, LineText: "return x", Body: "these go together", Intent: Comment}
	if got := c.Anchor(); got != "a.go, lines 10-12 (new)" {
		t.Fatalf("anchor %q", got)
	}
	if p := RenderAskPrompt(&c); !strings.Contains(p, "about a.go, lines 10-12 (new)") {
		t.Fatalf("ask prompt: %s", p)
	}
	if p := RenderUnblockPrompt([]ReviewComment{c}, func(string) []ReviewComment { return nil }, ""); !strings.Contains(p, "1. a.go, lines 10-12 (new)") {
		t.Fatalf("unblock prompt: %s", p)
	}
	c.StartLine = 0
	if got := c.Anchor(); got != "a.go, line 12 (new)" {
		t.Fatalf("one line: %q", got)
	}
}

func TestThreadSettled(t *testing.T) {
	mine := func(intent Intent, mod func(*ReviewComment)) ReviewComment {
		c := ReviewComment{Actor: Human, Intent: intent}
		mod(&c)
		return c
	}
	delivered := mine(Comment, func(c *ReviewComment) { c.DeliveryState = Delivered })
	queued := mine(Comment, func(c *ReviewComment) { c.DeliveryState = PendingDelivery })
	answered := mine(Ask, func(c *ReviewComment) { c.AskState = AskAnswered })
	failed := mine(Ask, func(c *ReviewComment) { c.AskState = AskFailed })
	for _, tc := range []struct {
		name string
		msgs []ReviewComment
		want bool
	}{
		{"delivered", []ReviewComment{delivered}, true},
		{"delivered after an answered ask", []ReviewComment{answered, {Actor: Agent}, delivered}, true},
		{"an answered ask alone", []ReviewComment{answered, {Actor: Agent}}, false},
		{"a comment still queued", []ReviewComment{delivered, queued}, false},
		{"a failed ask", []ReviewComment{delivered, failed}, false},
	} {
		if got := (Thread{Messages: tc.msgs}).Settled(); got != tc.want {
			t.Errorf("%s: %v", tc.name, got)
		}
	}
}
