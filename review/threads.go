package review

import (
	"sort"
	"time"
)

// Thread is the messages at one anchor.
type Thread struct {
	ID       string `json:"id"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	Side     Side   `json:"side"`
	LineText string `json:"line_text"`
	// StartLine is the first line of a thread on a range (0: one line)
	StartLine int             `json:"start_line,omitempty"`
	Orphan    bool            `json:"orphan"` // the anchor is not in the current diff
	Messages  []ReviewComment `json:"messages"`
}

// StatusBar is the sticky footer's content.
type StatusBar struct {
	Status       string    `json:"status"`
	Turns        int       `json:"turns"`
	LastActivity time.Time `json:"last_activity"`
	Queued       int       `json:"queued"`
	AsksInFlight int       `json:"asks_in_flight"`
	CanAnswer    bool      `json:"can_answer"`
	Why          string    `json:"why,omitempty"` // Askable's reason when the agent cannot answer
}

// Payload is GET /api/review/:task/threads.
type Payload struct {
	Threads         []Thread        `json:"threads"`
	Pending         int             `json:"pending"`
	PendingDelivery int             `json:"pendingDelivery"`
	Queued          []ReviewComment `json:"queued"`
	State           StatusBar       `json:"state"`
}

// Counts are a task's numbers for the queue and the status bar. Withdrawn
// messages count nowhere.
type Counts struct {
	AwaitingAnswer int `json:"awaiting_answer"`
	PendingAsks    int `json:"pending_asks"`
	Queued         int `json:"queued_comments"`
}

// Count tallies comments.
func Count(all []ReviewComment) Counts {
	var c Counts
	for i := range all {
		m := &all[i]
		if m.AwaitingAnswer() {
			c.AwaitingAnswer++
		}
		if m.InFlight() {
			c.PendingAsks++
		}
		if m.IsQueued() {
			c.Queued++
		}
	}
	return c
}

// Queued lists the comments waiting for the next unblock, oldest first, in full.
func Queued(all []ReviewComment) []ReviewComment {
	out := []ReviewComment{}
	for i := range all {
		if all[i].IsQueued() {
			out = append(out, all[i])
		}
	}
	return out
}

// Settled reports a thread whose change requests the agent has had, with
// nothing else waiting on anyone: no ask in flight or failed, no comment
// queued. An answered question alone leaves a thread unsettled: it is there
// to be read.
func (t Thread) Settled() bool {
	delivered := false
	for i := range t.Messages {
		m := &t.Messages[i]
		switch {
		case !m.IsOwn() || m.IsWithdrawn():
		case m.Intent == Ask && m.AskState == AskAnswered:
		case m.Intent == Comment && m.DeliveryState == Delivered:
			delivered = true
		default:
			return false
		}
	}
	return delivered
}

// BuildThreads groups comments by thread in order of their first message;
// inDiff tells whether an anchor is still in the current diff. Task
// messages are on no line and in no thread.
func BuildThreads(all []ReviewComment, inDiff func(file string, side Side, line int) bool) []Thread {
	byID := map[string]*Thread{}
	var order []string
	sorted := append([]ReviewComment(nil), all...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].CreatedAt.Before(sorted[j].CreatedAt) })
	for _, m := range sorted {
		if m.IsTaskMessage() {
			continue // on no line: in the queued list only
		}
		t, ok := byID[m.ThreadID]
		if !ok {
			t = &Thread{ID: m.ThreadID, File: m.File, Line: m.Line, Side: m.Side, LineText: m.LineText, StartLine: m.StartLine}
			t.Orphan = inDiff != nil && !inDiff(m.File, m.Side, m.Line)
			byID[m.ThreadID] = t
			order = append(order, m.ThreadID)
		}
		t.Messages = append(t.Messages, m)
	}
	out := make([]Thread, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out
}

// BuildPayload assembles the threads payload and the status bar.
func BuildPayload(all []ReviewComment, inDiff func(string, Side, int) bool, bar StatusBar) Payload {
	c := Count(all)
	bar.Queued, bar.AsksInFlight = c.Queued, c.PendingAsks
	return Payload{Threads: BuildThreads(all, inDiff), Pending: c.PendingAsks, PendingDelivery: c.Queued, Queued: Queued(all), State: bar}
}
