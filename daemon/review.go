package daemon

import (
	"cmp"
	"context"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"lazy/actors"
	"lazy/api"
	"lazy/config"
	"lazy/gitx"
	"lazy/httpapi"
	"lazy/review"
	"lazy/store"
	"lazy/supervisor"
	"lazy/task"
	"lazy/views"
)

// Review is the daemon's review actions: queue, diff, threads, and every
// write, each a message to the task's actor.
type Review struct {
	svc   *Service
	deps  *actors.TaskDeps // the accept rules' inputs (protected paths, approvals)
	diffs diffCache
}

var _ httpapi.RawFiles = (*Review)(nil)

// maxRangeLines bounds a comment on a range of lines.
const maxRangeLines = 500

// maxCommentBody bounds a review comment's text.
const maxCommentBody = 64 << 10

// span is what a task's diff runs between. A live task's is its branch
// against where the branch left its parent (parent...branch). An ended
// task's is the pair of commits recorded as it ended (base..head): what an
// accept merged, or what a cancel left on the branch, which stays what it
// was when the parent moves on (after an accept, parent...branch is empty).
// A task that ended before the pair was kept is diffed as a live one.
func span(t *store.Task) gitx.DiffSpec {
	if t.Status.Ended() && t.EndBase != "" && t.EndHead != "" {
		return gitx.DiffSpec{From: t.EndBase, To: t.EndHead}
	}
	return gitx.DiffSpec{From: t.Parent, To: t.Branch, MergeBase: true}
}

// diff returns the task's diff against its parent. It is cached by the
// commits it runs between (resolved first: a commit made by hand on
// either branch, a turn, a sync all give another key), so a cached diff is
// never stale and no clock decides when it is.
func (r *Review) diff(ctx context.Context, t *store.Task) (*gitx.Diff, error) {
	r.svc.follow(ctx, t)
	sp, ok := r.resolved(ctx, t)
	if !ok {
		return gitx.DiffWith(ctx, r.svc.paths.Root, span(t)) // says what is wrong
	}
	k := diffKey{from: sp.From, to: sp.To, mergeBase: sp.MergeBase}
	// one git diff per key however many ask at once (the warm-up and the
	// reviewer's first page race when a turn ends)
	return r.diffs.once(k, func() (*gitx.Diff, error) { return gitx.DiffWith(ctx, r.svc.paths.Root, sp) })
}

// resolved is the task's span with both ends as commit ids.
func (r *Review) resolved(ctx context.Context, t *store.Task) (gitx.DiffSpec, bool) {
	sp := span(t)
	from, err := gitx.RevParse(ctx, r.svc.paths.Root, sp.From)
	if err != nil {
		return sp, false
	}
	to, err := gitx.RevParse(ctx, r.svc.paths.Root, sp.To)
	if err != nil {
		return sp, false
	}
	sp.From, sp.To = from, to
	return sp, true
}

// file is one changed file of the task's diff and its place in it. A file
// asked for before costs a lookup; otherwise it comes from the whole diff
// (cached by the same commits).
func (r *Review) file(ctx context.Context, t *store.Task, path string) (gitx.File, int, error) {
	r.svc.follow(ctx, t)
	sp, ok := r.resolved(ctx, t)
	k := diffKey{from: sp.From, to: sp.To, mergeBase: sp.MergeBase, path: path}
	if ok {
		if c, ok := r.diffs.get(k); ok {
			return c.file, c.index, nil
		}
	}
	d, err := r.diff(ctx, t)
	if err != nil {
		return gitx.File{}, 0, err
	}
	for i, f := range d.Files {
		if f.Path() == path {
			if ok {
				r.diffs.put(k, cachedDiff{file: f, index: i}, diffSize(d.Files[i:i+1]))
			}
			return f, i, nil
		}
	}
	return gitx.File{}, 0, usage("%q is not a changed file of this task: reload the page", path)
}

