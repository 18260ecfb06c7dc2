package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"

	"lazy/api"
	"lazy/task"
	"lazy/views"
)

// TaskEvents is a task's event stream, as `lazy watch --task` reads it: the
// daemon's own table (Commands) has it; where Deps.Call lacks it (the dev
// server's RPC client) the route answers 501 and the task page polls.
type TaskEvents interface {
	Watch(ctx context.Context, a api.WatchArgs) (<-chan api.Event, func(), error)
}

// taskRoutes are the task forms (the commands the CLI's task new, task
// cancel and comment call) and the task page's live stream.
func (h *handler) taskRoutes(e *echo.Echo) {
	e.POST("/tasks", h.newTask)
	e.POST("/tasks/:id/cancel", h.cancelTask)
	e.POST("/tasks/:id/comment", h.commentTask)
	e.GET("/api/tasks/:task/events", h.taskEvents)
}

// newTask is the Tasks page's form: taskNew, then the new task's page.
func (h *handler) newTask(c echo.Context) error {
	if err := readForm(c); err != nil {
		return h.refused(c, "/", err, Flash{Notice: "Task not created: " + err.Error()})
	}
	a := api.NewTaskArgs{Prompt: c.FormValue("prompt"), Code: strings.TrimSpace(c.FormValue("code")), Parent: strings.TrimSpace(c.FormValue("parent"))}
	res, err := api.Do(c.Request().Context(), h.d.Call, api.CmdTaskNew, a)
	if err != nil {
		return h.refused(c, "/", err, Flash{Notice: "Task not created: " + err.Error(), Fields: map[string]string{"prompt": a.Prompt, "code": a.Code, "parent": a.Parent}})
	}
	notice := fmt.Sprintf("Task %s created on branch %s from %s: work turn %d is queued.", res.Task.Ref, res.Task.Branch, res.Task.Parent, res.Turn.Seq)
	for _, w := range res.Warnings {
		notice += " Note: " + w
	}
	return h.seeOther(c, "/tasks/"+res.Task.ID, Flash{Notice: notice})
}

// cancelTask is the task page's cancel form: task cancel.
func (h *handler) cancelTask(c echo.Context) error {
	ref := c.Param("id")
	t, err := api.Do(c.Request().Context(), h.d.Call, api.CmdTaskCancel, api.TaskRef{Task: ref})
	if err != nil {
		return h.refused(c, "/tasks/"+url.PathEscape(ref), err, Flash{Notice: "Not cancelled: " + err.Error()})
	}
	return h.seeOther(c, "/tasks/"+t.ID, Flash{Notice: "Cancelled: the task has ended and nothing was merged; its branch " + t.Branch + " stays."})
}

// commentTask is the task page's message form: comment, a task message
// to the agent.
func (h *handler) commentTask(c echo.Context) error {
	ref := c.Param("id")
	back := "/tasks/" + url.PathEscape(ref)
	if err := readForm(c); err != nil {
		return h.refused(c, back, err, Flash{Notice: "Message not sent: " + err.Error()})
	}
	body := c.FormValue("body")
	res, err := api.Do(c.Request().Context(), h.d.Call, api.CmdComment, api.CommentArgs{Task: ref, Body: body})
	if err != nil {
		return h.refused(c, back, err, Flash{Notice: "Message not sent: " + err.Error(), Fields: map[string]string{"body": body}})
	}
	// the words `lazy comment` prints (review.MessageQueued)
	notice := "Message " + res.Notice + "."
	if tu := res.Triggered; tu != nil && tu.Notice != "" {
		notice += " Note: " + tu.Notice + "."
	}
	return h.seeOther(c, "/tasks/"+res.Comment.TaskID, Flash{Notice: notice})
}

// taskEvents is GET /api/tasks/:task/events (CONTRACT §17): the task's
// events as server-sent events, each `data: <api.Event JSON>`, until the
// client goes away or the daemon stops. The task page refreshes itself from
// it.
func (h *handler) taskEvents(c echo.Context) error {
	w, ok := h.d.Call.(TaskEvents)
	if !ok {
		return echo.NewHTTPError(http.StatusNotImplemented, "task events are served by the daemon's own dashboard: open it with `lazy open`")
	}
	ch, cancel, err := w.Watch(c.Request().Context(), api.WatchArgs{Tasks: []string{c.Param("task")}, Transcript: true})
	if err != nil {
		return err
	}
	defer cancel()
	return h.sendEvents(c, ch)
}

