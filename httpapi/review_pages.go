package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lazy/api"
	"lazy/review"
	"lazy/task"
	"lazy/views"
)

// route is one route of the review surface.
type route struct {
	method, path string
	fn           echo.HandlerFunc
}

// reviewRoutes registers the routes of spec §4.2. Until review actions are
// injected every one of them answers 503.
func (h *handler) reviewRoutes(e *echo.Echo) {
	routes := []route{
		{http.MethodGet, "/review", h.queuePage},
		{http.MethodGet, "/review/:task", h.reviewPage},
		{http.MethodPost, "/review/:task/comment", h.postComment},
		{http.MethodPost, "/review/:task/comment/:id/retry", h.retry},
		{http.MethodPost, "/review/:task/comment/:id/withdraw", h.withdraw},
		{http.MethodPost, "/review/:task/comment/:id/apply", h.applySuggestion},
		{http.MethodPost, "/review/:task/unblock", h.unblock},
		{http.MethodPost, "/review/:task/accept", h.accept},
		{http.MethodPost, "/review/:task/sync", h.sync},
		{http.MethodGet, "/api/review/queue", h.apiQueue},
		{http.MethodGet, "/api/review/:task/threads", h.apiThreads},
		{http.MethodGet, "/api/review/:task/diff", h.apiDiff},
		{http.MethodGet, "/review/:task/file", h.fileFragment},
		{http.MethodGet, "/review/:task/raw", h.rawFile},
		{http.MethodGet, "/review/:task/threads", h.threadsFragment},
		{http.MethodGet, "/api/review/:task/search", h.apiSearch},
	}
	routes = append(routes, h.reviewStateRoutes()...)
	for _, r := range routes {
		fn := r.fn
		if h.d.Call == nil {
			fn = func(echo.Context) error {
				return echo.NewHTTPError(http.StatusServiceUnavailable, "the review surface is not available in this process: no review actions are wired in")
			}
		}
		e.Add(r.method, r.path, fn)
	}
	e.GET("/commits/:sha", h.commitPage)
}

func (h *handler) queuePage(c echo.Context) error {
	items, err := api.Do(c.Request().Context(), h.d.Call, api.CmdReviewQueue, api.None{})
	if err != nil {
		return err
	}
	p := views.QueuePage{Page: h.page(c)}
	p.Title = "Review queue"
	fl := h.flash(c)
	p.Notice, p.Alert = fl.Notice, fl.Alert
	for _, it := range items {
		ref := it.Task.Code
		if ref == "" {
			ref = it.Task.ShortID
		}
		p.Items = append(p.Items, views.QueueRow{ID: it.Task.ID, Ref: ref, Title: it.Task.Title, Status: it.Status, LiveSession: it.LiveSession,
			AwaitingAnswer: it.AwaitingAnswer, PendingAsks: it.PendingAsks, QueuedComm: it.QueuedComments})
	}
	if h.d.Call != nil {
		ts, err := api.Do(c.Request().Context(), h.d.Call, api.CmdTaskList, api.None{})
		if err != nil {
			return err
		}
		for _, t := range ts {
			if row, ok := attention(t); ok {
				p.Attention = append(p.Attention, row)
			}
		}
	}
	return h.render(c, http.StatusOK, "queue", p)
}

func (h *handler) reviewPage(c echo.Context) error {
	return h.renderReview(c, h.flash(c))
}