// Queue lists blocked tasks with their counts.
func (r *Review) Queue(ctx context.Context) ([]api.QueueItem, error) {
	all, err := r.svc.st.ListTasks(ctx)
	if err != nil {
		return nil, err
	}
	out := []api.QueueItem{}
	for i := range all {
		t := &all[i]
		if t.Status != task.Blocked {
			continue
		}
		cs, err := r.svc.st.ListReviewComments(ctx, t.ID)
		if err != nil {
			return nil, err
		}
		n := review.Count(cs)
		out = append(out, api.QueueItem{
			Task:   api.QueueTask{ID: t.ID, ShortID: task.ShortID(t.ID), Code: t.CodeString(), Title: t.Title},
			Status: string(t.Status), LiveSession: t.SessionID != "", Turns: t.Turns, Asks: t.Asks,
			AwaitingAnswer: n.AwaitingAnswer, PendingAsks: n.PendingAsks, QueuedComments: n.Queued,
			ModelError: r.svc.trouble.of(t.ID),
		})
	}
	return out, nil
}

// Diff is the task's anchored diff, with what the page shows beside it.
func (r *Review) Diff(ctx context.Context, ref string, o api.DiffOptions) (*api.DiffResult, error) {
	t, err := r.svc.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	res := &api.DiffResult{Task: r.svc.info(t)}
	var files []gitx.File
	if o.File != "" {
		f, i, err := r.file(ctx, t, o.File)
		if err != nil {
			return nil, err
		}
		files, res.FileIndex = []gitx.File{f}, i
		o = api.DiffOptions{SkipMerge: true, Full: o.Full, Context: o.Context}
	} else {
		d, err := r.diff(ctx, t)
		if err != nil {
			return nil, err
		}
		files = d.Files
	}
	if res.Network, err = network(ctx, r.svc.st, t.ID); err != nil {
		return nil, err
	}
	if !o.SkipMerge {
		res.Merge = r.readiness(ctx, t)
	}
	if o.Full != "" {
		if files, err = r.wholeFile(ctx, t, files, o.Full, o.Context); err != nil {
			return nil, err
		}
		res.Full = o.Full
	}
	if o.Since != "" {
		if res.Since, files, err = r.since(ctx, t, o.Since); err != nil {
			return nil, err
		}
	}
	res.Files = orEmpty(files)
	res.Sources = r.sources(ctx)
	if res.Commits, err = r.svc.commits(ctx, t); err != nil {
		return nil, err
	}
	turns, err := r.svc.st.ListTurns(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	for _, tu := range turns {
		if tu.Kind != store.TurnWork {
			continue
		}
		res.Turns = append(res.Turns, api.TurnRef{Number: tu.WorkNumber(), Status: tu.Status, StartedAt: tu.StartedAt, EndedAt: tu.EndedAt})
		if tu.Status == store.TurnDone && strings.TrimSpace(tu.Result) != "" {
			res.Summary = tu.Result
		}
	}
	return res, nil
}

// readiness is a dry run of accepting t now. It is made for tasks that can
// still be accepted; an ended task has none.
func (r *Review) readiness(ctx context.Context, t *store.Task) *api.MergeReadiness {
	if t.Status.Ended() {
		return nil
	}
	root := r.svc.paths.Root
	m := &api.MergeReadiness{}
	mc, err := gitx.DryMerge(ctx, root, t.Parent, t.Branch)
	if err != nil {
		m.Error = err.Error()
		return m
	}
	m.MergeCheck = mc
	changed, err := gitx.ChangedPaths(ctx, root, t.Parent, t.Branch)
	if err == nil && r.deps != nil {
		m.OutOfScope, m.Protected, err = actors.AcceptBlockers(ctx, r.deps, t, changed)
	}
	if err != nil {
		m.Error = err.Error()
	}
	return m
}

// Comments is the threads payload with the status bar.
func (r *Review) Comments(ctx context.Context, ref string) (*review.Payload, error) {
	t, err := r.svc.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	cs, err := r.svc.st.ListReviewComments(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	d, err := r.diff(ctx, t)
	if err != nil {
		return nil, err
	}
	inDiff := func(file string, side review.Side, line int) bool {
		_, ok := d.Find(file, string(side), line)
		return ok
	}
	ask := review.Askable(t.Status)
	bar := review.StatusBar{Status: string(t.Status), Turns: t.Turns, LastActivity: t.LastActivity, CanAnswer: ask.OK}
	if !ask.OK {
		bar.Why = ask.Reason
	}
	p := review.BuildPayload(cs, inDiff, bar)
	return &p, nil
}

// PostComment validates the anchor against the diff, captures the line's
// text, and hands the message to the task actor, which saves it first.
func (r *Review) PostComment(ctx context.Context, ref string, a api.PostCommentArgs) (*review.ReviewComment, error) {
	t, err := r.svc.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(a.Body) == "" {
		return nil, usage("the comment is empty: write what you want to ask or say")
	}
	if len(a.Body) > maxCommentBody {
		return nil, usage("the comment is %d bytes; keep it under %d", len(a.Body), maxCommentBody)
	}
	intent := review.Intent(a.Intent)
	if intent != review.Ask && intent != review.Comment {
		return nil, usage("intent must be \"ask\" or \"comment\", not %q", a.Intent)
	}
	c := review.ReviewComment{Intent: intent, Body: a.Body}
	if a.ThreadID != "" {
		cs, err := r.svc.st.ListReviewComments(ctx, t.ID)
		if err != nil {
			return nil, err
		}
		found := false
		for _, m := range cs {
			if m.ThreadID == a.ThreadID {
				c.ThreadID, c.File, c.Line, c.Side, c.LineText, c.StartLine = m.ThreadID, m.File, m.Line, m.Side, m.LineText, m.StartLine
				found = true
				break
			}
		}
		if !found {
			return nil, usage("thread %q is not on task %s", a.ThreadID, t.Ref())
		}
	} else {
		side := review.Side(a.Side)
		if side != review.Old && side != review.New {
			return nil, usage("side must be \"old\" or \"new\", not %q", a.Side)
		}
		if a.File == "" || a.Line < 1 {
			return nil, usage("a comment needs its anchor: file and a line number of at least 1")
		}
		d, err := r.diff(ctx, t)
		if err != nil {
			return nil, err
		}
		l, ok := d.Find(a.File, a.Side, a.Line)
		if !ok {
			return nil, usage("%s is not a line of the current diff of %s; reload the review page", review.AnchorLabel(a.File, a.Line, side), t.Ref())
		}
		c.File, c.Line, c.Side, c.LineText = a.File, a.Line, side, l.Text
		if a.StartLine != 0 && a.StartLine != a.Line {
			if a.StartLine < 1 || a.StartLine > a.Line || a.Line-a.StartLine > maxRangeLines {
				return nil, usage("start_line %d: a range starts at a line from 1 to %d (the comment's line), at most %d lines before it", a.StartLine, a.Line, maxRangeLines)
			}
			if _, ok := d.Find(a.File, a.Side, a.StartLine); !ok {
				return nil, usage("%s is not a line of the current diff of %s: a range starts and ends on lines of the diff", review.AnchorLabel(a.File, a.StartLine, side), t.Ref())
			}
			c.StartLine = a.StartLine
		}
	}
	// the comment's id is given here, once: the actor takes a post tried
	// again (a cluster call whose answer was lost) as the comment it stored
	c.ID = task.NewID(time.Now())
	return supervisor.Ask[*review.ReviewComment](r.svc.sup, t.ID, &actors.PostReviewComment{Comment: c})
}

func (r *Review) action(ctx context.Context, ref string, msg any) (*api.ActionResult, error) {
	t, err := r.svc.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	d, err := supervisor.Ask[*actors.ActionDone](r.svc.sup, t.ID, msg)
	if err != nil {
		return nil, err
	}
	return &api.ActionResult{Comment: d.Comment, Notice: d.Notice}, nil
}

// RetryAsk re-sends a failed question.
func (r *Review) RetryAsk(ctx context.Context, ref, id string) (*api.ActionResult, error) {
	return r.action(ctx, ref, &actors.RetryAsk{ID: id})
}

// Withdraw retracts an own message the agent has not seen.
func (r *Review) Withdraw(ctx context.Context, ref, id string) (*api.ActionResult, error) {
	return r.action(ctx, ref, &actors.WithdrawComment{ID: id})
}

// Unblock queues the work turn carrying every queued comment.
func (r *Review) Unblock(ctx context.Context, ref, feedback string) (*api.Turn, error) {
	return r.svc.Unblock(ctx, ref, feedback)
}

// Accept merges the task into its parent or returns the refusal with its remedy.
func (r *Review) Accept(ctx context.Context, ref string, a api.AcceptArgs) (*api.TaskInfo, error) {
	if strings.TrimSpace(a.Reason) == "" {
		return nil, usage("say why you accept (--reason TEXT): the reason is recorded with the merge; nothing was merged")
	}
	method := strings.TrimSpace(a.Method)
	if method == "" {
		method = gitx.MethodMerge
	}
	if !gitx.ValidMethod(method) {
		return nil, usage("merge method %q is not one of %s (merge is the default); nothing was merged", a.Method, strings.Join(gitx.Methods, ", "))
	}
	t, err := r.svc.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	done, err := supervisor.AskWithin[*actors.AcceptDone](r.svc.sup, t.ID, &actors.Accept{Reason: a.Reason, Passphrase: a.Passphrase, AllowOutOfScope: a.AllowOutOfScope, Head: strings.TrimSpace(a.Head), Method: method}, 5*time.Minute)
	if err != nil {
		return nil, err
	}
	info := Info(&done.Task)
	return &info, nil
}

// Sync merges the parent into the task branch; wait follows it to the end.
func (r *Review) Sync(ctx context.Context, ref string, wait bool) (*api.SyncResult, error) {
	t, err := r.svc.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	res, err := supervisor.AskWithin[actors.SyncReply](r.svc.sup, t.ID, &actors.Sync{Wait: wait}, 30*time.Minute)
	if err != nil {
		return nil, err
	}
	switch v := res.(type) {
	case *actors.SyncQueued:
		return &api.SyncResult{Queued: true}, nil
	case *actors.SyncDone:
		return syncResult(t, v), nil
	}
	return nil, fmt.Errorf("sync answered %T", res)
}

// syncResult says what a finished sync means for the reviewer: after
// conflicts, the agent resolves them when the task is unblocked.
func syncResult(t *store.Task, d *actors.SyncDone) *api.SyncResult {
	res := &api.SyncResult{Status: d.Status, Conflicts: d.Conflicts}
	if len(d.Conflicts) > 0 {
		res.Next = "unblock"
		res.Message = review.SyncConflicts(t.Ref(), d.Conflicts)
		return res
	}
	res.Next = "accept"
	res.Message = fmt.Sprintf("synced: %s has the latest commits of %s; review and accept it", t.Branch, t.Parent)
	return res
}

// ViolationDecision allows or reverts out-of-scope files.
func (r *Review) ViolationDecision(ctx context.Context, ref, decision string, files []string) error {
	t, err := r.svc.Resolve(ctx, ref)
	if err != nil {
		return err
	}
	_, err = supervisor.AskWithin[*actors.Done](r.svc.sup, t.ID, &actors.ViolationDecision{Decision: decision, Files: files}, 5*time.Minute)
	return err
}

// Approve records protected-path approvals after checking the passphrase.
func (r *Review) Approve(ctx context.Context, ref string, files []string, passphrase string) error {
	t, err := r.svc.Resolve(ctx, ref)
	if err != nil {
		return err
	}
	_, err = supervisor.Ask[*actors.Done](r.svc.sup, t.ID, &actors.Approve{Files: files, Passphrase: passphrase})
	return err
}

// wholeFile replaces the changed file path in files by its diff with lines
// of context (every line when lines is 0). path must be one of the changed
// files.
func (r *Review) wholeFile(ctx context.Context, t *store.Task, files []gitx.File, path string, lines int) ([]gitx.File, error) {
	if lines <= 0 || lines > wholeFileContext {
		lines = wholeFileContext
	}
	for i, f := range files {
		if f.Path() != path || f.IsBinary {
			continue
		}
		if f.TooLarge {
			return files, nil // its changes alone are past the limits: the whole file is too
		}
		paths := []string{path}
		if f.OldPath != "" && f.OldPath != path {
			paths = append(paths, f.OldPath)
		}
		sp := span(t)
		sp.Context, sp.Paths = lines, paths
		d, err := gitx.DiffWith(ctx, r.svc.paths.Root, sp)
		if err != nil {
			return nil, err
		}
		for _, g := range d.Files {
			if g.Path() == path {
				out := append([]gitx.File(nil), files...)
				out[i] = g
				return out, nil
			}
		}
		return files, nil // nothing changed after all
	}
	return nil, usage("%q is not a changed text file of this task: pick a file from the list", path)
}

// wholeFileContext is "every line" for git diff -U.
const wholeFileContext = 1 << 24

// since is the diff from commit since (one the reviewer saw) to the head
// of the task branch.
func (r *Review) since(ctx context.Context, t *store.Task, since string) (string, []gitx.File, error) {
	if len(since) < 4 || len(since) > 64 || strings.Trim(strings.ToLower(since), "0123456789abcdef") != "" {
		return "", nil, usage("since=%q is not a commit id: use 4 to 40 hex digits", since)
	}
	full, err := gitx.RevParse(ctx, r.svc.paths.Root, since+"^{commit}")
	if err != nil {
		return "", nil, usage("since=%s names no commit of this project: open the review page without it", since)
	}
	d, err := gitx.DiffWith(ctx, r.svc.paths.Root, gitx.DiffSpec{From: full, To: span(t).To})
	if err != nil {
		return "", nil, err
	}
	return full, d.Files, nil
}

// sourcesBytes bounds the bytes one read of a page's sources returns (the
// blobs of the files the page highlights; each at most views.MaxWholeBytes).
const sourcesBytes = 16 << 20

// sources reads blobs of the project's repository for a page's highlighting:
// one git cat-file run for all the blobs the page has not lexed yet. A read
// that fails leaves them out (the page lexes hunk by hunk).
func (r *Review) sources(ctx context.Context) func([]string) map[string][]byte {
	root := r.svc.paths.Root
	return func(ids []string) map[string][]byte {
		out, err := gitx.ReadBlobs(ctx, root, ids, views.MaxWholeBytes, sourcesBytes)
		if err != nil {
			return nil
		}
		return out
	}
}

// warmReviews lexes each task's diff for the review page as soon as the
// task is blocked, in the background: the reviewer's first load then finds
// the highlighting done (a cold render of 5,000 lines lexes for ~200 ms on
// two cores; a warm one takes ~30 ms). It runs until ctx ends.
func (r *Review) warmReviews(ctx context.Context, events <-chan api.Event) {
	eachEvent(ctx, events, func(e api.Event) {
		if e.Kind != api.EventStatus || e.Status != string(task.Blocked) || e.TaskID == "" {
			return
		}
		r.warm(ctx, e.TaskID)
	})
}

// warm lexes one task's diff (within gitx's limits: a file too large to
// show is not lexed).
func (r *Review) warm(ctx context.Context, ref string) {
	d, err := r.Diff(ctx, ref, api.DiffOptions{SkipMerge: true})
	if err != nil {
		return // the page will say what is wrong when it is opened
	}
	v, _ := views.BuildDiff(d.Files, nil, d.Task.ID, "", false, "")
	v.Sources = d.Sources
	views.HighlightFiles(&v, nil)
}

// RawFile streams a changed file's own bytes: side "new" (or "") as the
// task branch holds it, "old" as it was where the branch left its parent.
// It is how the page shows a file too large to show.
func (r *Review) RawFile(ctx context.Context, ref, path, side string) (*api.RawFile, error) {
	if side != "" && side != "old" && side != "new" {
		return nil, usage("side must be \"old\" or \"new\", not %q", side)
	}
	t, err := r.svc.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	d, err := r.diff(ctx, t)
	if err != nil {
		return nil, err
	}
	for _, f := range d.Files {
		if f.Path() != path && f.OldPath != path {
			continue
		}
		root := r.svc.paths.Root
		sp := span(t)
		rev, name := sp.To, f.NewPath
		if side == "old" {
			if f.IsNew {
				return nil, usage("%s is new on this task: it has no old side; ask for side=new", path)
			}
			rev = sp.From
			if sp.MergeBase {
				if rev, err = gitx.Run(ctx, root, "merge-base", t.Parent, t.Branch); err != nil {
					return nil, fmt.Errorf("raw file %s: %w", path, err)
				}
			}
			name = f.OldPath
		} else if f.IsDelete {
			return nil, usage("%s is deleted on this task: ask for side=old", path)
		}
		b, err := gitx.OpenBlob(ctx, root, rev, name)
		if err != nil {
			return nil, err
		}
		return &api.RawFile{Path: name, Size: b.Size, Binary: f.IsBinary, Body: b}, nil
	}
	return nil, usage("%q is not a changed file of this task: pick a file from the list", path)
}

// eachEvent calls fn with each event until ctx ends or events closes.
func eachEvent(ctx context.Context, events <-chan api.Event, fn func(api.Event)) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-events:
			if !ok {
				return
			}
			fn(e)
		}
	}
}

