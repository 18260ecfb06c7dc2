package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"lazy/api"
	"lazy/review"
	"lazy/store"
	"lazy/task"
)

// formTasks is a Tasks whose forms' commands are recorded, and which
// refuses what the daemon refuses.
type formTasks struct {
	fakeTasks
	list     []api.TaskInfo
	created  []api.NewTaskArgs
	comments []string
	events   chan api.Event
}

type refusedErr string

func (e refusedErr) Error() string   { return string(e) }
func (e refusedErr) HTTPStatus() int { return http.StatusBadRequest }

func (f *formTasks) ListTasks(context.Context) ([]api.TaskInfo, error) { return f.list, nil }
func (f *formTasks) ShowTask(_ context.Context, ref string) (*api.TaskDetail, error) {
	for _, t := range f.list {
		if t.ID == ref || t.Ref == ref {
			started := t0
			return &api.TaskDetail{Task: t, Turns: []api.Turn{
				{TaskID: t.ID, Number: 1, Seq: 1, Label: "work turn 1", Kind: "work", Trigger: "start", Status: store.TurnDone, Prompt: "Do <it>", StartedAt: &started,
					Result: `{"type":"result","result":"Wrote <b>a.go</b>.","session_id":"s-1"}`, Output: `{"type":"result","result":"Wrote <b>a.go</b>.","session_id":"s-1"}`,
					Transcript: &api.TurnTranscript{Turn: 1, Seq: 4, Tokens: 42, Files: []string{"/wt/a.go"}, Written: []string{"<a>.go"}, Calls: []api.TranscriptCall{
						{Call: 1, Text: "I will <write> it", Tools: []api.ToolCall{{Name: "Write", Input: `{"file_path":"a.go"}`}},
							Results: []api.ToolResult{{Tool: "Write", Content: "wrote <script>x</script>"}, {Tool: "Bash", Content: "exit 1", IsError: true}}}}}},
				{TaskID: t.ID, Number: 2, Seq: 2, Label: "work turn 2", Kind: "work", Trigger: "unblock", Status: store.TurnQueued, Prompt: "Continue."},
			}}, nil
		}
	}
	return nil, store.ErrNotFound
}
func (f *formTasks) NewTask(_ context.Context, a api.NewTaskArgs) (*api.NewTaskResult, error) {
	if a.Code == "taken" {
		return nil, refusedErr(`task code "taken" is taken by task 0190; choose another --code`)
	}
	if a.Code == "boom" {
		return nil, fmt.Errorf("open /secret/internal/path: disk on fire")
	}
	f.created = append(f.created, a)
	return &api.NewTaskResult{Task: api.TaskInfo{ID: "0190bbbb000070008000000000000009", Ref: a.Code, Branch: "lazy/" + a.Code, Parent: "main"}, Turn: api.Turn{Number: 1, Seq: 1},
		Warnings: []string{"your checkout has uncommitted changes (x.go)"}}, nil
}
func (f *formTasks) Cancel(_ context.Context, ref string) (*api.TaskInfo, error) {
	if ref != fakeID {
		return nil, store.ErrNotFound
	}
	return &api.TaskInfo{ID: fakeID, Branch: "lazy/fix-login", Status: "cancelled"}, nil
}
func (f *formTasks) Comment(_ context.Context, ref, body string) (*api.CommentResult, error) {
	if strings.TrimSpace(body) == "" {
		return nil, refusedErr("the comment is empty")
	}
	f.comments = append(f.comments, body)
	return &api.CommentResult{Comment: api.Comment{TaskID: fakeID, Body: body}, Triggered: &api.Turn{Number: 5, Seq: 3},
		Notice: review.MessageQueued("work turn 3", true, task.Blocked)}, nil
}

// watchingTasks also serves the task's event stream.
type watchingTasks struct{ *formTasks }