// renderReview renders /review/:task with whatever a POST left to say (its
// flash: the notice, a refused accept, the text typed into its forms).
func (h *handler) renderReview(c echo.Context, fl Flash) error {
	ctx := c.Request().Context()
	ref := c.Param("task")
	opts, err := diffOptions(c)
	if err != nil {
		return err
	}
	d, err := api.Do(ctx, h.d.Call, api.CmdReviewDiff, api.ReviewDiffArgs{Task: ref, DiffOptions: opts})
	if err != nil {
		return err
	}
	pl, err := api.Do(ctx, h.d.Call, api.CmdReviewComments, api.TaskRef{Task: d.Task.ID})
	if err != nil {
		return err
	}
	t := d.Task
	p := views.ReviewPage{Page: h.page(c), TaskID: t.ID, Ref: t.Ref, Title: t.Title, Status: t.Status, Branch: t.Branch, Parent: t.Parent, Agent: t.Agent,
		Toolbar: views.Toolbar, DraftReason: firstOf(fl.Field("reason"), fl.Field("draft_reason")), DraftFeedback: firstOf(fl.Field("feedback"), fl.Field("draft_feedback"))}
	p.Page.Title, p.Page.TaskID, p.Script = "Review "+t.Ref, t.ID, "review.js"
	p.Notice, p.Alert = fl.Notice, fl.Alert
	ended := endedView(t)
	p.Ended = ended
	threads, commentable := pl.Threads, ended == nil
	if d.Since != "" {
		// the changes since a commit: line numbers on the old side are the
		// commit's, not the parent's, so threads stay on the whole diff
		threads, commentable = nil, false
		p.Since, p.SinceShort = d.Since, d.Since[:min(10, len(d.Since))]
	}
	p.Diff, p.Orphans = views.BuildDiff(d.Files, threads, t.ID, h.csrfFor(c), commentable, c.QueryParam("comment"))
	if body := fl.Field("body"); body != "" {
		// a comment the daemon refused: back in the form it was typed in,
		// or (a reply, or a line no longer in the diff) shown to copy
		if !p.Diff.SetDraft(c.QueryParam("comment"), body) {
			p.Kept = append(p.Kept, views.KeptField{Label: "Your comment (not saved)", Value: body})
		}
	}
	if err := h.applyReviewState(c, &p, d); err != nil {
		return err
	}
	p.Diff.Expandable, p.Diff.Full, p.Diff.Context = d.Since == "", d.Full, opts.Context
	p.Diff.Open = c.QueryParam("open")
	p.Diff.Sources = d.Sources
	if ended != nil {
		p.Diff.EmptyText = ended.EmptyText()
	}
	if d.Since == "" {
		p.Diff.LazyURL = "/review/" + t.ID + "/file?path="
		p.Diff.RawURL = rawURL(t.ID)
	}
	if len(d.Commits) > 0 {
		p.Head = d.Commits[0].SHA
	}
	p.Summary = d.Summary
	p.Usage = UsageWords(d.Task)
	p.Network = networkView(d.Network)
	p.Commits = commitRows(d.Commits, d.Turns)
	p.Merge = mergeView(d.Merge, t.Parent, t.Status)
	views.LinkTurns(&p.Diff, p.Orphans, p.Commits)
	views.PinSuggestions(&p.Diff, p.Orphans, p.Head)
	if p.DiffHTML, err = h.d.Views.DiffHTML(p.Diff); err != nil {
		return err
	}
	p.Queued = queuedViews(pl.Queued) // an ended task's: never delivered
	s := pl.State
	p.Bar = views.StatusBar{Status: s.Status, Turns: s.Turns, LastActivity: s.LastActivity, Queued: s.Queued, AsksInFlight: s.AsksInFlight, CanAnswer: s.CanAnswer, Why: s.Why}
	if !s.CanAnswer && ended == nil {
		p.AskWarning = "Asking is off: " + s.Why + " Comments still queue for the next unblock."
	}
	if ended != nil {
		// a form posted as the task ended: no form takes it back
		for _, k := range []struct{ name, label string }{{"feedback", "Message to the agent (not sent)"}, {"reason", "Why you accept (not accepted)"}} {
			if v := fl.Field(k.name); v != "" {
				p.Kept = append(p.Kept, views.KeptField{Label: k.label, Value: v})
			}
		}
	}
	if r := fl.Refusal; r != nil {
		rv := &views.RefusalView{Message: r.Message}
		if r.Remedy.Usable() {
			rv.HasRemedy, rv.Next, rv.Command, rv.Files = true, r.Remedy.Next, r.Remedy.Command, r.Remedy.Files
			rv.IsPassphrase = r.Remedy.UIAction == review.ActionPassphrase
			rv.IsSync = r.Remedy.UIAction == review.ActionSync
			rv.IsReview = r.Remedy.UIAction == review.ActionReview
			rv.IsUnblock = r.Remedy.UIAction == review.ActionUnblock
			rv.Commits = r.Remedy.Commits
		}
		p.Refusal = rv
	}
	p.AcceptHead, p.AcceptMethod = p.Head, fl.Field("method")
	if head := fl.Field("head"); head != "" && (fl.Refusal == nil || fl.Refusal.Remedy == nil || fl.Refusal.Remedy.Reason != review.ReasonHeadMoved) {
		p.AcceptHead = head
	}
	// the page is what the daemon knows now (after a sync, the merge panel
	// is the new dry run): never a copy kept by the browser
	c.Response().Header().Set("Cache-Control", "no-store")
	return h.render(c, http.StatusOK, "review", p)
}

