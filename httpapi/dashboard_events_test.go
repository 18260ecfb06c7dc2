package httpapi

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"

	"lazy/api"
	"lazy/store"
)

// allTasks serves every task's events, as the daemon's Watch with no
// task filter does.
type allTasks struct{ *formTasks }

func (a allTasks) Watch(_ context.Context, w api.WatchArgs) (<-chan api.Event, func(), error) {
	if w.Tasks != nil || w.Net {
		return nil, nil, store.ErrNotFound
	}
	return a.events, func() {}, nil
}

// TestTasksPageCountsWhatNeedsYou: the title counts the tasks that wait
// for the reviewer — blocked, conflict, failed, and a running one that
// tripped a wire — and the tripped one sorts with them.
func TestTasksPageCountsWhatNeedsYou(t *testing.T) {
	list := append(taskList(), api.TaskInfo{ID: "0190aaaa000070008000000000000016", Ref: "tripped", Status: "running", Tripwire: "tripwire: canary", LastActivity: t0})
	body := serve(t, formServer(t, &formTasks{list: list}), "GET", "/", "", "").Body.String()
	if !strings.Contains(body, "<title>(4) Tasks · my-project · lazy</title>") {
		t.Errorf("the title must count 4 tasks needing you:\n%s", body[:min(len(body), 400)])
	}
	if got, want := strings.Join(refsIn(body), " "), "clash fix-login broke tripped run-new run-old"; got != want {
		t.Errorf("order %q, want %q", got, want)
	}
	for _, want := range []string{`<script src="/assets/tasks.js" defer>`, `id="tasks-live" data-live`, `id="notify-button">Notify me</button>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	calm := serve(t, formServer(t, &formTasks{list: taskList()[:1]}), "GET", "/", "", "").Body.String()
	if !strings.Contains(calm, "<title>Tasks · my-project · lazy</title>") {
		t.Errorf("with nothing needing you the title has no count")
	}
}

// TestDashboardEvents: GET /api/events needs a login, carries every task's
// lifecycle events without their detail, and leaves out the rest.
func TestDashboardEvents(t *testing.T) {
	if rec := serve(t, formServer(t, &formTasks{list: taskList()}), "GET", "/api/events", "", ""); rec.Code != http.StatusNotImplemented {
		t.Errorf("events without a stream: %d", rec.Code)
	}
	f := &formTasks{list: taskList(), events: make(chan api.Event, 4)}
	h := formServer(t, allTasks{f})
	if rec := run(h, request("GET", "/api/events", "", nil, nil)); rec.Code != http.StatusUnauthorized {
		t.Errorf("events without a login: %d", rec.Code)
	}
	srv := httptestServer(t, h)
	f.events <- api.Event{Kind: "net", TaskID: fakeID, Detail: "a traffic line"}
	f.events <- api.Event{Kind: "transcript", TaskID: fakeID, Detail: "what the model said"}
	f.events <- api.Event{Kind: "status", TaskID: fakeID, TaskRef: "fix-login", Status: "blocked", Detail: "an agent's words"}
	req, _ := http.NewRequest("GET", srv+"/api/events", nil)
	req.Header.Set("Authorization", "Bearer "+testBearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "data: ") {
			if !strings.Contains(l, `"kind":"status"`) || !strings.Contains(l, `"task_ref":"fix-login"`) || strings.Contains(l, "words") {
				t.Errorf("the first event line %q: want the status event, no detail", l)
			}
			return
		}
	}
	t.Fatalf("the stream ended without an event: %v", sc.Err())
}
