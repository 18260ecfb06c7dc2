package review

import (
	"fmt"
	"strings"

	"lazy/errkind"
	"lazy/task"
)

// Verdict is a rule's answer: allowed or not, and the words that explain it.
// The daemon's refusal, the page's explanation and the notice after a POST
// all show Reason as it is.
type Verdict struct {
	OK     bool
	NoOp   bool // allowed, but there is nothing to do (a retry of an ask in flight)
	Reason string
}

func allow() Verdict                     { return Verdict{OK: true} }
func refuse(r string) Verdict            { return Verdict{Reason: r} }
func refusef(f string, a ...any) Verdict { return Verdict{Reason: fmt.Sprintf(f, a...)} }

// Askable is the one rule of when the agent can answer a question: only while
// the task is blocked or in conflict. It drives the daemon's gate, the warning
// above the comment box and the status bar.
func Askable(status task.Status) Verdict {
	if status == task.Blocked || status == task.Conflict {
		return allow()
	}
	switch status {
	case task.Running:
		return refuse("The agent is working on a turn right now and cannot answer questions; your question is saved — re-send it once the task is blocked again, or add it as a comment for the next unblock.")
	case task.Failed:
		return refuse("The task's last turn failed, so there is no agent waiting to answer; your question is saved — unblock the task, then re-send it when it is blocked.")
	case task.Accepted, task.Cancelled:
		return refusef("The task has ended (%s); nobody will answer. Start a new task to continue.", status)
	}
	return refusef("The agent can answer only while the task is blocked or in conflict; it is %s.", status)
}

// IsTaskMessage reports a message to the task as a whole (`lazy comment`,
// the task page's message box): a comment with no anchor. It is queued and
// delivered like a review comment, and is no thread of the diff.
func (c *ReviewComment) IsTaskMessage() bool { return c.File == "" }

// IsOwn reports a reviewer's own message.
func (c *ReviewComment) IsOwn() bool { return c.Actor == Human }

// IsWithdrawn reports a withdrawn message.
func (c *ReviewComment) IsWithdrawn() bool { return c.WithdrawnAt != nil }

// IsQueued reports a comment waiting for the next unblock.
func (c *ReviewComment) IsQueued() bool {
	return c.IsOwn() && c.Intent == Comment && c.DeliveryState == PendingDelivery && !c.IsWithdrawn()
}

// InFlight reports an ask the agent has not answered yet and is working on.
func (c *ReviewComment) InFlight() bool {
	return c.IsOwn() && c.Intent == Ask && c.AskState == AskPending && !c.IsWithdrawn()
}

// AwaitingAnswer reports a question that has no answer yet (in flight or failed).
func (c *ReviewComment) AwaitingAnswer() bool {
	return c.IsOwn() && c.Intent == Ask && (c.AskState == AskPending || c.AskState == AskFailed) && !c.IsWithdrawn()
}

// CanWithdraw is the one rule of withdrawal: only the reviewer's own message
// that the agent has not seen — a queued comment or a failed ask.
func CanWithdraw(c *ReviewComment, taskID string) Verdict {
	switch {
	case c == nil || c.TaskID != taskID:
		return refuse("That message is not on this task; nothing was withdrawn.")
	case !c.IsOwn():
		return refuse("The agent wrote this reply; only your own messages can be withdrawn.")
	case c.IsWithdrawn():
		return refuse("Already withdrawn.")
	case c.Intent == Comment && c.DeliveryState == Delivered:
		return refusef("Delivered to the agent with turn %d, so it can no longer be withdrawn; add a new comment to change course.", c.DeliveredTurn)
	case c.Intent == Ask && c.AskState == AskPending:
		return refuse("The agent is answering this question right now, so it can no longer be withdrawn.")
	case c.Intent == Ask && c.AskState == AskAnswered:
		return refuse("The agent already answered this question, so it can no longer be withdrawn.")
	}
	return allow()
}

// CanRetry is the one rule of re-sending: only the reviewer's own question
// that failed. A retry of a question in flight does nothing.
func CanRetry(c *ReviewComment, taskID string) Verdict {
	switch {
	case c == nil || c.TaskID != taskID:
		return refuse("That message is not on this task; nothing was re-sent.")
	case !c.IsOwn():
		return refuse("Only your own questions can be re-sent; this is the agent's reply.")
	case c.Intent != Ask:
		return refuse("This is a comment, not a question: it reaches the agent with the next unblock, not by re-sending.")
	case c.IsWithdrawn():
		return refuse("You withdrew this question; post it again to ask it.")
	case c.AskState == AskAnswered:
		return refuse("The agent already answered this question.")
	case c.AskState == AskPending:
		return Verdict{OK: true, NoOp: true, Reason: "The question is already with the agent; its answer will appear in the thread."}
	}
	return allow()
}

// AnchorLabel renders "path, line 12 (new)".
func AnchorLabel(file string, line int, side Side) string {
	return fmt.Sprintf("%s, line %d (%s)", file, line, side)
}