func (w watchingTasks) Watch(_ context.Context, a api.WatchArgs) (<-chan api.Event, func(), error) {
	if len(a.Tasks) != 1 || a.Tasks[0] != "fix-login" {
		return nil, nil, store.ErrNotFound
	}
	return w.events, func() {}, nil
}

func formServer(t *testing.T, tasks Tasks) http.Handler {
	t.Helper()
	e, err := New(Deps{Bearer: testBearer, DashboardToken: testDash, Call: pages(tasks, &fakeReview{}),
		Info: func() api.DaemonInfo { return api.DaemonInfo{Root: "/home/me/src/my-project"} }})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func taskList() []api.TaskInfo {
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	return []api.TaskInfo{
		{ID: "0190aaaa000070008000000000000010", Ref: "run-old", Status: "running", LastActivity: at(1)},
		{ID: fakeID, Ref: "fix-login", Status: "blocked", LastActivity: at(2), Title: "Fix the <login> loop"},
		{ID: "0190aaaa000070008000000000000011", Ref: "merged", Status: "accepted", LastActivity: at(9)},
		{ID: "0190aaaa000070008000000000000012", Ref: "dropped", Status: "cancelled", LastActivity: at(8)},
		{ID: "0190aaaa000070008000000000000013", Ref: "clash", Status: "conflict", LastActivity: at(3)},
		{ID: "0190aaaa000070008000000000000014", Ref: "broke", Status: "failed", LastActivity: at(1)},
		{ID: "0190aaaa000070008000000000000015", Ref: "run-new", Status: "running", LastActivity: at(5)},
	}
}

// refsIn lists the task refs of a Tasks page's table, in order.
func refsIn(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<td><a href="/tasks/[0-9a-f]+"><code>([^<]+)</code>`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestTasksPageFiltersAndOrder(t *testing.T) {
	h := formServer(t, &formTasks{list: taskList()})
	for _, c := range []struct {
		query string
		want  string
	}{
		{"", "clash fix-login broke run-new run-old"},
		{"?status=needs", "clash fix-login broke"},
		{"?status=running", "run-new run-old"},
		{"?status=ended", "merged dropped"},
		{"?status=blocked", "fix-login"},
		{"?status=blocked,cancelled", "fix-login dropped"},
		{"?status=all", "clash fix-login broke run-new run-old merged dropped"},
	} {
		rec := serve(t, h, "GET", "/"+c.query, "", "")
		body := rec.Body.String()
		if got := strings.Join(refsIn(body), " "); rec.Code != 200 || got != c.want {
			t.Errorf("GET /%s: %d, tasks %q, want %q", c.query, rec.Code, got, c.want)
		}
		hidden := strings.Contains(body, "2 ended tasks (accepted or cancelled) hidden")
		if hidden != (c.query == "") {
			t.Errorf("GET /%s: says ended tasks are hidden: %v", c.query, hidden)
		}
	}
	body := serve(t, h, "GET", "/?status=needs", "", "").Body.String()
	for _, want := range []string{`<a href="/?status=needs" class="current" aria-current="page">Needs you <span class="count">3</span>`,
		`Running <span class="count">2</span>`, `Ended <span class="count">2</span>`, `All <span class="count">7</span>`, `Not ended <span class="count">5</span>`,
		"Fix the &lt;login&gt; loop"} {
		if !strings.Contains(body, want) {
			t.Errorf("the filtered page lacks %s", want)
		}
	}
	// a status no tab names: the page says it shows only those
	if body := serve(t, h, "GET", "/?status=blocked", "", "").Body.String(); !strings.Contains(body, "Showing blocked tasks only.") {
		t.Errorf("a one-status filter does not say so:\n%s", body)
	}
	if body := serve(t, h, "GET", "/?status=needs", "", "").Body.String(); strings.Contains(body, "tasks only.") {
		t.Error("a tab's filter says it narrows")
	}
	rec := serve(t, h, "GET", "/?status=<done>", "", "")
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "no task status &#34;&lt;done&gt;&#34;") || !strings.Contains(rec.Body.String(), "needs, running, ended, all, blocked, conflict") {
		t.Errorf("an unknown status: %d %s", rec.Code, rec.Body)
	}
}

func TestPagesNameTheProject(t *testing.T) {
	h := formServer(t, &formTasks{list: taskList()})
	for _, p := range []string{"/", "/tasks/fix-login", "/review"} {
		body := serve(t, h, "GET", p, "", "").Body.String()
		if !regexp.MustCompile(`<title>[^<]* · my-project · lazy</title>`).MatchString(body) ||
			!strings.Contains(body, `<a class="project" href="/" title="/home/me/src/my-project">my-project</a>`) {
			t.Errorf("GET %s does not name the project in its title and header:\n%.600s", p, body)
		}
	}
}

func TestTaskPageShowsResultText(t *testing.T) {
	h := formServer(t, &formTasks{list: taskList()})
	body := serve(t, h, "GET", "/tasks/fix-login", "", "").Body.String()
	if !strings.Contains(body, `<div class="answer result">Wrote &lt;b&gt;a.go&lt;/b&gt;.</div>`) {
		t.Errorf("the result is not shown as escaped text:\n%s", body)
	}
	// the turn's transcript: text, tool calls, the client's results and the
	// files it wrote, all escaped
	for _, want := range []string{`<pre class="call-text">I will &lt;write&gt; it</pre>`, `<code class="tool-name">Write</code> returned<pre class="tool-output">wrote &lt;script&gt;x&lt;/script&gt;</pre>`,
		`<div class="tool-result tool-error"><code class="tool-name">Bash</code> failed`, `<p class="written">Files written: <span class="written-files"> <code class="file">&lt;a&gt;.go</code>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the transcript lacks %s", want)
		}
	}
	// the raw JSON only behind a closed disclosure
	raw := regexp.MustCompile(`(?s)<details id="turn-1-output" class="raw-output"><summary>Raw client output</summary><pre>\{&#34;type&#34;.*?</pre></details>`)
	if !raw.MatchString(body) || strings.Count(body, "session_id") != 1 {
		t.Errorf("the raw output is not (only) behind a disclosure:\n%s", body)
	}
	for _, want := range []string{`<dd class="now" id="task-now">work turn 2 queued (unblock)`, `<script src="/assets/task.js" defer>`, `data-task="` + fakeID + `"`,
		`action="/tasks/` + fakeID + `/comment"`, `action="/tasks/` + fakeID + `/cancel"`, "Do &lt;it&gt;"} {
		if !strings.Contains(body, want) {
			t.Errorf("the task page lacks %s", want)
		}
	}
	// an ended task: no forms, no script
	ended := taskList()
	ended[1].Status = "accepted"
	body = serve(t, formServer(t, &formTasks{list: ended}), "GET", "/tasks/fix-login", "", "").Body.String()
	if strings.Contains(body, "<form") || strings.Contains(body, "task.js") || !strings.Contains(body, `data-ended="1"`) {
		t.Errorf("an ended task's page offers forms or follows events:\n%s", body)
	}
}

