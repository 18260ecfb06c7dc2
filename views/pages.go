package views

import (
	"html/template"
	"time"

	"lazy/api"
)

// TaskRow is one line of the task list.
type TaskRow struct {
	ID, ShortID, Ref, Title, Status, Branch string
	Turns                                   int
	// Counts is the turns line with each count named: "3 (asks 2,
	// setup 1)"; Agent the agent of its conversation
	Counts, Agent string
	LastActivity  time.Time
	FailReason    string
	Tripwire      string
	ModelError    string
	// Push is a push of the task branch to the cluster's git remote that
	// waits, in words ("" when none)
	Push string
	// Usage is what its model calls cost, in words ("" before the first)
	Usage string
}

// TasksPage is the task list at /: the tasks the filter shows (those that
// need the reviewer first), the filter's tabs, and the new task form.
type TasksPage struct {
	Page
	Tasks   []TaskRow
	Filters []FilterTab
	// Shown says in words what the filter shows ("needs you", "ended", ...)
	Shown string
	// Hidden is how many ended tasks the default view leaves out
	Hidden int
	// Narrowed marks a filter no tab names (?status=blocked): the page says
	// it shows only those, so a short list is not read as every task
	Narrowed bool
	// Draft is what a refused new task form held
	Draft NewTaskDraft
	// NeedsYou is how many tasks wait for the reviewer (blocked,
	// conflict, failed, tripped), counted in the title
	NeedsYou int
}

// FilterTab is one status filter of the Tasks page.
type FilterTab struct {
	Label, Href string
	Count       int
	Current     bool
}

// NewTaskDraft is the new task form's fields, kept when it is refused.
type NewTaskDraft struct {
	Prompt, Code, Parent string
	// Open: the form is shown open (no task yet, or a refused draft)
	Open bool
}

// TurnRow is one turn on the task page.
type TurnRow struct {
	Number                        int
	Label, Anchor, Agent, Notice  string // "work turn 3", "turn-3" ("ask-2" for an ask)
	Kind, Trigger, Status, Prompt string
	// Result is the turn's answer as text; Output the client's own output
	// (its JSON result, notices), shown only behind a disclosure
	Result, Error, Output         string
	StartedAt, EndedAt            *time.Time
	IsFailed, IsRunning, IsQueued bool
	// Transcript is what the model said in the turn (the running turn's so
	// far, which task.js extends from the task's transcript events); nil:
	// none kept
	Transcript *TranscriptView
}

// TranscriptView is a turn's transcript on the task page.
type TranscriptView struct {
	Turn   int
	Open   bool // the running turn's is shown open
	Seq    int  // the last part it holds (task.js skips the parts it has)
	Tokens int64
	Files  []string
	// Written is what the agent client reported it wrote (relative to the
	// worktree; only with a client that reports its turn)
	Written   []string
	Calls     []TranscriptCallView
	Truncated bool
}

// TranscriptCallView is one model call of a turn.
type TranscriptCallView struct {
	Number  int
	Text    string
	Tools   []ToolView
	Results []ToolResultView
}

// ToolResultView is what a tool returned, as the agent client reported it.
type ToolResultView struct {
	Tool, Content string
	IsError       bool
}

// ToolView is a tool call the model made.
type ToolView struct{ Name, Input, File string }

// CommentRow is one task message; State says where it is ("queued",
// "delivered with work turn 3", "withdrawn"; "" for one from before
// messages were queued).
type CommentRow struct {
	Body      string
	State     string
	CreatedAt time.Time
}

// TaskPage is /tasks/:id.
type TaskPage struct {
	Page
	Task     TaskRow
	Parent   string
	Turns    []TurnRow
	Comments []CommentRow
	Commits  []CommitRow
	// Now is what the task is doing, in words ("work turn 3 running")
	Now string
	// Live: the task has not ended, so the page offers its forms and
	// follows its events
	Live bool
	// DraftMessage is what a refused message form held
	DraftMessage string
}

// QueueRow is one task awaiting review.
type QueueRow struct {
	ID, Ref, Title, Status                  string
	LiveSession                             bool
	AwaitingAnswer, PendingAsks, QueuedComm int
}

// QueuePage is /review.
type QueuePage struct {
	Page
	Items []QueueRow
	// Attention are failed and conflicted tasks: not in the queue (it lists
	// blocked tasks), but the reviewer must hear of them
	Attention []AttentionRow
}

// AttentionRow is a task that needs the reviewer: its cause and next step.
type AttentionRow struct {
	ID, Ref, Title, Status, Cause, Next string
}

// QueuedView is one queued comment, listed in full.
type QueuedView struct {
	ID, Body, File, Side, FragID string
	Line                         int
}

// StatusBar is the sticky footer.
type StatusBar struct {
	Status               string
	Turns                int
	LastActivity         time.Time
	Queued, AsksInFlight int
	CanAnswer            bool
	Why                  string
}

// RefusalView is a refused accept: the daemon's message and, when mapped, the remedy.
type RefusalView struct {
	Message, Next, Command string
	Files                  []string
	// Commits are what was committed since the head the reviewer saw
	Commits                                   []string
	HasRemedy                                 bool
	IsPassphrase, IsSync, IsReview, IsUnblock bool
}