// Status filters of the Tasks page: ?status= takes a group or a status, or
// several joined with commas. With none the page shows every task that has
// not ended and says how many ended ones it leaves out.
var statusGroups = []struct {
	name, label string
	has         func(task.Status) bool
}{
	{"needs", "Needs you", task.Status.NeedsReviewer},
	{"running", "Running", func(s task.Status) bool { return s == task.Running }},
	{"ended", "Ended", task.Status.Ended},
	{"all", "All", func(task.Status) bool { return true }},
}

// statusFilter reads ?status=: what it shows, in words, and the test.
func statusFilter(q string) (string, func(task.Status) bool, error) {
	if q == "" {
		return "live", func(s task.Status) bool { return !s.Ended() }, nil
	}
	var tests []func(task.Status) bool
	var words []string
next:
	for _, part := range strings.Split(q, ",") {
		part = strings.TrimSpace(part)
		for _, g := range statusGroups {
			if part == g.name {
				tests, words = append(tests, g.has), append(words, strings.ToLower(g.label))
				continue next
			}
		}
		if s := task.Status(part); s.Valid() {
			tests, words = append(tests, func(o task.Status) bool { return o == s }), append(words, part)
			continue
		}
		names := []string{}
		for _, g := range statusGroups {
			names = append(names, g.name)
		}
		for _, s := range task.Statuses {
			if !slices.Contains(names, string(s)) { // "running" is a group and a status
				names = append(names, string(s))
			}
		}
		return "", nil, echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("no task status %q: filter with ?status= one of %s (several joined with commas), or leave it out for every task that has not ended", part, strings.Join(names, ", ")))
	}
	return strings.Join(words, " or "), func(s task.Status) bool {
		for _, t := range tests {
			if t(s) {
				return true
			}
		}
		return false
	}, nil
}

// reviewOrder sorts tasks for the reviewer: those that need them first
// (blocked, conflict, failed, tripped), then running ones, then ended
// ones; the latest activity first in each.
func reviewOrder(ts []api.TaskInfo) {
	rank := func(t api.TaskInfo) int {
		switch {
		case needsYou(t):
			return 0
		case task.Status(t.Status).Ended():
			return 2
		}
		return 1
	}
	sort.SliceStable(ts, func(i, j int) bool {
		ri, rj := rank(ts[i]), rank(ts[j])
		if ri != rj {
			return ri < rj
		}
		return ts[i].LastActivity.After(ts[j].LastActivity)
	})
}

// tasksPage is the Tasks page: the filter's tasks in review order, the
// filter tabs with their counts, and the new task form.
func (h *handler) tasksPage(c echo.Context) error {
	q := c.QueryParam("status")
	shown, keep, err := statusFilter(q)
	if err != nil {
		return err
	}
	ts, err := api.Do(c.Request().Context(), h.d.Call, api.CmdTaskList, api.None{})
	if err != nil {
		return err
	}
	f := h.flash(c)
	p := views.TasksPage{Page: h.page(c), Shown: shown}
	p.Title, p.Script = "Tasks", "tasks.js"
	for _, t := range ts {
		if needsYou(t) {
			p.NeedsYou++
		}
	}
	if p.NeedsYou > 0 {
		// the tab says it even when it is not the one in view
		p.Title = fmt.Sprintf("(%d) Tasks", p.NeedsYou)
	}
	p.Notice, p.Alert = f.Notice, f.Alert
	p.Draft = views.NewTaskDraft{Prompt: f.Field("prompt"), Code: f.Field("code"), Parent: f.Field("parent"), Open: len(ts) == 0 || f.Alert}
	reviewOrder(ts)
	for _, t := range ts {
		s := task.Status(t.Status)
		if keep(s) {
			p.Tasks = append(p.Tasks, taskRow(t))
		} else if q == "" && s.Ended() {
			p.Hidden++
		}
	}
	if len(ts) > 0 {
		for _, g := range statusGroups {
			tab := views.FilterTab{Label: g.label, Href: "/?status=" + g.name, Current: q == g.name}
			for _, t := range ts {
				if g.has(task.Status(t.Status)) {
					tab.Count++
				}
			}
			p.Filters = append(p.Filters, tab)
		}
		live := views.FilterTab{Label: "Not ended", Href: "/", Current: q == ""}
		for _, t := range ts {
			if !task.Status(t.Status).Ended() {
				live.Count++
			}
		}
		p.Filters = append([]views.FilterTab{live}, p.Filters...)
		p.Narrowed = !slices.ContainsFunc(p.Filters, func(f views.FilterTab) bool { return f.Current })
	}
	return h.render(c, http.StatusOK, "tasks", p)
}