// firstOf is the first of vs that is not empty.
func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// isJSON reports a JSON request body.
func isJSON(c echo.Context) bool {
	return strings.HasPrefix(c.Request().Header.Get(echo.HeaderContentType), echo.MIMEApplicationJSON)
}

// readForm parses a review form within maxFormBody; a larger one is "too
// large", never read as empty.
func readForm(c echo.Context) error {
	r := c.Request()
	if r.PostForm != nil {
		return nil // parsed already (the form token check)
	}
	r.Body = http.MaxBytesReader(c.Response(), r.Body, maxFormBody)
	if err := r.ParseForm(); err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return errTooLarge(maxFormBody)
		}
		return echo.NewHTTPError(http.StatusBadRequest, "could not read the form: "+err.Error())
	}
	return nil
}

func (h *handler) postComment(c echo.Context) error {
	var a api.PostCommentArgs
	if isJSON(c) {
		raw, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, maxFormBody))
		if err != nil {
			return errTooLarge(maxFormBody)
		}
		if err := json.Unmarshal(raw, &a); err != nil {
			return echo.NewHTTPError(http.StatusBadRequest, "the body must be JSON with body, file, line, side and intent: "+err.Error())
		}
	} else {
		if err := readForm(c); err != nil {
			return err
		}
		back := reviewPath(c.Param("task"))
		if f := c.FormValue("file"); f != "" && c.FormValue("thread_id") == "" {
			frag := views.FragID(f, c.FormValue("side"), atoiOr(c.FormValue("line")))
			back += "?comment=" + url.QueryEscape(frag) + "#" + frag
		}
		formErr := func(msg string) error {
			return h.seeOther(c, back, Flash{Notice: "Comment not saved: " + msg, Alert: true, Fields: typed(c, "body")})
		}
		a = api.PostCommentArgs{Body: c.FormValue("body"), File: c.FormValue("file"), Side: c.FormValue("side"), Intent: c.FormValue("intent"), ThreadID: c.FormValue("thread_id")}
		if l := c.FormValue("line"); l != "" {
			n, err := strconv.Atoi(l)
			if err != nil {
				return echo.NewHTTPError(http.StatusBadRequest, "line must be a number: reload the review page and comment again")
			}
			a.Line = n
		}
		if l := strings.TrimSpace(c.FormValue("start_line")); l != "" {
			n, err := strconv.Atoi(l)
			if err != nil {
				return formErr("the first line of the range must be a number (or left empty for one line).")
			}
			a.StartLine = n
		}
		rc, err := api.Do(c.Request().Context(), h.d.Call, api.CmdReviewPostComment, api.ReviewCommentArgs{Task: c.Param("task"), PostCommentArgs: a})
		if err != nil {
			return h.refused(c, back, err, Flash{Notice: "Comment not saved: " + err.Error(), Fields: typed(c, "body")})
		}
		return h.commentSaved(c, rc)
	}
	rc, err := api.Do(c.Request().Context(), h.d.Call, api.CmdReviewPostComment, api.ReviewCommentArgs{Task: c.Param("task"), PostCommentArgs: a})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, rc)
}

// commentSaved sends a form's author back to the line they commented on.
func (h *handler) commentSaved(c echo.Context, rc *review.ReviewComment) error {
	notice := "Comment queued for the next unblock."
	if rc.Intent == review.Ask {
		notice = "Question sent; the answer appears in the thread."
		if rc.AskState == review.AskFailed {
			notice = "Question saved but not sent: " + rc.AskError
		}
	}
	return h.seeOther(c, "/review/"+rc.TaskID+"#"+views.FragID(rc.File, string(rc.Side), rc.Line), Flash{Notice: notice})
}

// atoiOr is s as a number, 0 when it is none.
func atoiOr(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// actionDone ends the retry and withdraw forms: back to the review page
// with the daemon's notice, or its refusal.
func (h *handler) actionDone(c echo.Context, res *api.ActionResult, err error) error {
	if !wantsHTML(c) {
		// the page's script: it updates the thread in place
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, res)
	}
	back := reviewPath(c.Param("task"))
	if err != nil {
		return h.refused(c, back, err, Flash{})
	}
	return h.seeOther(c, back, Flash{Notice: res.Notice})
}