// ReviewPage is /review/:task.
type ReviewPage struct {
	Page
	TaskID, Ref, Title, Status, Branch, Parent string
	// Agent is the agent that works the task ("claude-code", "codex", ...)
	Agent                      string
	Toolbar                    []ToolbarMode
	Diff                       DiffView
	DiffHTML                   template.HTML
	Orphans                    []ThreadView
	Queued                     []QueuedView
	Bar                        StatusBar
	AskWarning                 string
	Refusal                    *RefusalView
	DraftReason, DraftFeedback string
	// AcceptHead is the head a passphrase form accepts: the one the
	// reviewer's accept named (Head when none was posted); AcceptMethod
	// the merge method it named ("": merge)
	AcceptHead, AcceptMethod string
	// Summary is the agent's last word; Commits the branch's commits the
	// parent lacks; Merge the dry run of accepting now (nil: none made)
	Summary string
	Commits []CommitRow
	Merge   *MergeView
	// Head is the branch head the page shows (the script remembers it for
	// "changes since your last review"); Since is the commit the diff starts
	// from when it shows only those changes
	Head, Since, SinceShort string
	// Usage is what the task's model calls cost, in words
	Usage string
	// Network is the task's egress (nil: none kept)
	Network *NetworkView
	// Ended, when set, makes the page the ended task's record: what it
	// merged or left, its commits and threads, and no action at all
	Ended *EndedView
	// ReviewState is the reviewer's state on the task as the server keeps
	// it (the page is rendered with it), ReviewStateJSON the same as JSON
	// for review.js, which caches it and posts changes (data-rv-state: no
	// script element); LastReviewed the head "changes since your last
	// review" runs from ("": none)
	ReviewState             *api.ReviewState
	ReviewStateJSON         string
	LastReviewed, LastShort string
}

// NetworkView is the review page's network section: every destination the
// task's sandbox reached through the proxy, and every connection refused.
type NetworkView struct {
	Destinations []NetDestView
	Refusals     []NetRefusalView
	Omitted      int // older refusals left out
}

// NetDestView is one destination with its connections and bytes, in words.
type NetDestView struct {
	Dest               string
	Connections        int
	Failed             int
	BytesUp, BytesDown string
}

// NetRefusalView is one refused connection.
type NetRefusalView struct {
	At                  time.Time
	Method, Path, Cause string
}

// Empty reports a task that opened no connection.
func (n *NetworkView) Empty() bool { return len(n.Destinations) == 0 && len(n.Refusals) == 0 }

// EndedView is how an accepted or cancelled task ended, as its review page
// says it. Base..Head is what its diff shows: what went into Parent, or what
// was left on Branch against Parent as it was.
type EndedView struct {
	Accepted        bool // else cancelled
	Parent, Branch  string
	Base, BaseShort string
	Head, HeadShort string
	At              *time.Time
	// Unrecorded: the task ended before lazy kept its commits, so the diff
	// shown is the branch against its parent as they are now
	Unrecorded bool
}

// MergeView is the merge-readiness panel: what an accept would meet now.
type MergeView struct {
	State         string // clean | conflict | "" (the dry run failed)
	Parent        string
	Conflicts     []string
	Ahead, Behind int
	Protected     []string
	OutOfScope    []string
	Error         string
	// Next is the step that moves the task on: NextUnblock (a sync left it
	// in conflict: the agent resolves it), NextSync (it would not merge
	// cleanly), NextAccept (it would)
	Next string
}

// Next steps of the merge panel.
const (
	NextUnblock = "unblock"
	NextSync    = "sync"
	NextAccept  = "accept"
)

// IsUnblock, IsSync and IsAccept name the next step for the template.
func (m *MergeView) IsUnblock() bool { return m.Next == NextUnblock }

// IsSync reports a task that would not merge cleanly: sync first.
func (m *MergeView) IsSync() bool { return m.Next == NextSync }

// IsAccept reports a task that merges cleanly.
func (m *MergeView) IsAccept() bool { return m.Next == NextAccept }

// MergeMethods are the accept form's choices, the default first.
var MergeMethods = []MergeMethod{
	{"merge", "Merge", "a fast-forward, or one merge commit when the parent moved on"},
	{"squash", "Squash", "one commit on the parent: the task's title and your reason"},
	{"rebase", "Rebase", "the task's commits replayed onto the parent: a linear history"},
}

// MergeMethod is one choice of the accept form.
type MergeMethod struct{ Value, Label, Says string }

// CommitPage is /commits/:sha.
type CommitPage struct {
	Page
	SHA, Subject, Author string
	Toolbar              []ToolbarMode
	Diff                 DiffView
	DiffHTML             template.HTML
}

// CommitRow is one commit on the task and review pages.
type CommitRow struct {
	SHA, Short, Subject, Author string
	Time                        time.Time
	// Turn is the work turn that made it (0: none found)
	Turn int
}

// EmptyText is what an ended task's diff says when it shows no change.
func (e *EndedView) EmptyText() string {
	switch {
	case e.Accepted && e.Unrecorded:
		return "This task was accepted before lazy kept the commits it merged: they are in the history of " + e.Parent + ", and its branch no longer differs from it."
	case e.Accepted:
		return "What went in changed no file."
	}
	return "Nothing was left on the branch: it changed no file against its parent."
}

// MethodChoice is one merge method as the accept form offers it.
type MethodChoice struct {
	MergeMethod
	Selected bool
}

// Methods are the accept form's merge methods, the reviewer's last choice
// (else merge) selected.
func (p ReviewPage) Methods() []MethodChoice {
	out := make([]MethodChoice, len(MergeMethods))
	for i, m := range MergeMethods {
		out[i] = MethodChoice{MergeMethod: m, Selected: m.Value == p.AcceptMethod || (i == 0 && p.AcceptMethod == "")}
	}
	return out
}

// ErrorPage is what a browser gets when a request fails: what went wrong,
// what to do, a link back, and (on a form) what was typed, in Page.Kept.
type ErrorPage struct {
	Page
	Status           int
	Heading, Message string
	// Fix is the sentence that says what to do next ("" when Message does)
	Fix             string
	Back, BackLabel string
}
