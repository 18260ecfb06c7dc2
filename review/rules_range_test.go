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