func (h *handler) retry(c echo.Context) error {
	res, err := api.Do(c.Request().Context(), h.d.Call, api.CmdReviewRetryAsk, api.CommentRef{Task: c.Param("task"), ID: c.Param("id")})
	return h.actionDone(c, res, err)
}

func (h *handler) withdraw(c echo.Context) error {
	res, err := api.Do(c.Request().Context(), h.d.Call, api.CmdReviewWithdrawComment, api.CommentRef{Task: c.Param("task"), ID: c.Param("id")})
	return h.actionDone(c, res, err)
}

// applySuggestion commits a comment's suggested change as the reviewer,
// pinned to the head the page showed (the form's head).
func (h *handler) applySuggestion(c echo.Context) error {
	if err := readForm(c); err != nil {
		return err
	}
	res, err := api.Do(c.Request().Context(), h.d.Call, api.CmdReviewApplySuggestion, api.ApplySuggestionArgs{Task: c.Param("task"), ID: c.Param("id"), Head: strings.TrimSpace(c.FormValue("head"))})
	return h.actionDone(c, res, err)
}

func (h *handler) unblock(c echo.Context) error {
	if err := readForm(c); err != nil {
		return err
	}
	tu, err := api.Do(c.Request().Context(), h.d.Call, api.CmdReviewUnblock, api.ReviewUnblockArgs{Task: c.Param("task"), Feedback: c.FormValue("feedback")})
	if err != nil {
		return h.refused(c, reviewPath(c.Param("task")), err, Flash{Notice: "Not unblocked: " + err.Error(), Fields: typed(c, "feedback", "draft_reason")})
	}
	return h.seeOther(c, "/tasks/"+tu.TaskID, Flash{Notice: unblockedWords(tu)})
}

func (h *handler) accept(c echo.Context) error {
	if err := readForm(c); err != nil {
		return err
	}
	reason := firstOf(c.FormValue("reason"), c.FormValue("draft_reason"))
	head := strings.TrimSpace(c.FormValue("head"))
	method := strings.TrimSpace(c.FormValue("method"))
	back := reviewPath(c.Param("task"))
	// what the reviewer typed goes back with any refusal; never the passphrase
	kept := map[string]string{"reason": reason, "feedback": c.FormValue("draft_feedback"), "head": head, "method": method}
	if strings.TrimSpace(reason) == "" {
		return h.seeOther(c, back, Flash{Notice: "Not accepted: say why you accept (the reason is recorded with the merge).", Alert: true, Fields: kept})
	}
	if head == "" {
		// the decision binds to what the page showed: a form that names
		// no head came from an older page
		return h.seeOther(c, back, Flash{Notice: "Not accepted: this form does not say which commit you reviewed. Review the page as it is now, then accept.", Alert: true, Fields: kept})
	}
	t, err := api.Do(c.Request().Context(), h.d.Call, api.CmdReviewAccept, api.ReviewAcceptArgs{Task: c.Param("task"), AcceptArgs: api.AcceptArgs{Reason: reason, Passphrase: c.FormValue("passphrase"), Head: head, Method: method}})
	if err != nil {
		ref, ok := refusalOf(err)
		if !ok {
			ref = &review.Refusal{Message: err.Error()}
		}
		return h.refused(c, back, err, Flash{Notice: "Not accepted: what to do is in the panel below.", Refusal: ref, Fields: kept})
	}
	return h.seeOther(c, "/tasks/"+t.ID, Flash{Notice: "Accepted and merged into " + t.Parent + "."})
}

// refusalOf finds a refused accept in err: the daemon's own type in-process,
// or the message and remedy relayed over RPC.
func refusalOf(err error) (*review.Refusal, bool) {
	var r *review.Refusal
	if errors.As(err, &r) {
		return r, true
	}
	var rb interface{ RemedyBody() any }
	if errors.As(err, &rb) {
		raw, _ := json.Marshal(rb.RemedyBody())
		return &review.Refusal{Message: err.Error(), Remedy: review.ParseRemedy(raw)}, true
	}
	return nil, false
}