// taskPage is a task's page: its state, commits and turns (which follow
// the task's events while it lives), its messages, and its forms.
func (h *handler) taskPage(c echo.Context) error {
	d, err := api.Do(c.Request().Context(), h.d.Call, api.CmdTaskShow, api.TaskRef{Task: c.Param("id")})
	if err != nil {
		return err
	}
	f := h.flash(c)
	p := views.TaskPage{Page: h.page(c), Task: taskRow(d.Task), Parent: d.Task.Parent, DraftMessage: f.Field("body")}
	for _, cm := range d.Commits {
		p.Commits = append(p.Commits, views.CommitRow{SHA: cm.SHA, Short: cm.SHA[:min(10, len(cm.SHA))], Subject: cm.Subject})
	}
	p.Title, p.Page.TaskID = d.Task.Ref, d.Task.ID
	p.Notice, p.Alert = f.Notice, f.Alert
	p.Live = !task.Status(d.Task.Status).Ended()
	p.TaskEnded = !p.Live
	if p.Live {
		p.Script = "task.js"
	}
	for i := len(d.Turns) - 1; i >= 0; i-- {
		t := d.Turns[i]
		p.Turns = append(p.Turns, views.TurnRow{Number: t.Number, Label: t.Label, Anchor: turnAnchor(t), Agent: t.Agent, Notice: t.Notice,
			Kind: t.Kind, Trigger: t.Trigger, Status: t.Status, Prompt: t.Prompt,
			Result: ResultText(t.Result), Error: t.Error, Output: t.Output, StartedAt: t.StartedAt, EndedAt: t.EndedAt,
			IsFailed: t.Status == task.TurnFailed, IsRunning: t.Status == task.TurnRunning, IsQueued: t.Status == task.TurnQueued,
			Transcript: transcriptView(t)})
	}
	p.Now = nowWords(d.Task, d.Turns)
	for _, cm := range d.Comments {
		p.Comments = append(p.Comments, views.CommentRow{Body: cm.Body, State: messageState(cm), CreatedAt: cm.CreatedAt})
	}
	return h.render(c, http.StatusOK, "task", p)
}

// transcriptView is a turn's transcript for its page: the running turn
// always has one (open, maybe empty), which task.js fills as it streams.
func transcriptView(t api.Turn) *views.TranscriptView {
	running := t.Status == task.TurnRunning
	tr := t.Transcript
	if tr == nil && !running {
		return nil
	}
	v := &views.TranscriptView{Turn: t.Number, Open: running}
	if tr == nil {
		return v
	}
	v.Seq, v.Tokens, v.Files, v.Written, v.Truncated = tr.Seq, tr.Tokens, tr.Files, tr.Written, tr.Truncated
	for _, c := range tr.Calls {
		cv := views.TranscriptCallView{Number: c.Call, Text: c.Text}
		for _, tc := range c.Tools {
			cv.Tools = append(cv.Tools, views.ToolView{Name: tc.Name, Input: tc.Input, File: tc.File})
		}
		for _, r := range c.Results {
			cv.Results = append(cv.Results, views.ToolResultView{Tool: r.Tool, Content: r.Content, IsError: r.IsError})
		}
		v.Calls = append(v.Calls, cv)
	}
	return v
}

// nowWords is what a task is doing, as its page says it: the turn running
// or waiting, else what its status asks of the reviewer.
func nowWords(t api.TaskInfo, turns []api.Turn) string {
	for i := len(turns) - 1; i >= 0; i-- {
		tu := turns[i]
		switch tu.Status {
		case task.TurnRunning:
			return fmt.Sprintf("%s running (%s)", tu.Label, tu.Trigger)
		case task.TurnQueued:
			return fmt.Sprintf("%s queued (%s): it starts when the agent is free", tu.Label, tu.Trigger)
		}
	}
	switch task.Status(t.Status) {
	case task.Blocked:
		return "waiting for you: review the change, then unblock or accept"
	case task.Conflict:
		return "waiting for you: the sync hit conflicts; unblock the task and the agent resolves them"
	case task.Failed:
		return "waiting for you: the last turn failed; fix the cause, then unblock"
	case task.Accepted:
		return "accepted: the task has ended"
	case task.Cancelled:
		return "cancelled: the task has ended"
	}
	return t.Status
}

// ResultText is a turn's result as a reader wants it: the text of a
// client's JSON result object when the result is one (an older record kept
// the whole object), else the result as it is.
func ResultText(r string) string {
	s := strings.TrimSpace(r)
	if !strings.HasPrefix(s, "{") {
		return r
	}
	var obj struct {
		Result *string `json:"result"`
	}
	if json.Unmarshal([]byte(s), &obj) != nil || obj.Result == nil {
		return r
	}
	return *obj.Result
}
