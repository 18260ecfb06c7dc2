package api

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSearchDiff(t *testing.T) {
	files := []File{
		{OldPath: "old/a.go", NewPath: "new/a.go", IsRename: true, Hunks: []Hunk{{Lines: []Line{
			{Kind: Context, Old: 1, New: 1, Text: "package Straße"},
			{Kind: Deleted, Old: 2, Text: "var x = STRASSE"},
			{Kind: Added, New: 2, Text: "var x = straße"},
		}}}},
		{NewPath: "b.txt", Hunks: []Hunk{{Lines: []Line{{Kind: Added, New: 7, Text: strings.Repeat("é", 300) + "needle" + strings.Repeat("ü", 300)}}}}},
	}
	for _, tc := range []struct {
		q, want string
	}{
		{"straße", "new/a.go:new:1 new/a.go:new:2"},
		{"STRASSE", "old/a.go:old:2"},
		{"strasse", "old/a.go:old:2"},
		{"needle", "b.txt:new:7"},
		{"absent", ""},
	} {
		res := SearchDiff(files, tc.q, 10)
		var got []string
		for _, h := range res.Hits {
			got = append(got, h.Anchor+":"+h.Side+":"+itoa(h.Line))
			if !utf8.ValidString(h.Text) || len(h.Text) > SearchTextMax+2*len("…")+4 {
				t.Errorf("%q: hit text %d bytes, valid %v", tc.q, len(h.Text), utf8.ValidString(h.Text))
			}
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%q: got %v, want %q", tc.q, got, tc.want)
		}
	}
	if res := SearchDiff(files, "needle", 10); !strings.Contains(res.Hits[0].Text, "needle") || !strings.HasPrefix(res.Hits[0].Text, "…") {
		t.Errorf("a long line's hit is not cut around the match: %q", res.Hits[0].Text)
	}
	if res := SearchDiff(files, "a", 1); len(res.Hits) != 1 || !res.Truncated {
		t.Errorf("limit 1: %d hits, truncated %v", len(res.Hits), res.Truncated)
	}
	if res := SearchDiff(files, "old/", 10); strings.Join(res.Files, ",") != "new/a.go" {
		t.Errorf("path match: %v", res.Files)
	}
}

func itoa(n int) string {
	s := ""
	for n > 0 || s == "" {
		s = string(rune('0'+n%10)) + s
		n /= 10
	}
	return s
}