// sync merges the parent into the task branch and waits for it (a sync
// queued behind a running turn waits at most syncWait): the page the
// browser is sent to then shows the merge panel after the sync.
func (h *handler) sync(c echo.Context) error {
	if err := readForm(c); err != nil {
		return err
	}
	back := reviewPath(c.Param("task"))
	drafts := typed(c, "draft_reason", "draft_feedback")
	type result struct {
		res *api.SyncResult
		err error
	}
	done := make(chan result, 1)
	// the sync goes on when the browser leaves: it is the daemon's job now
	// (the goroutine keeps nothing of c: echo reuses it once this returns)
	ctx, ref := context.WithoutCancel(c.Request().Context()), c.Param("task")
	go func() {
		res, err := api.Do(ctx, h.d.Call, api.CmdSync, api.SyncArgs{Task: ref, Wait: true})
		done <- result{res, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(h.syncWait):
		return h.seeOther(c, back, Flash{Notice: "Sync queued: it runs when the task's current turn ends (conflicts put the task in conflict). This page shows the result when you reload it then.", Fields: drafts})
	}
	if r.err != nil {
		return h.refused(c, back, r.err, Flash{Notice: "Sync not done: " + r.err.Error(), Fields: drafts})
	}
	f := Flash{Notice: "Synced with the parent branch.", Fields: drafts}
	switch {
	case r.res == nil || r.res.Queued:
		f.Notice = "Sync queued: it runs when the task's current turn ends. This page shows the result when you reload it then."
	case len(r.res.Conflicts) > 0:
		f.Notice, f.Alert = "Sync hit conflicts in "+strings.Join(r.res.Conflicts, ", ")+": unblock the task and the agent resolves them.", true
	}
	return h.seeOther(c, back, f)
}

func (h *handler) apiQueue(c echo.Context) error {
	items, err := api.Do(c.Request().Context(), h.d.Call, api.CmdReviewQueue, api.None{})
	if err != nil {
		return err
	}
	if items == nil {
		items = []api.QueueItem{}
	}
	return c.JSON(http.StatusOK, items)
}

func (h *handler) apiThreads(c echo.Context) error {
	pl, err := api.Do(c.Request().Context(), h.d.Call, api.CmdReviewComments, api.TaskRef{Task: c.Param("task")})
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, pl)
}

