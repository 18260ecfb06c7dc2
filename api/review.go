package api

import (
	"time"

	"lazy/review"
)

// QueueTask is the task part of a queue item.
type QueueTask struct {
	ID      string `json:"id"`
	ShortID string `json:"short_id"`
	Code    string `json:"code"`
	Title   string `json:"title"`
}

// QueueItem is one entry of the review queue (CONTRACT §7).
type QueueItem struct {
	Task           QueueTask `json:"task"`
	Status         string    `json:"status"`
	LiveSession    bool      `json:"live_session"`
	AwaitingAnswer int       `json:"awaiting_answer"`
	PendingAsks    int       `json:"pending_asks"`
	QueuedComments int       `json:"queued_comments"`
	// Turns is the task's work turns begun, Asks its ask turns (as
	// TaskInfo counts them)
	Turns int `json:"turns"`
	Asks  int `json:"asks"`
	// ModelError is what is failing in the task's model calls right now
	ModelError string `json:"model_error,omitempty"`
}

// PostCommentArgs is the comment POST body (CONTRACT §7).
type PostCommentArgs struct {
	Body   string `json:"body"`
	File   string `json:"file"`
	Line   int    `json:"line"`
	Side   string `json:"side"`
	Intent string `json:"intent"`
	// StartLine makes the comment one on lines StartLine to Line
	StartLine int    `json:"start_line,omitempty"`
	ThreadID  string `json:"thread_id,omitempty"`
}

// DiffResult is a task's anchored diff against its parent.
type DiffResult struct {
	Task  TaskInfo `json:"task"`
	Files []File   `json:"files"`
	// Merge is a dry run of accepting now; Commits are the branch's commits
	// the parent lacks, newest first; Summary is the agent's last word;
	// Turns are the task's work turns (for "delivered with turn N").
	Merge   *MergeReadiness `json:"merge,omitempty"`
	Commits []CommitInfo    `json:"commits"`
	Summary string          `json:"summary,omitempty"`
	Turns   []TurnRef       `json:"turns,omitempty"`
	// Since is the full commit id the diff starts from when the options
	// asked for one; Full is the file shown whole
	Since string `json:"since,omitempty"`
	Full  string `json:"full,omitempty"`
	// FileIndex is the place of DiffOptions.File in the whole diff
	FileIndex int `json:"file_index,omitempty"`
	// Network is the task's egress (CONTRACT §15); nil where the daemon
	// keeps none
	Network *Network `json:"network,omitempty"`
	// Sources reads the files' whole texts by the blob ids Files name
	// (each within a size bound; an id it cannot read is left out), for
	// highlighting whole files. Only an in-process caller gets it: it
	// never travels as JSON, and a remote page highlights hunk by hunk.
	Sources func(ids []string) map[string][]byte `json:"-"`
}

// Network is a task's egress through the proxy: each destination with its
// connections and bytes, and every refusal (the newest MaxNetRefusals;
// RefusalsOmitted counts the older ones left out).
type Network struct {
	Destinations    []NetDest    `json:"destinations"`
	Refusals        []NetRefusal `json:"refusals"`
	RefusalsOmitted int          `json:"refusals_omitted,omitempty"`
}

// MaxNetRefusals bounds the refusals a Network lists.
const MaxNetRefusals = 500

// NetDest is one destination a task reached (host:port): its connections
// (tunnels and plain requests) that were let through, how many of those
// failed (no answer, an error status from the proxy), and the bytes each way.
type NetDest struct {
	Dest        string    `json:"dest"`
	Connections int       `json:"connections"`
	Failed      int       `json:"failed,omitempty"`
	BytesUp     int64     `json:"bytes_up"`
	BytesDown   int64     `json:"bytes_down"`
	Last        time.Time `json:"last"`
}

// NetRefusal is one egress connection the proxy refused, with its cause
// (egress_not_allowed, egress_private_address, …).
type NetRefusal struct {
	At     time.Time `json:"at"`
	Method string    `json:"method"`
	Dest   string    `json:"dest"`
	Path   string    `json:"path"`
	Cause  string    `json:"cause"`
}

// DiffOptions change what Diff shows: Since is a commit the reviewer saw,
// and the diff runs from it to the branch head (not from the parent); Full
// is a changed file shown whole (every line as context).
type DiffOptions struct {
	Since string `json:"since,omitempty"`
	Full  string `json:"full,omitempty"`
	// Context is the lines of context around Full's changes (0: the whole
	// file)
	Context int `json:"context,omitempty"`
	// SkipMerge leaves the merge dry run out (three git runs) for callers
	// that want the rows alone (a file loaded into the page, the warm-up)
	SkipMerge bool `json:"skip_merge,omitempty"`
	// File asks for one changed file alone (a file the page sent without
	// its rows): Files holds it, FileIndex says where it sits in the whole
	// diff; no merge dry run. It costs that file, from a cache keyed by the
	// commits the diff runs between, never the whole diff made again.
	File string `json:"file,omitempty"`
}

// MergeReadiness is what an accept would meet now: the dry-run merge of the
// task branch into its parent and the files its rules would stop on.
type MergeReadiness struct {
	MergeCheck
	Protected  []string `json:"protected,omitempty"`    // changed, protected, not yet approved
	OutOfScope []string `json:"out_of_scope,omitempty"` // changed outside the task's scope
	// Error says why the dry run could not be made (the page says so
	// rather than claiming clean or conflict)
	Error string `json:"error,omitempty"`
}

// TurnRef is one work turn, as the review page links it.
type TurnRef struct {
	Number    int        `json:"number"` // its work turn number ("work turn 3")
	Status    string     `json:"status"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
}

// ActionResult is the reply of retry, withdraw and apply suggestion
// (Commit: the commit an applied suggestion made).
type ActionResult struct {
	Comment review.ReviewComment `json:"comment"`
	Notice  string               `json:"notice"`
	Commit  string               `json:"commit,omitempty"`
}

// AcceptArgs are the accept form's fields.
type AcceptArgs struct {
	Reason          string `json:"reason"`
	Passphrase      string `json:"passphrase,omitempty"`
	AllowOutOfScope bool   `json:"allow_out_of_scope,omitempty"`
	// Head is the task branch head the reviewer saw (CONTRACT §14): the
	// page and the CLI always send it; another head is refused, head_moved.
	Head string `json:"head,omitempty"`
	// Method is how the task goes into its parent: merge (the default:
	// a fast-forward, or one merge commit when the parent moved on), squash
	// (one commit) or rebase (the task's commits replayed: a line)
	Method string `json:"method,omitempty"`
}

// SyncResult is what a sync did (or that it was queued). A sync that hit
// conflicts has Status "conflict", the files, and Message and Next saying
// what to do: unblock the task, and the agent resolves them.
type SyncResult struct {
	Queued    bool     `json:"queued"`
	Status    string   `json:"status,omitempty"`
	Conflicts []string `json:"conflicts,omitempty"`
	Message   string   `json:"message,omitempty"`
	// Next is the next step: "unblock" after conflicts, "accept" after a
	// clean sync
	Next string `json:"next,omitempty"`
}
