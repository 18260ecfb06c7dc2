package api

import (
	"strings"
	"unicode/utf8"
)

// SearchHit is one line of a diff that holds the text searched for: where
// it sits as the review page anchors it (a deleted line on the old side,
// under the old path of a rename; any other on the new side).
type SearchHit struct {
	File string `json:"file"` // the changed file's path (Path())
	// Anchor is the path the line's anchor names: File, or a renamed
	// file's old path for a deleted line
	Anchor string `json:"anchor"`
	Side   string `json:"side"` // old | new
	Line   int    `json:"line"`
	// Text is the line, cut to SearchTextMax bytes around the match
	Text string `json:"text"`
	// Frag is the line's fragment id on the review page (set by the page
	// server, which owns the ids)
	Frag string `json:"frag,omitempty"`
}

// SearchResult is a search of a diff: the lines that hold the text, in
// diff order, and the files whose path holds it.
type SearchResult struct {
	Query string      `json:"query"`
	Files []string    `json:"files"`
	Hits  []SearchHit `json:"hits"`
	// Truncated: more lines matched than the limit; the first ones are given
	Truncated bool `json:"truncated"`
}

// SearchTextMax bounds a hit's Text: a 2 MB minified line is not sent back.
const SearchTextMax = 240

// SearchQueryMax bounds what is searched for.
const SearchQueryMax = 256

// SearchDiff finds q in files: in their paths and in every line of their
// hunks (case-insensitive when q has no upper-case letter, as an editor's
// smart case). At most limit hits are returned.
func SearchDiff(files []File, q string, limit int) SearchResult {
	res := SearchResult{Query: q, Files: []string{}, Hits: []SearchHit{}}
	if q == "" || limit <= 0 {
		return res
	}
	fold := strings.ToLower(q) == q
	match := func(s string) int {
		if fold {
			return indexFold(s, q)
		}
		return strings.Index(s, q)
	}
	for _, f := range files {
		if match(f.Path()) >= 0 || f.OldPath != "" && match(f.OldPath) >= 0 {
			res.Files = append(res.Files, f.Path())
		}
		for _, h := range f.Hunks {
			for _, l := range h.Lines {
				at := match(l.Text)
				if at < 0 {
					continue
				}
				if len(res.Hits) == limit {
					res.Truncated = true
					return res
				}
				hit := SearchHit{File: f.Path(), Anchor: f.Path(), Side: "new", Line: l.New, Text: around(l.Text, at)}
				if l.Kind == Deleted {
					hit.Side, hit.Line = "old", l.Old
					if f.OldPath != "" {
						hit.Anchor = f.OldPath
					}
				}
				res.Hits = append(res.Hits, hit)
			}
		}
	}
	return res
}

// indexFold is strings.Index of lower-case q in s, ignoring s's case.
func indexFold(s, q string) int {
	if len(s) < len(q) {
		return -1
	}
	// the common case: ASCII, where lower-casing keeps byte offsets
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.Index(strings.ToLower(s), q)
	}
	for i := range s {
		if hasPrefixFold(s[i:], q) {
			return i
		}
	}
	return -1
}

// hasPrefixFold reports s beginning with q, ignoring case.
func hasPrefixFold(s, q string) bool {
	for _, qr := range q {
		r, n := utf8.DecodeRuneInString(s)
		if n == 0 || (r != qr && !strings.EqualFold(string(r), string(qr))) {
			return false
		}
		s = s[n:]
	}
	return true
}

// around is the part of text, at most SearchTextMax bytes, that holds the
// match at byte at, cut on rune boundaries and marked with "…".
func around(text string, at int) string {
	if len(text) <= SearchTextMax {
		return text
	}
	start := max(0, at-SearchTextMax/3)
	end := min(len(text), start+SearchTextMax)
	for start > 0 && !utf8.RuneStart(text[start]) {
		start--
	}
	for end < len(text) && !utf8.RuneStart(text[end]) {
		end--
	}
	out := text[start:end]
	if start > 0 {
		out = "…" + out
	}
	if end < len(text) {
		out += "…"
	}
	return out
}