// fileFragment is one file's rows, threads and forms, as the review page
// shows them: the script fills a file that was sent closed with it.
func (h *handler) fileFragment(c echo.Context) error {
	ctx := c.Request().Context()
	path := c.QueryParam("path")
	if path == "" {
		return echo.NewHTTPError(http.StatusBadRequest, "path names no file: give ?path=<a changed file>")
	}
	// full and context as on the page: the file's context expanded, or
	// whole, loaded in place
	opts, err := diffOptions(c)
	if err != nil {
		return err
	}
	if opts.Full != "" && opts.Full != path {
		return echo.NewHTTPError(http.StatusBadRequest, "full names another file than path: expand one file at a time")
	}
	// the file alone: its rows and its threads, never the whole diff's
	d, err := api.Do(ctx, h.d.Call, api.CmdReviewDiff, api.ReviewDiffArgs{Task: c.Param("task"), DiffOptions: api.DiffOptions{SkipMerge: true, File: path, Full: opts.Full, Context: opts.Context}})
	if err != nil {
		return err
	}
	pl, err := api.Do(ctx, h.d.Call, api.CmdReviewComments, api.TaskRef{Task: d.Task.ID})
	if err != nil {
		return err
	}
	var threads []review.Thread
	for _, th := range pl.Threads {
		for _, f := range d.Files {
			if th.File == f.Path() || (f.OldPath != "" && th.File == f.OldPath) {
				threads = append(threads, th)
				break
			}
		}
	}
	view, _ := views.BuildDiffAt(d.FileIndex, d.Files, threads, d.Task.ID, h.csrfFor(c), endedView(d.Task) == nil, "")
	st, err := api.Do(ctx, h.d.Call, api.CmdReviewState, api.ReviewStateArgs{Task: d.Task.ID, Reviewer: h.reviewer(c)})
	if err != nil {
		return err
	}
	views.ApplyReviewState(&view, nil, st)
	view.Expandable, view.RawURL, view.Sources = true, rawURL(d.Task.ID), d.Sources
	view.Full, view.Context = d.Full, opts.Context
	views.LinkTurns(&view, nil, commitRows(d.Commits, d.Turns))
	if len(d.Commits) > 0 {
		views.PinSuggestions(&view, nil, d.Commits[0].SHA)
	} else {
		views.PinSuggestions(&view, nil, "")
	}
	frag, err := h.d.Views.FileHTML(view, path)
	if err != nil {
		return echo.NewHTTPError(http.StatusNotFound, "no changed file "+path+" in this task's diff: reload the page")
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.HTML(http.StatusOK, string(frag))
}

// rawURL is where the review page links a task's file too large to show
// (the path is appended).
func rawURL(taskID string) string { return "/review/" + taskID + "/raw?path=" }

// rawFile streams a changed file's own bytes as plain text (a binary file as
// a download), never as HTML: what an agent wrote is shown, not run.
func (h *handler) rawFile(c echo.Context) error {
	rf := h.d.RawFiles
	if rf == nil {
		return echo.NewHTTPError(http.StatusNotImplemented, "raw files are served by the daemon's own dashboard: open it with `lazy open`")
	}
	path := c.QueryParam("path")
	if path == "" {
		return echo.NewHTTPError(http.StatusBadRequest, "path names no file: give ?path=<a changed file>")
	}
	f, err := rf.RawFile(c.Request().Context(), c.Param("task"), path, c.QueryParam("side"))
	if err != nil {
		return err
	}
	defer f.Body.Close()
	hd := c.Response().Header()
	ctype, disp := "text/plain; charset=utf-8", "inline"
	if f.Binary {
		ctype, disp = "application/octet-stream", "attachment"
	}
	if v := mime.FormatMediaType(disp, map[string]string{"filename": filepath.Base(f.Path)}); v != "" {
		disp = v
	}
	hd.Set("Content-Disposition", disp)
	hd.Set("Content-Length", strconv.FormatInt(f.Size, 10))
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	hd.Set("Cache-Control", "no-store")
	return c.Stream(http.StatusOK, ctype, f.Body)
}

// apiDiff is the review page's data as JSON: the parsed diff, the merge dry
// run, the commits, the agent's summary and the work turns.
func (h *handler) apiDiff(c echo.Context) error {
	opts, err := diffOptions(c)
	if err != nil {
		return err
	}
	d, err := api.Do(c.Request().Context(), h.d.Call, api.CmdReviewDiff, api.ReviewDiffArgs{Task: c.Param("task"), DiffOptions: opts})
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, d)
}

func (h *handler) commitPage(c echo.Context) error {
	cd, err := api.Do(c.Request().Context(), h.d.Call, api.CmdCommitDiff, api.CommitRef{ID: c.Param("sha")})
	if err != nil {
		return err
	}
	p := views.CommitPage{Page: h.page(c), SHA: cd.SHA, Subject: cd.Subject, Author: cd.Author, Toolbar: views.Toolbar}
	p.Title, p.Script = "Commit "+cd.SHA[:min(12, len(cd.SHA))], "review.js"
	p.Diff, _ = views.BuildDiff(cd.Files, nil, "", "", false, "")
	if p.DiffHTML, err = h.d.Views.DiffHTML(p.Diff); err != nil {
		return err
	}
	return h.render(c, http.StatusOK, "commit", p)
}

// attention is a failed or conflicted task's row: why, and what to do.
func attention(t api.TaskInfo) (views.AttentionRow, bool) {
	row := views.AttentionRow{ID: t.ID, Ref: t.Ref, Title: t.Title, Status: t.Status}
	switch t.Status {
	case "failed":
		row.Cause = t.FailReason
		row.Next = "Fix the cause, then unblock the task to run its next turn (your queued comments go with it)."
	case "conflict":
		row.Cause = t.FailReason
		row.Next = "Ask the agent about the conflicting lines, or unblock it to resolve them; Sync again afterwards."
	case "running":
		if t.ModelError == "" && t.Tripwire == "" {
			return row, false
		}
		row.Next = "The turn is still running: check the model upstream (lazy watch --net shows each call), or cancel the task."
	default:
		return row, false
	}
	for _, extra := range []string{t.Tripwire, t.ModelError} {
		if extra != "" {
			row.Cause = strings.TrimSpace(row.Cause + " " + extra)
		}
	}
	if row.Cause == "" {
		row.Cause = "no reason was recorded; see the task page"
	}
	return row, true
}

