package httpapi

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"lazy/api"
	"lazy/views"
)

// The reviewer's state on a task, for review.js (which caches it and
// posts each change with fetch): GET the state, POST a viewed mark, a
// resolved thread, the head reviewed. Each POST answers the state after it.

// reviewStateRoutes registers the state's routes (503 without Deps.Call, as
// every review route).
func (h *handler) reviewStateRoutes() []route {
	return []route{
		{http.MethodGet, "/api/review/:task/state", h.apiReviewState},
		{http.MethodPost, "/api/review/:task/viewed", h.apiViewed},
		{http.MethodPost, "/api/review/:task/resolved", h.apiResolved},
		{http.MethodPost, "/api/review/:task/seen", h.apiSeen},
	}
}

// reviewer is who the request's session is. The dashboard has one
// identity today (api.Owner): every browser session opened with the
// dashboard token and every bearer of the auth token is the same reviewer,
// so a second browser sees what the first marked.
func (h *handler) reviewer(echo.Context) string { return api.Owner }

func (h *handler) apiReviewState(c echo.Context) error {
	st, err := api.Do(c.Request().Context(), h.d.Call, api.CmdReviewState, api.ReviewStateArgs{Task: c.Param("task"), Reviewer: h.reviewer(c)})
	return stateReply(c, st, err)
}

// readJSON decodes a bounded JSON body into v.
func readJSON(c echo.Context, v any, fields string) error {
	raw, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, maxFormBody))
	if err != nil {
		return errTooLarge(maxFormBody)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "the body must be JSON with "+fields+": "+err.Error())
	}
	return nil
}

func (h *handler) apiViewed(c echo.Context) error {
	var a api.ViewedArgs
	if err := readJSON(c, &a, "file, hash and viewed"); err != nil {
		return err
	}
	a.Task, a.Reviewer = c.Param("task"), h.reviewer(c)
	st, err := api.Do(c.Request().Context(), h.d.Call, api.CmdReviewViewed, a)
	return stateReply(c, st, err)
}

func (h *handler) apiResolved(c echo.Context) error {
	var a api.ResolveArgs
	if err := readJSON(c, &a, "thread_id and resolved"); err != nil {
		return err
	}
	a.Task, a.Reviewer = c.Param("task"), h.reviewer(c)
	st, err := api.Do(c.Request().Context(), h.d.Call, api.CmdReviewResolve, a)
	return stateReply(c, st, err)
}

func (h *handler) apiSeen(c echo.Context) error {
	var a api.SeenArgs
	if err := readJSON(c, &a, "head"); err != nil {
		return err
	}
	a.Task, a.Reviewer = c.Param("task"), h.reviewer(c)
	st, err := api.Do(c.Request().Context(), h.d.Call, api.CmdReviewSeen, a)
	return stateReply(c, st, err)
}

// applyReviewState renders the review page with the reviewer's state: the
// files viewed, the threads resolved, the link to the changes since the
// head last reviewed (not on a page that shows those already).
func (h *handler) applyReviewState(c echo.Context, p *views.ReviewPage, d *api.DiffResult) error {
	st, err := api.Do(c.Request().Context(), h.d.Call, api.CmdReviewState, api.ReviewStateArgs{Task: d.Task.ID, Reviewer: h.reviewer(c)})
	if err != nil {
		return err
	}
	p.ReviewState = st
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	p.ReviewStateJSON = string(b)
	views.ApplyReviewState(&p.Diff, p.Orphans, st)
	head := ""
	if len(d.Commits) > 0 {
		head = d.Commits[0].SHA
	}
	if since := st.Since(head); since != "" && d.Since == "" {
		p.LastReviewed, p.LastShort = since, since[:min(10, len(since))]
	}
	return nil
}

func stateReply(c echo.Context, st *api.ReviewState, err error) error {
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, st)
}
