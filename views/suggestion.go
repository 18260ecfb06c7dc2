package views

import (
	"html/template"
	"strconv"

	"lazy/review"
)

// SuggestionView is a reviewer's suggested change shown as a small diff:
// the lines it replaces as the diff shows them now (Old; OldKnown false
// when some are not in the diff) and the suggested ones, with the form
// that applies it to the head the page shows.
type SuggestionView struct {
	TaskID, CSRF, CommentID string
	From, To                int
	Old, New                []string
	OldKnown                bool
	// CanApply: the page offers Apply; else Why says why not
	CanApply bool
	Why      string
	// Head is the branch head the page shows (PinSuggestions): the apply
	// form carries it, and the daemon refuses any other (CONTRACT §14)
	Head string
}

// Range is the lines the suggestion replaces, in words.
func (s *SuggestionView) Range() string {
	if s.From < s.To {
		return "lines " + strconv.Itoa(s.From) + "–" + strconv.Itoa(s.To)
	}
	return "line " + strconv.Itoa(s.To)
}

// messageBody renders a message: a suggestion's comment as its words and
// the suggestion apart, any other as its Markdown.
func messageBody(m *review.ReviewComment, taskID, csrf string) (template.HTML, *SuggestionView) {
	s, ok := m.Suggestion()
	if !ok {
		return MessageHTML(m.Body), nil
	}
	from, to := m.SuggestionRange()
	sv := &SuggestionView{TaskID: taskID, CSRF: csrf, CommentID: m.ID, From: from, To: to, New: s.Lines}
	if s.Rest == "" {
		return "", sv
	}
	return MessageHTML(s.Rest), sv
}

// fillSuggestions gives each suggestion of a thread the lines it replaces
// as the diff holds them now, and says whether it can be applied: only on
// the lines it was made on, still reading as they did.
func fillSuggestions(tv *ThreadView, lines map[string]sideLines, placed bool) {
	for i := range tv.Messages {
		sv := tv.Messages[i].Suggestion
		if sv == nil {
			continue
		}
		side := lines[tv.File+"\x00new"]
		sv.OldKnown = true
		for n := sv.From; n <= sv.To; n++ {
			text, ok := side[n]
			if !ok {
				sv.OldKnown, sv.Old = false, nil
				break
			}
			sv.Old = append(sv.Old, text)
		}
		same := sv.OldKnown && len(sv.Old) == len(sv.New) && len(sv.New) > 0
		for k := 0; same && k < len(sv.New); k++ {
			same = sv.Old[k] == sv.New[k]
		}
		switch {
		case same:
			sv.Why = "Applied: the lines read as suggested."
		case !tv.Commentable:
			sv.Why = "The task has ended: nothing can be applied."
		case !placed || tv.Outdated:
			sv.Why = "The lines it replaces have changed since: comment again on the file as it is."
		case tv.PortedFrom != 0:
			sv.Why = "The lines it replaces moved since: comment again where they are now."
		case tv.Messages[i].IsWithdrawn:
			sv.Why = "Withdrawn."
		default:
			sv.CanApply = true
		}
	}
}

// PinSuggestions sets the head the page shows on every suggestion's apply
// form; with no head (a page of no commits) nothing is offered.
func PinSuggestions(d *DiffView, orphans []ThreadView, head string) {
	pin := func(ts []ThreadView) {
		for i := range ts {
			for _, m := range ts[i].Messages {
				if m.Suggestion != nil {
					m.Suggestion.Head = head
					if head == "" && m.Suggestion.CanApply {
						m.Suggestion.CanApply, m.Suggestion.Why = false, "The branch has no commits to apply it to."
					}
				}
			}
		}
	}
	for fi := range d.Files {
		for hi := range d.Files[fi].Hunks {
			for ri := range d.Files[fi].Hunks[hi].Rows {
				pin(d.Files[fi].Hunks[hi].Rows[ri].Threads)
			}
		}
	}
	pin(orphans)
}
