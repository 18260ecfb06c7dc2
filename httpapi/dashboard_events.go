package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"lazy/api"
	"lazy/task"
)

// dashboardRoutes is the Tasks page's live stream.
func (h *handler) dashboardRoutes(e *echo.Echo) {
	e.GET("/api/events", h.dashboardEvents)
}

// dashboardKinds are the events GET /api/events carries: what changes a
// row of the Tasks page or calls for a notification. A model exchange or a
// traffic line is each task's own stream's.
var dashboardKinds = map[api.EventKind]bool{api.EventStatus: true, api.EventTripwire: true, api.EventTurnStart: true, api.EventTurnEnd: true, api.EventTitle: true, api.EventModelError: true}

// dashboardEvents is GET /api/events: every task's lifecycle events as
// server-sent events (the Tasks page refreshes itself, counts what needs
// the reviewer in its title and, when the reviewer asked for it, shows a
// browser notification). The same login as every page.
func (h *handler) dashboardEvents(c echo.Context) error {
	w, ok := h.d.Call.(TaskEvents)
	if !ok {
		return echo.NewHTTPError(http.StatusNotImplemented, "task events are served by the daemon's own dashboard: open it with `lazy open`")
	}
	ch, cancel, err := w.Watch(c.Request().Context(), api.WatchArgs{})
	if err != nil {
		return err
	}
	defer cancel()
	out := make(chan api.Event, 64)
	go func() {
		defer close(out)
		for {
			select {
			case <-c.Request().Context().Done():
				return
			case ev, ok := <-ch:
				if !ok {
					return
				}
				if !dashboardKinds[ev.Kind] {
					continue
				}
				ev.Detail = "" // the page reads the task again; a detail may quote what an agent did
				select {
				case out <- ev:
				case <-c.Request().Context().Done():
					return
				}
			}
		}
	}()
	return h.sendEvents(c, out)
}

// needsYou reports whether a task waits for the reviewer: blocked,
// conflicted or failed, or tripped a wire and not ended.
func needsYou(t api.TaskInfo) bool {
	s := task.Status(t.Status)
	return s.NeedsReviewer() || t.Tripwire != "" && !s.Ended()
}
