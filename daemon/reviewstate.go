package daemon

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"lazy/api"
	"lazy/gitx"
	"lazy/review"
	"lazy/store"
)

// The reviewer's own state on a task: files viewed, threads resolved, the
// head last reviewed (store/reviewstate.go). It is the reviewer's, not the
// task's: nothing the agent sees or the actor decides depends on it, so it
// is written to the store directly, not through the task actor (which
// would only pass it on) — on an ended task too, whose record a reviewer
// may still read through.

// maxMarkKey bounds a path or thread id a mark names.
const maxMarkKey = 4096

// diffHash is the form of a file's diff hash (views' FileView.Hash).
var diffHash = regexp.MustCompile(`^[0-9a-z]{1,64}$`)

func reviewerOf(r string) string {
	if r == "" {
		return api.Owner
	}
	return r
}

// State is a reviewer's state on a task.
func (r *Review) State(ctx context.Context, a api.ReviewStateArgs) (*api.ReviewState, error) {
	t, err := r.svc.Resolve(ctx, a.Task)
	if err != nil {
		return nil, err
	}
	return r.state(ctx, reviewerOf(a.Reviewer), t, "")
}

func (r *Review) state(ctx context.Context, reviewer string, t *store.Task, notice string) (*api.ReviewState, error) {
	st, err := r.svc.st.ReviewState(ctx, reviewer, t.ID)
	if err != nil {
		return nil, err
	}
	out := &api.ReviewState{Task: t.ID, Reviewer: reviewer, Viewed: map[string]string{}, Resolved: map[string]api.ResolvedMark{}, Notice: notice}
	for _, v := range st.Viewed {
		out.Viewed[v.Path] = v.DiffHash
	}
	if len(st.Resolved) > 0 {
		cs, err := r.svc.st.ListReviewComments(ctx, t.ID)
		if err != nil {
			return nil, err
		}
		for _, rt := range st.Resolved {
			out.Resolved[rt.ThreadID] = api.ResolvedMark{Messages: rt.Messages, By: rt.Reviewer, At: rt.At, Queued: queuedIn(cs, rt.ThreadID)}
		}
	}
	if st.Head != nil {
		out.Head, out.PrevHead = st.Head.Head, st.Head.Prev
	}
	return out, nil
}

// queuedIn counts a thread's comments waiting for the next unblock.
func queuedIn(cs []review.ReviewComment, thread string) int {
	n := 0
	for i := range cs {
		if cs[i].ThreadID == thread && cs[i].IsQueued() {
			n++
		}
	}
	return n
}

// MarkViewed marks a file viewed at the content of its diff the reviewer
// saw, or not viewed.
func (r *Review) MarkViewed(ctx context.Context, a api.ViewedArgs) (*api.ReviewState, error) {
	if a.File == "" || len(a.File) > maxMarkKey {
		return nil, usage("name the file to mark (file: its path in the diff)")
	}
	if a.Viewed && !diffHash.MatchString(a.Hash) {
		return nil, usage("hash must be the file's diff hash as the page shows it (data-diff-hash), not %q: reload the page", a.Hash)
	}
	t, err := r.svc.Resolve(ctx, a.Task)
	if err != nil {
		return nil, err
	}
	if a.Viewed {
		// a mark is for a file of the diff the reviewer sees (one taken off
		// may name a file the diff no longer has)
		if _, _, err := r.file(ctx, t, a.File); err != nil {
			return nil, err
		}
	}
	who := reviewerOf(a.Reviewer)
	if err := r.svc.st.SetViewed(ctx, store.ViewedFile{Reviewer: who, TaskID: t.ID, Path: a.File, DiffHash: a.Hash, At: time.Now()}, a.Viewed); err != nil {
		return nil, err
	}
	return r.state(ctx, who, t, "")
}

// Resolve marks a thread resolved, with the number of messages it has now
// (a later message opens it again), or not. A comment of the thread still
// queued stays queued: it goes to the agent with the next unblock, as a
// pending comment does on GitHub and a draft on Gerrit when their thread
// is resolved; the answer's notice says so, and the page shows it on the
// thread with its Withdraw.
func (r *Review) Resolve(ctx context.Context, a api.ResolveArgs) (*api.ReviewState, error) {
	if a.ThreadID == "" || len(a.ThreadID) > maxMarkKey {
		return nil, usage("name the thread to resolve (thread_id)")
	}
	t, err := r.svc.Resolve(ctx, a.Task)
	if err != nil {
		return nil, err
	}
	cs, err := r.svc.st.ListReviewComments(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	n := 0
	for i := range cs {
		if cs[i].ThreadID == a.ThreadID && !cs[i].IsTaskMessage() {
			n++
		}
	}
	if n == 0 {
		return nil, usage("thread %q is not on task %s: reload the review page", a.ThreadID, t.Ref())
	}
	who := reviewerOf(a.Reviewer)
	if err := r.svc.st.SetResolved(ctx, store.ResolvedThread{TaskID: t.ID, ThreadID: a.ThreadID, Reviewer: who, Messages: n, At: time.Now()}, a.Resolved); err != nil {
		return nil, err
	}
	notice := "Thread unresolved."
	if a.Resolved {
		notice = "Thread resolved."
		if q := queuedIn(cs, a.ThreadID); q > 0 {
			notice = review.ResolvedWithQueued(q)
		}
	}
	return r.state(ctx, who, t, notice)
}

// Seen records the head the reviewer reviewed (the page's head, sent when
// it has loaded): "changes since your last review" runs from the one
// before it.
func (r *Review) Seen(ctx context.Context, a api.SeenArgs) (*api.ReviewState, error) {
	if err := review.CheckHead(a.Head); err != nil {
		return nil, usage("head must be a commit id (the page's head), not %q", a.Head)
	}
	t, err := r.svc.Resolve(ctx, a.Task)
	if err != nil {
		return nil, err
	}
	if _, err := gitx.RevParse(ctx, r.svc.paths.Root, a.Head+"^{commit}"); err != nil {
		// a head no page showed would make "changes since your last
		// review" a link to nothing
		return nil, usage("head %s is no commit of this project: send the head the review page shows (reload it)", a.Head)
	}
	who := reviewerOf(a.Reviewer)
	if _, err := r.svc.st.SeeHead(ctx, who, t.ID, a.Head, time.Now()); err != nil {
		return nil, fmt.Errorf("record the head reviewed: %w", err)
	}
	return r.state(ctx, who, t, "")
}
