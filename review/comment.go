// Package review is the review domain, with no I/O: the ReviewComment record
// and its states, and every rule of the review loop defined once with its
// wording (askable, can withdraw, can retry), the unblock prompt renderer and
// the accept refusal causes with their remedies. The daemon's gate, the page
// and the notices all call these; none restates them.
package review

import "time"

// Intent of a reviewer message.
type Intent string

// Intents.
const (
	Ask     Intent = "ask"     // a question answered now by a read-only turn
	Comment Intent = "comment" // a change request queued for the next unblock
)

// AskState of an ask.
type AskState string

// Ask states.
const (
	AskPending  AskState = "pending"
	AskAnswered AskState = "answered"
	AskFailed   AskState = "failed"
)

// DeliveryState of a queued comment.
type DeliveryState string

// Delivery states. Withdrawal is a timestamp, never a delivery state.
const (
	PendingDelivery DeliveryState = "pending_delivery"
	Delivered       DeliveryState = "delivered"
)

// Side of a diff line: old is the pre-image, new the post-image.
type Side string

// Sides.
const (
	Old Side = "old"
	New Side = "new"
)

// Actors.
const (
	Human = "human"
	Agent = "agent"
)

// ReviewComment is one inline review message: a reviewer's ask or comment, or
// an agent's reply in the same thread. Its words never change; the only
// permitted change after it is saved is the one-way withdrawal.
type ReviewComment struct {
	ID       string `json:"id"`
	TaskID   string `json:"task_id"`
	ThreadID string `json:"thread_id"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	// StartLine is the first line of a comment on a range of lines (Line
	// is the last); 0 for a comment on one line
	StartLine     int           `json:"start_line,omitempty"`
	Side          Side          `json:"side"`
	LineText      string        `json:"line_text"`
	Intent        Intent        `json:"intent"`
	Body          string        `json:"body"`
	Actor         string        `json:"actor"`
	AskState      AskState      `json:"ask_state,omitempty"`
	AskError      string        `json:"ask_error,omitempty"`
	DeliveryState DeliveryState `json:"delivery_state,omitempty"`
	DeliveredTurn int           `json:"delivered_turn,omitempty"`
	WithdrawnAt   *time.Time    `json:"withdrawn_at,omitempty"`
	CreatedAt     time.Time     `json:"created_at"`
}
