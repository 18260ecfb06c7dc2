package httpapi

import (
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"lazy/api"
	"lazy/review"
	"lazy/views"
)

// searchLimit bounds the lines one search answers with.
const searchLimit = 500

// apiSearch finds text in the whole diff of a task, the files the page sent
// without their rows included: the lines (with their fragment ids, which
// the page's script loads the file for and scrolls to) and the files whose
// path holds it.
func (h *handler) apiSearch(c echo.Context) error {
	q := c.QueryParam("q")
	switch {
	case strings.TrimSpace(q) == "":
		return echo.NewHTTPError(http.StatusBadRequest, "nothing to search for: give ?q=<text>")
	case len(q) > api.SearchQueryMax:
		return echo.NewHTTPError(http.StatusBadRequest, "the search text is too long: at most 256 bytes")
	case !utf8.ValidString(q):
		return echo.NewHTTPError(http.StatusBadRequest, "the search text is not UTF-8: type it again")
	}
	d, err := api.Do(c.Request().Context(), h.d.Call, api.CmdReviewDiff, api.ReviewDiffArgs{Task: c.Param("task"), DiffOptions: api.DiffOptions{SkipMerge: true}})
	if err != nil {
		return err
	}
	res := api.SearchDiff(d.Files, q, searchLimit)
	for i := range res.Hits {
		hit := &res.Hits[i]
		hit.Frag = views.FragID(hit.Anchor, hit.Side, hit.Line)
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, res)
}

// threadsFragment is every thread of the task as the review page shows it
// (rows, orphans, queued list), without the diff: what the page's script
// fetches after an action or an event instead of the whole page. full and
// context are the page's own, so threads land where the page shows them.
func (h *handler) threadsFragment(c echo.Context) error {
	ctx := c.Request().Context()
	opts, err := diffOptions(c)
	if err != nil {
		return err
	}
	d, err := api.Do(ctx, h.d.Call, api.CmdReviewDiff, api.ReviewDiffArgs{Task: c.Param("task"), DiffOptions: api.DiffOptions{SkipMerge: true, Full: opts.Full, Context: opts.Context}})
	if err != nil {
		return err
	}
	pl, err := api.Do(ctx, h.d.Call, api.CmdReviewComments, api.TaskRef{Task: d.Task.ID})
	if err != nil {
		return err
	}
	view, orphans := views.BuildDiff(d.Files, pl.Threads, d.Task.ID, h.csrfFor(c), endedView(d.Task) == nil, "")
	// as the page renders them: the reviewer's resolved threads, the turns'
	// commits, suggestions pinned to the head shown
	st, err := api.Do(ctx, h.d.Call, api.CmdReviewState, api.ReviewStateArgs{Task: d.Task.ID, Reviewer: h.reviewer(c)})
	if err != nil {
		return err
	}
	views.ApplyReviewState(&view, orphans, st)
	views.LinkTurns(&view, orphans, commitRows(d.Commits, d.Turns))
	head := ""
	if len(d.Commits) > 0 {
		head = d.Commits[0].SHA
	}
	views.PinSuggestions(&view, orphans, head)
	frag, err := h.d.Views.ThreadsHTML(view, orphans, queuedViews(pl.Queued))
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.HTML(http.StatusOK, string(frag))
}

// queuedViews are the queued comments as the page lists them.
func queuedViews(qs []review.ReviewComment) []views.QueuedView {
	var out []views.QueuedView
	for _, q := range qs {
		out = append(out, views.QueuedView{ID: q.ID, Body: q.Body, File: q.File, Side: string(q.Side), Line: q.Line, FragID: views.FragID(q.File, string(q.Side), q.Line)})
	}
	return out
}
