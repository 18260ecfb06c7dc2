package review

import (
	"strings"
	"testing"
)

func TestParseSuggestion(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		ok         bool
		lines      []string
		rest       string
	}{
		{"block", "Simpler:\n```suggestion\n\treturn 1\n  // kept  \n```\nthanks", true, []string{"\treturn 1", "  // kept  "}, "Simpler:\nthanks"},
		{"empty: delete the lines", "```suggestion\n```", true, []string{}, ""},
		{"tildes and a longer fence", "~~~~suggestion\na ``` b\n~~~~~", true, []string{"a ``` b"}, ""},
		{"never closed", "```suggestion\nx", false, nil, ""},
		{"another language", "```go\nx\n```", false, nil, ""},
		{"indented four: code, no fence", "    ```suggestion\nx\n```", false, nil, ""},
	} {
		s, ok := ParseSuggestion(tc.body)
		if ok != tc.ok || (ok && (strings.Join(s.Lines, "\n") != strings.Join(tc.lines, "\n") || len(s.Lines) != len(tc.lines) || s.Rest != tc.rest)) {
			t.Errorf("%s: got %q rest %q ok %v; want %q rest %q ok %v", tc.name, s.Lines, s.Rest, ok, tc.lines, tc.rest, tc.ok)
		}
	}
}

// TestSuggestionDeliveredExactly: the agent's prompt holds the suggested
// lines byte for byte (tabs, trailing spaces, backticks), unindented.
func TestSuggestionDeliveredExactly(t *testing.T) {
	c := ReviewComment{ID: "c1", File: "a.go", StartLine: 4, Line: 5, Side: New, Actor: Human, Intent: Comment,
		Body: "Drop x.\n```suggestion\n\treturn 1 // ``` ok  \n\n```"}
	p := RenderUnblockPrompt([]ReviewComment{c}, func(string) []ReviewComment { return nil }, "")
	want := "   Comment: Drop x.\n   Suggested change: replace lines 4-5 of a.go with exactly the lines between the fences below (the fences are not part of it):\n````\n\treturn 1 // ``` ok  \n\n````\n"
	if !strings.Contains(p, want) {
		t.Fatalf("prompt:\n%s\nwant it to hold:\n%s", p, want)
	}
	c.Side = Old // no suggestion on the old side: the body as written
	if p := RenderUnblockPrompt([]ReviewComment{c}, func(string) []ReviewComment { return nil }, ""); strings.Contains(p, "Suggested change") {
		t.Fatalf("an old-side comment rendered as a suggestion:\n%s", p)
	}
}