// Anchor is where a comment sits: "path, line 12 (new)", or for a range
// "path, lines 10-12 (new)"; a task message sits on no line.
func (c *ReviewComment) Anchor() string {
	if c.IsTaskMessage() {
		return "A message about the task as a whole (on no line)"
	}
	if c.StartLine > 0 && c.StartLine < c.Line {
		return fmt.Sprintf("%s, lines %d-%d (%s)", c.File, c.StartLine, c.Line, c.Side)
	}
	return AnchorLabel(c.File, c.Line, c.Side)
}

// RenderAskPrompt is the read-only ask turn's prompt.
func RenderAskPrompt(c *ReviewComment) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The reviewer has a question about %s:\n", c.Anchor())
	if c.LineText != "" {
		fmt.Fprintf(&b, "    %s\n", c.LineText)
	}
	fmt.Fprintf(&b, "\nQuestion:\n%s\n\nAnswer the question. This is a read-only turn: do not change any files.", c.Body)
	return b.String()
}

// RenderUnblockPrompt is the prompt of a work turn (an unblock's, or any
// other's: every work turn carries what is queued when it launches): each
// queued comment and task message with its anchor, the line's text and any
// ask conversation already held on its thread, then the turn's own message.
// With nothing queued it is the message alone, unwrapped. thread returns
// the messages of a thread in order.
func RenderUnblockPrompt(queued []ReviewComment, thread func(threadID string) []ReviewComment, message string) string {
	if len(queued) == 0 {
		return message
	}
	var b strings.Builder
	b.WriteString("The reviewer left comments for you. Address each of them in this turn.\n")
	for i := range queued {
		c := &queued[i]
		fmt.Fprintf(&b, "\n%d. %s\n", i+1, c.Anchor())
		if c.LineText != "" {
			fmt.Fprintf(&b, "   Line: %s\n", c.LineText)
		}
		var convo []string
		for _, m := range thread(c.ThreadID) {
			if m.ID == c.ID || m.IsWithdrawn() {
				continue
			}
			switch {
			case m.IsOwn() && m.Intent == Ask:
				convo = append(convo, "   Reviewer asked: "+indent(m.Body))
			case !m.IsOwn():
				convo = append(convo, "   You answered: "+indent(m.Body))
			}
		}
		if len(convo) > 0 {
			b.WriteString("   Earlier on this line:\n")
			for _, l := range convo {
				b.WriteString("  " + l + "\n")
			}
		}
		label := "Comment"
		if c.IsTaskMessage() {
			label = "Message"
		}
		if sg, ok := c.Suggestion(); ok {
			// the suggestion goes verbatim, apart from the comment's words
			if sg.Rest != "" {
				fmt.Fprintf(&b, "   %s: %s\n", label, indent(sg.Rest))
			}
			renderSuggestion(&b, c, sg)
			continue
		}
		fmt.Fprintf(&b, "   %s: %s\n", label, indent(c.Body))
	}
	if strings.TrimSpace(message) != "" {
		fmt.Fprintf(&b, "\nReviewer's message:\n%s\n", message)
	}
	return b.String()
}

func indent(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n      ") }

// BeingDelivered refuses withdrawing a comment that is in the prompt of the
// turn starting at this moment.
func BeingDelivered() Verdict {
	return refuse("This comment is being delivered to the agent with the turn starting now, so it can no longer be withdrawn; add a new comment to change course.")
}

// MaxUnblockPrompt is the most one unblock carries to the agent: the queued
// comments with their anchors, line text and conversations, and the
// reviewer's message.
const MaxUnblockPrompt = 1 << 20

// TooLargeError is input over a stated limit.
type TooLargeError struct {
	What        string
	Size, Limit int
	WhatToDo    string
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is too large (%d bytes; limit %d): %s", e.What, e.Size, e.Limit, e.WhatToDo)
}

// ErrorKind is errkind.TooLarge.
func (e *TooLargeError) ErrorKind() errkind.Kind { return errkind.TooLarge }

// UnblockFits is the one rule of an unblock's size: its rendered prompt must
// be at most MaxUnblockPrompt bytes.
func UnblockFits(size int) error {
	if size <= MaxUnblockPrompt {
		return nil
	}
	return &TooLargeError{What: "this unblock (the queued comments and your message)", Size: size, Limit: MaxUnblockPrompt,
		WhatToDo: "shorten the message, or withdraw some queued comments and send them with a later unblock; nothing was sent"}
}

// MessageQueued is the one answer to a task message (`lazy comment`, the
// task page): it is queued, and goes with the next work turn that
// launches, as queued review comments do. next names that turn when one is
// queued ("" : none yet); started: the message queued it (the auto-react
// loop on a blocked task).
func MessageQueued(next string, started bool, status task.Status) string {
	const q = "queued: delivered with the next work turn"
	switch {
	case started:
		return q + " (" + next + ", queued now)"
	case next != "":
		return q + " (" + next + ", already queued)"
	case status == task.Running:
		return q + " (the running turn has already started: unblock the task once it is blocked, and its next turn carries it)"
	}
	return fmt.Sprintf("%s (the task is %s: unblock it, and its next turn carries it)", q, status)
}