// commitRows are the branch's commits, each with the work turn that made it
// (the turn whose run its commit time falls in).
func commitRows(cs []api.CommitInfo, turns []api.TurnRef) []views.CommitRow {
	out := make([]views.CommitRow, 0, len(cs))
	for _, c := range cs {
		row := views.CommitRow{SHA: c.SHA, Short: c.SHA[:min(10, len(c.SHA))], Subject: c.Subject, Author: c.Author, Time: c.Time}
		for _, tu := range turns {
			if tu.StartedAt == nil {
				continue
			}
			// commit times have whole seconds; a turn's bounds do not
			start := tu.StartedAt.Truncate(time.Second)
			end := time.Now()
			if tu.EndedAt != nil {
				end = *tu.EndedAt
			}
			if !c.Time.Before(start) && !c.Time.After(end) {
				row.Turn = tu.Number
			}
		}
		out = append(out, row)
	}
	return out
}

// endedView is how an accepted or cancelled task ended (nil: it is live).
// Its page is then its record: the diff and commits between the commits
// kept as it ended, its threads, and no action.
func endedView(t api.TaskInfo) *views.EndedView {
	if !task.Status(t.Status).Ended() {
		return nil
	}
	short := func(sha string) string { return sha[:min(10, len(sha))] }
	return &views.EndedView{Accepted: t.Status == string(task.Accepted), Parent: t.Parent, Branch: t.Branch, At: t.EndedAt,
		Base: t.EndBase, BaseShort: short(t.EndBase), Head: t.EndHead, HeadShort: short(t.EndHead), Unrecorded: t.EndHead == ""}
}

// mergeView is the merge-readiness panel of the accept block, with the
// real next step: Unblock when a sync left the task in conflict (the agent
// resolves it), Sync when the task would not merge cleanly, Accept when it
// would.
func mergeView(m *api.MergeReadiness, parent, status string) *views.MergeView {
	if m == nil {
		return nil
	}
	v := &views.MergeView{Parent: parent, Conflicts: m.Conflicts, Ahead: m.Ahead, Behind: m.Behind,
		Protected: m.Protected, OutOfScope: m.OutOfScope, Error: m.Error}
	if m.Error == "" {
		v.State = "conflict"
		if m.Clean {
			v.State = "clean"
		}
	}
	switch {
	case status == string(task.Conflict):
		v.Next = views.NextUnblock
	case v.State == "conflict":
		v.Next = views.NextSync
	case v.State == "clean":
		v.Next = views.NextAccept
	}
	return v
}

// diffOptions reads what the review page's query asks of the diff.
func diffOptions(c echo.Context) (api.DiffOptions, error) {
	o := api.DiffOptions{Since: c.QueryParam("since"), Full: c.QueryParam("full")}
	if v := c.QueryParam("context"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return o, echo.NewHTTPError(http.StatusBadRequest, "context must be a number of lines (0 or more)")
		}
		o.Context = n
	}
	return o, nil
}

// networkView is the review page's network section from the task's egress.
func networkView(n *api.Network) *views.NetworkView {
	if n == nil {
		return nil
	}
	v := &views.NetworkView{Omitted: n.RefusalsOmitted}
	for _, d := range n.Destinations {
		v.Destinations = append(v.Destinations, views.NetDestView{Dest: d.Dest, Connections: d.Connections, Failed: d.Failed,
			BytesUp: byteWords(d.BytesUp), BytesDown: byteWords(d.BytesDown)})
	}
	for i := len(n.Refusals) - 1; i >= 0; i-- { // newest first
		r := n.Refusals[i]
		v.Refusals = append(v.Refusals, views.NetRefusalView{At: r.At, Method: r.Method, Path: r.Path, Cause: r.Cause})
	}
	return v
}

// byteWords is a byte count for a reader: "512 B", "3.4 KiB", "12.0 MiB".
func byteWords(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// unblockedWords is the notice after the page's unblock: the work turn by
// its number, and that it starts a new conversation when the agent changed.
func unblockedWords(tu *api.Turn) string {
	s := "Unblocked: work turn " + strconv.Itoa(tu.Seq) + " is queued."
	if tu.Notice != "" {
		s += " Note: " + tu.Notice + "."
	}
	return s
}