// ApplySuggestion commits a reviewer's suggested change to the task
// branch as the reviewer, through the task actor (refused while a turn
// runs), pinned to the head the reviewer saw (CONTRACT §14).
func (r *Review) ApplySuggestion(ctx context.Context, a api.ApplySuggestionArgs) (*api.ActionResult, error) {
	if strings.TrimSpace(a.ID) == "" {
		return nil, usage("name the comment whose suggestion to apply (id)")
	}
	if strings.TrimSpace(a.Head) == "" {
		return nil, usage("say which branch head you reviewed (head): a suggestion is applied only to the head you saw")
	}
	t, err := r.svc.Resolve(ctx, a.Task)
	if err != nil {
		return nil, err
	}
	name, email, err := r.reviewer(ctx)
	if err != nil {
		return nil, err
	}
	done, err := supervisor.Ask[*actors.SuggestionApplied](r.svc.sup, t.ID, &actors.ApplySuggestion{ID: a.ID, Head: a.Head, AuthorName: name, AuthorEmail: email})
	if err != nil {
		return nil, err
	}
	return &api.ActionResult{Comment: done.Comment, Notice: done.Notice, Commit: done.Commit}, nil
}

// reviewer is who an applied suggestion is by: review.author, else the
// project's git user.name and user.email.
func (r *Review) reviewer(ctx context.Context) (name, email string, err error) {
	if a := strings.TrimSpace(r.svc.live.Get().Review.Author); a != "" {
		addr, err := mail.ParseAddress(a)
		if err != nil {
			return "", "", usage("review.author %q is not \"Name <email>\" (%v): fix it in %s", a, err, config.FileName)
		}
		return cmp.Or(addr.Name, addr.Address), addr.Address, nil
	}
	name, _ = gitx.Run(ctx, r.svc.paths.Root, "config", "user.name")
	email, _ = gitx.Run(ctx, r.svc.paths.Root, "config", "user.email")
	if name == "" || email == "" {
		return "", "", usage("no reviewer identity to author the commit: set review.author = \"Name <email>\" in %s (or git's user.name and user.email in the project)", config.FileName)
	}
	return name, email, nil
}
