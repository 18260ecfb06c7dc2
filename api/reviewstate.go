package api

import "time"

// Owner is the reviewer every session of a dashboard is today: whoever
// holds the dashboard token (a browser's session cookie) or the auth token
// (the CLI, the dev server). Review state is kept per reviewer, so a
// dashboard with several people signed in apart keys it by who each is;
// until then every browser and the CLI share the owner's.
const Owner = "owner"

// ReviewStateArgs names a task and whose state ("": Owner).
type ReviewStateArgs struct {
	Task     string `json:"task"`
	Reviewer string `json:"reviewer,omitempty"`
}

// ViewedArgs marks a file viewed (or not) at the content of its diff the
// reviewer saw: Hash is the page's data-diff-hash of the file.
type ViewedArgs struct {
	Task     string `json:"task"`
	Reviewer string `json:"reviewer,omitempty"`
	File     string `json:"file"`
	Hash     string `json:"hash"`
	Viewed   bool   `json:"viewed"`
}

// ResolveArgs marks a thread resolved (or not).
type ResolveArgs struct {
	Task     string `json:"task"`
	Reviewer string `json:"reviewer,omitempty"`
	ThreadID string `json:"thread_id"`
	Resolved bool   `json:"resolved"`
}

// SeenArgs records the task branch head the reviewer has reviewed.
type SeenArgs struct {
	Task     string `json:"task"`
	Reviewer string `json:"reviewer,omitempty"`
	Head     string `json:"head"`
}

// ReviewState is a reviewer's state on a task: the files viewed (path →
// the hash of the file's diff when it was marked: a file whose diff has
// another hash now is not viewed), the threads resolved (thread id → its
// mark: a thread with more messages than Messages now is open again), the
// head last reviewed and the one before it. Notice says what a change did
// beyond itself (a resolved thread whose queued comment still goes to the
// agent).
type ReviewState struct {
	Task     string                  `json:"task"`
	Reviewer string                  `json:"reviewer"`
	Viewed   map[string]string       `json:"viewed"`
	Resolved map[string]ResolvedMark `json:"resolved"`
	Head     string                  `json:"head"`
	PrevHead string                  `json:"prev_head"`
	Notice   string                  `json:"notice,omitempty"`
}

// ResolvedMark is one resolved thread: how many messages it had, who
// resolved it and when, and how many of its comments are still queued for
// the next unblock (resolving keeps them queued, as a pending comment on
// GitHub or a draft on Gerrit is still sent: withdraw one to keep it back).
type ResolvedMark struct {
	Messages int       `json:"messages"`
	By       string    `json:"by"`
	At       time.Time `json:"at"`
	Queued   int       `json:"queued"`
}

// Since is the head "changes since your last review" runs from, for a page
// showing head: the head last reviewed when it is another, else the one
// before it ("": nothing to offer).
func (s *ReviewState) Since(head string) string {
	if s == nil || head == "" {
		return ""
	}
	if s.Head != "" && s.Head != head {
		return s.Head
	}
	if s.PrevHead != "" && s.PrevHead != head {
		return s.PrevHead
	}
	return ""
}
