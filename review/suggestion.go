package review

import (
	"fmt"
	"strings"
)

// Suggestion is a reviewer's suggested replacement for the lines a comment
// is on: the lines of its first ```suggestion fenced block, exactly as
// written (an empty block suggests deleting the lines).
type Suggestion struct {
	Lines []string
	// Rest is the comment's text without the block
	Rest string
}

// ParseSuggestion finds the first ```suggestion (or ~~~suggestion) fenced
// block of a comment body, as GitHub writes one. ok is false when there is
// none, or when it is never closed (then it is no suggestion, only text).
func ParseSuggestion(body string) (s Suggestion, ok bool) {
	lines := strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n")
	for i, l := range lines {
		fence, info, isFence := openFence(l)
		if !isFence || strings.TrimSpace(info) != "suggestion" {
			continue
		}
		for j := i + 1; j < len(lines); j++ {
			if closesFence(lines[j], fence) {
				s.Lines = append([]string{}, lines[i+1:j]...)
				rest := append(append([]string{}, lines[:i]...), lines[j+1:]...)
				s.Rest = strings.TrimSpace(strings.Join(rest, "\n"))
				return s, true
			}
		}
		return Suggestion{}, false
	}
	return Suggestion{}, false
}

// openFence reports a line opening a fenced code block (at most three
// spaces, then three or more backticks or tildes) with its fence and info.
func openFence(l string) (fence, info string, ok bool) {
	t := strings.TrimLeft(l, " ")
	if len(l)-len(t) > 3 || len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return "", "", false
	}
	n := 0
	for n < len(t) && t[n] == t[0] {
		n++
	}
	if n < 3 || (t[0] == '`' && strings.ContainsRune(t[n:], '`')) {
		return "", "", false
	}
	return t[:n], t[n:], true
}

// closesFence reports a line closing a block opened by fence: the same
// character, at least as many, nothing after but spaces.
func closesFence(l, fence string) bool {
	t := strings.TrimLeft(l, " ")
	if len(l)-len(t) > 3 || !strings.HasPrefix(t, fence) {
		return false
	}
	t = strings.TrimRight(t, " \t")
	return strings.Trim(t, fence[:1]) == ""
}

// SuggestionRange is what a suggestion replaces: lines From to To of the
// comment's file on the new side.
func (c *ReviewComment) SuggestionRange() (from, to int) {
	from = c.Line
	if c.StartLine > 0 && c.StartLine < c.Line {
		from = c.StartLine
	}
	return from, c.Line
}

// Suggestion is the comment's suggested change: only a reviewer's comment
// on the new side of a line or range carries one.
func (c *ReviewComment) Suggestion() (Suggestion, bool) {
	if !c.IsOwn() || c.File == "" || c.Side != New || c.IsWithdrawn() {
		return Suggestion{}, false
	}
	return ParseSuggestion(c.Body)
}

// renderSuggestion writes a suggestion into an agent's prompt exactly: its
// lines unindented between fences longer than any run of backticks in them.
func renderSuggestion(b *strings.Builder, c *ReviewComment, s Suggestion) {
	from, to := c.SuggestionRange()
	what := fmt.Sprintf("line %d", to)
	if from < to {
		what = fmt.Sprintf("lines %d-%d", from, to)
	}
	fence := "```"
	for _, l := range s.Lines {
		for strings.Contains(l, fence) {
			fence += "`"
		}
	}
	fmt.Fprintf(b, "   Suggested change: replace %s of %s with exactly the lines between the fences below (the fences are not part of it):\n", what, c.File)
	b.WriteString(fence + "\n")
	for _, l := range s.Lines {
		b.WriteString(l + "\n")
	}
	b.WriteString(fence + "\n")
}

// CanApply is whether the suggestion of comment c may be committed to the
// task branch: a reviewer's own comment on this task, not withdrawn, on
// the new side, holding a suggestion block.
func CanApply(c *ReviewComment, taskID string) (Suggestion, Verdict) {
	if c == nil || c.TaskID != taskID {
		return Suggestion{}, refuse("That message is not on this task; nothing was applied.")
	}
	if c.IsWithdrawn() {
		return Suggestion{}, refuse("This comment was withdrawn (by you, or as its suggestion was applied: the branch has it); to apply it again, post the suggestion again.")
	}
	s, ok := c.Suggestion()
	if !ok {
		return Suggestion{}, refuse("This message holds no suggestion to apply: a reviewer's comment on the new side with a ```suggestion block does.")
	}
	return s, Verdict{OK: true}
}