func TestTaskFormsPostRedirectGet(t *testing.T) {
	f := &formTasks{list: taskList()}
	h := formServer(t, f)
	ck := login(t, h)
	csrf := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(run(h, request("GET", "/", "", nil, ck)).Body.String())
	if csrf == nil {
		t.Fatal("the Tasks page's new task form carries no form token")
	}
	post := func(path string, v url.Values, ck *http.Cookie, hdr map[string]string) (int, string) {
		t.Helper()
		if hdr == nil {
			hdr = map[string]string{}
		}
		hdr["Content-Type"] = "application/x-www-form-urlencoded"
		rec := run(h, request("POST", path, v.Encode(), hdr, ck))
		return rec.Code, rec.Header().Get("Location")
	}
	follow := func(loc string, ck *http.Cookie) string {
		t.Helper()
		rec := run(h, request("GET", loc, "", nil, ck))
		if rec.Code != 200 {
			t.Fatalf("GET %s: %d %s", loc, rec.Code, rec.Body)
		}
		return rec.Body.String()
	}

	// a new task: 303 to its page, whose notice says what was made
	code, loc := post("/tasks", url.Values{"csrf": {csrf[1]}, "prompt": {"Fix <it>"}, "code": {" fx "}}, ck, nil)
	if code != http.StatusSeeOther || !strings.HasPrefix(loc, "/tasks/0190bbbb000070008000000000000009?flash=") {
		t.Fatalf("new task: %d %q", code, loc)
	}
	if len(f.created) != 1 || f.created[0].Prompt != "Fix <it>" || f.created[0].Code != "fx" {
		t.Errorf("taskNew got %+v", f.created)
	}
	// (the fake's ShowTask does not know the new id: look at the notice on the Tasks page instead)
	id := strings.TrimPrefix(loc[strings.Index(loc, "?"):], "?flash=")
	if body := follow("/?flash="+id, ck); !strings.Contains(body, "Task fx created on branch lazy/fx from main: work turn 1 is queued. Note: your checkout has uncommitted changes (x.go)") {
		t.Errorf("the notice after a new task:\n%s", body)
	}
	// another session does not see that flash
	if body := follow("/?flash="+id, login(t, h)); strings.Contains(body, "Task fx created") {
		t.Error("another session sees this session's notice")
	}

	// refused: back on the Tasks page with the reason and what was typed
	code, loc = post("/tasks", url.Values{"csrf": {csrf[1]}, "prompt": {"Keep <this> text"}, "code": {"taken"}, "parent": {"dev"}}, ck, nil)
	if code != http.StatusSeeOther || !strings.HasPrefix(loc, "/?flash=") {
		t.Fatalf("refused new task: %d %q", code, loc)
	}
	body := follow(loc, ck)
	for _, want := range []string{`<p class="notice notice-alert" role="alert">Task not created: task code &#34;taken&#34; is taken`,
		`<details class="new-task" open>`, `>Keep &lt;this&gt; text</textarea>`, `name="code" value="taken"`, `name="parent" value="dev"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the refused form's page lacks %s", want)
		}
	}
	// a failure says where to look, never its internal text
	// (an error page, with what was typed kept: nothing to go back to)
	rec := run(h, request("POST", "/tasks", url.Values{"csrf": {csrf[1]}, "prompt": {"keep me"}, "code": {"boom"}}.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, ck))
	if body := rec.Body.String(); rec.Code != http.StatusInternalServerError || strings.Contains(body, "disk on fire") || !strings.Contains(body, "keep me") || !strings.Contains(body, "<html") {
		t.Errorf("a failed new task: %d\n%s", rec.Code, body)
	}

	// a message, then an empty one (refused, on the task page)
	code, loc = post("/tasks/fix-login/comment", url.Values{"csrf": {csrf[1]}, "body": {"Also <this>."}}, ck, nil)
	if code != http.StatusSeeOther || !strings.HasPrefix(loc, "/tasks/"+fakeID+"?flash=") || len(f.comments) != 1 || f.comments[0] != "Also <this>." {
		t.Fatalf("message: %d %q %q", code, loc, f.comments)
	}
	if body := follow(loc, ck); !strings.Contains(body, "Message queued: delivered with the next work turn (work turn 3, queued now).") {
		t.Errorf("after a message:\n%s", body)
	}
	_, loc = post("/tasks/fix-login/comment", url.Values{"csrf": {csrf[1]}, "body": {"   "}}, ck, nil)
	if body := follow(loc, ck); !strings.Contains(body, "Message not sent: the comment is empty") || !strings.Contains(body, `name="body" rows="3" required>   </textarea>`) {
		t.Errorf("a refused message's page:\n%s", body)
	}

	// cancel
	code, loc = post("/tasks/"+fakeID+"/cancel", url.Values{"csrf": {csrf[1]}}, ck, nil)
	if code != http.StatusSeeOther || !strings.Contains(follow(loc, ck), "Cancelled: the task has ended and nothing was merged; its branch lazy/fix-login stays.") {
		t.Errorf("cancel: %d %q", code, loc)
	}
	code, loc = post("/tasks/nope/cancel", url.Values{"csrf": {csrf[1]}}, ck, nil)
	if code != http.StatusNotFound || loc != "" {
		t.Errorf("cancel of an unknown task: %d %q", code, loc)
	}

	// the same rules as every form
	before := len(f.created)
	for name, c := range map[string]struct {
		ck   *http.Cookie
		v    url.Values
		hdr  map[string]string
		want int
	}{
		"no login":          {nil, url.Values{"prompt": {"x"}}, nil, http.StatusUnauthorized},
		"no form token":     {ck, url.Values{"prompt": {"x"}}, nil, http.StatusForbidden},
		"cross-site":        {ck, url.Values{"csrf": {csrf[1]}, "prompt": {"x"}}, map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		"another origin":    {ck, url.Values{"csrf": {csrf[1]}, "prompt": {"x"}}, map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		"bearer cross-site": {nil, url.Values{"prompt": {"x"}}, map[string]string{"Authorization": "Bearer " + testBearer, "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
	} {
		for _, path := range []string{"/tasks", "/tasks/fix-login/comment", "/tasks/fix-login/cancel"} {
			if code, _ := post(path, c.v, c.ck, c.hdr); code != c.want {
				t.Errorf("%s: POST %s: %d, want %d", name, path, code, c.want)
			}
		}
	}
	if len(f.created) != before || len(f.comments) != 1 {
		t.Errorf("a refused request reached a command: %d tasks, %d comments", len(f.created), len(f.comments))
	}
	// a bearer (the CLI's token) posts without a form token
	if code, _ := post("/tasks", url.Values{"prompt": {"x"}, "code": {"cli"}}, nil, map[string]string{"Authorization": "Bearer " + testBearer}); code != http.StatusSeeOther {
		t.Errorf("bearer: %d", code)
	}
}

// httptestServer serves h on a loopback port (a stream needs a real one).
func httptestServer(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestTaskEventsStream(t *testing.T) {
	// without a stream (the dev server): 501, and the page polls
	rec := serve(t, formServer(t, &formTasks{list: taskList()}), "GET", "/api/tasks/fix-login/events", "", "")
	if rec.Code != http.StatusNotImplemented {
		t.Errorf("events without a stream: %d", rec.Code)
	}
	f := &formTasks{list: taskList(), events: make(chan api.Event, 2)}
	h := formServer(t, watchingTasks{f})
	if rec := run(h, request("GET", "/api/tasks/fix-login/events", "", nil, nil)); rec.Code != http.StatusUnauthorized {
		t.Errorf("events without a login: %d", rec.Code)
	}
	if rec := serve(t, h, "GET", "/api/tasks/unknown/events", "", ""); rec.Code != http.StatusNotFound {
		t.Errorf("events of an unknown task: %d", rec.Code)
	}
	srv := httptestServer(t, h)
	f.events <- api.Event{Kind: "status", TaskID: fakeID, Status: "running"}
	req, _ := http.NewRequest("GET", srv+"/api/tasks/fix-login/events", nil)
	req.Header.Set("Authorization", "Bearer "+testBearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("content type %q", resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "data: ") {
			if !strings.Contains(l, `"kind":"status"`) || !strings.Contains(l, `"status":"running"`) {
				t.Errorf("event line %q", l)
			}
			return
		}
	}
	t.Fatalf("the stream ended without an event: %v", sc.Err())
}
