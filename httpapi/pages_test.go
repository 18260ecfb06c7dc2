package httpapi

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"lazy/actors"
	"lazy/api"
	"lazy/gitx"
	"lazy/review"
	"lazy/store"
	"lazy/views"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const fakeID = "0190aaaa000070008000000000000001"

// fakeReview serves fixed data; the handler is what is under test.
type fakeReview struct {
	diff     []gitx.File
	merge    *api.MergeReadiness
	payload  review.Payload
	acceptFn func(api.AcceptArgs) (*api.TaskInfo, error)
	posted   []api.PostCommentArgs
	// ended, when set, makes the task an ended one (its fields over the
	// blocked task's)
	ended func(*api.TaskInfo)
}

func (f *fakeReview) task() api.TaskInfo {
	t := api.TaskInfo{ID: fakeID, ShortID: fakeID[:8], Code: "fix-login", Ref: "fix-login", Title: "Fix the <login> loop", Status: "blocked", Branch: "lazy/fix-login", Parent: "main", Turns: 2, LastActivity: t0}
	if f.ended != nil {
		f.ended(&t)
	}
	return t
}
func (f *fakeReview) Queue(context.Context) ([]api.QueueItem, error) {
	return []api.QueueItem{{Task: api.QueueTask{ID: fakeID, ShortID: fakeID[:8], Code: "fix-login", Title: "Fix the <login> loop"}, Status: "blocked", LiveSession: true, AwaitingAnswer: 1, PendingAsks: 1, QueuedComments: 2}}, nil
}
func (f *fakeReview) Diff(_ context.Context, ref string, o api.DiffOptions) (*api.DiffResult, error) {
	if ref != fakeID && ref != "fix-login" {
		return nil, store.ErrNotFound
	}
	t1, t2 := t0.Add(-time.Hour), t0.Add(-50*time.Minute)
	return &api.DiffResult{Task: f.task(), Files: f.diff, Merge: f.merge, Full: o.Full,
		Summary: "Sent users <home> after login.\nChecked the flow.",
		Commits: []api.CommitInfo{{SHA: "abcdef0123456789", Subject: "Rework <login>", Author: "agent <a@b>", Time: t1.Add(time.Minute)}},
		Turns:   []api.TurnRef{{Number: 2, Status: "done", StartedAt: &t1, EndedAt: &t2}},
		Network: &api.Network{
			Destinations: []api.NetDest{{Dest: "registry.test:8443", Connections: 7, BytesUp: 4200, BytesDown: 3 << 20, Last: t2},
				{Dest: "mirror.test:80", Connections: 2, Failed: 1, BytesUp: 300, BytesDown: 900, Last: t2}},
			Refusals: []api.NetRefusal{{At: t1, Method: "CONNECT", Dest: "elsewhere.example:443", Path: "elsewhere.example:443", Cause: "egress_not_allowed"},
				{At: t2, Method: "GET", Dest: "sneaky.test:80", Path: "http://sneaky.test:80/<script>alert(1)</script>", Cause: "egress_private_address"}}}}, nil
}
func (f *fakeReview) Comments(context.Context, string) (*review.Payload, error) {
	return &f.payload, nil
}
func (f *fakeReview) PostComment(_ context.Context, ref string, a api.PostCommentArgs) (*review.ReviewComment, error) {
	if ref == "nosuch" {
		return nil, store.ErrNotFound
	}
	f.posted = append(f.posted, a)
	return &review.ReviewComment{ID: "new", TaskID: fakeID, File: a.File, Line: a.Line, Side: review.Side(a.Side), Intent: review.Intent(a.Intent), Body: a.Body, AskState: review.AskPending}, nil
}
func (f *fakeReview) RetryAsk(context.Context, string, string) (*api.ActionResult, error) {
	return nil, &review.RuleError{Reason: "This is a comment, not a question."}
}
func (f *fakeReview) Withdraw(context.Context, string, string) (*api.ActionResult, error) {
	return &api.ActionResult{Notice: "Withdrawn."}, nil
}
func (f *fakeReview) Unblock(_ context.Context, ref, _ string) (*api.Turn, error) {
	if ref == "nosuch" {
		return nil, store.ErrNotFound
	}
	if f.ended != nil {
		return nil, fmt.Errorf("task fix-login is %s: %w; start a new task instead", f.task().Status, actors.ErrEnded)
	}
	return &api.Turn{TaskID: fakeID, Number: 3, Seq: 3}, nil
}
func (f *fakeReview) Accept(_ context.Context, _ string, a api.AcceptArgs) (*api.TaskInfo, error) {
	return f.acceptFn(a)
}
func (f *fakeReview) Sync(context.Context, string, bool) (*api.SyncResult, error) {
	return &api.SyncResult{Queued: true}, nil
}
func (f *fakeReview) ViolationDecision(context.Context, string, string, []string) error { return nil }
func (f *fakeReview) Approve(context.Context, string, []string, string) error           { return nil }

type fakeTasks struct{ Tasks }

// ListTasks: one blocked task, one failed, one running with failing model
// calls (all three for Needs attention) and one running fine.
func (fakeTasks) ListTasks(context.Context) ([]api.TaskInfo, error) {
	return []api.TaskInfo{
		{ID: fakeID, Ref: "fix-login", Status: "blocked"},
		{ID: "0190aaaa000070008000000000000002", Ref: "broken", Status: "failed", Title: "Break <things>",
			FailReason: "work turn 1 failed: the agent exited with status 1", ModelError: "model upstream unreachable: <no such host>"},
		{ID: "0190aaaa000070008000000000000003", Ref: "stuck", Status: "running", Title: "Keep going",
			ModelError: "model upstream unreachable: dial tcp: connection refused (3 calls failed since 10:00:00)"},
		{ID: "0190aaaa000070008000000000000004", Ref: "fine", Status: "running", Title: "Working fine"},
	}, nil
}

func (fakeTasks) ShowTask(_ context.Context, ref string) (*api.TaskDetail, error) {
	if ref != fakeID && ref != "fix-login" {
		return nil, store.ErrNotFound
	}
	return &api.TaskDetail{Task: api.TaskInfo{ID: fakeID, Ref: "fix-login", Status: "running", Parent: "main", LastActivity: t0}}, nil
}

func (fakeTasks) CommitDiff(context.Context, string) (*api.CommitDiff, error) {
	return &api.CommitDiff{CommitInfo: api.CommitInfo{SHA: "abcdef0123456789", Subject: "Rework <login>", Author: "agent"}, Files: fixtureDiff()}, nil
}
func (fakeTasks) Actors(context.Context) ([]api.ActorHealth, error) { return nil, nil }

func fixtureDiff() []gitx.File {
	d, err := gitx.ParseDiff([]byte(`diff --git a/login.go b/login.go
--- a/login.go
+++ b/login.go
@@ -1,5 +1,6 @@ package login
 package login
 
-func redirect() string { return "/login" }
-func check() bool { return false }
+func redirect() string { return "/home" }
+func check() bool { return true }
+// <script>alert(1)</script>
 func done() {}
diff --git a/old.txt b/old.txt
deleted file mode 100644
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-gone
`))
	if err != nil {
		panic(err)
	}
	return d.Files
}

func fixturePayload() review.Payload {
	c := func(id, thread string, line int, side review.Side, intent review.Intent, body, actor string, mod func(*review.ReviewComment)) review.ReviewComment {
		m := review.ReviewComment{ID: id, TaskID: fakeID, ThreadID: thread, File: "login.go", Line: line, Side: side, Intent: intent, Body: body, Actor: actor, CreatedAt: t0}
		mod(&m)
		return m
	}
	all := []review.ReviewComment{
		c("a1", "t1", 3, review.New, review.Ask, "Why /home? <b>bold?</b>", review.Human, func(m *review.ReviewComment) { m.AskState = review.AskAnswered }),
		c("r1", "t1", 3, review.New, review.Ask, "Because the dashboard lives there.", review.Agent, func(m *review.ReviewComment) {}),
		c("c1", "t2", 4, review.Old, review.Comment, "Keep the old check as a fallback.", review.Human, func(m *review.ReviewComment) { m.DeliveryState = review.PendingDelivery }),
		c("a2", "t3", 5, review.New, review.Ask, "Is this needed?", review.Human, func(m *review.ReviewComment) {
			m.AskState, m.AskError = review.AskFailed, "The worktree is busy (409 from the ask launcher): sync holds its lock. Re-send when it is free."
		}),
		c("w1", "t3", 5, review.New, review.Comment, "withdrawn words", review.Human, func(m *review.ReviewComment) {
			m.DeliveryState = review.PendingDelivery
			w := t0
			m.WithdrawnAt = &w
		}),
		c("o1", "t4", 40, review.New, review.Comment, "An orphan note", review.Human, func(m *review.ReviewComment) { m.DeliveryState = review.Delivered; m.DeliveredTurn = 2 }),
	}
	files := fixtureDiff()
	inDiff := func(file string, side review.Side, line int) bool {
		_, ok := (&gitx.Diff{Files: files}).Find(file, string(side), line)
		return ok
	}
	return review.BuildPayload(all, inDiff, review.StatusBar{Status: "blocked", Turns: 2, LastActivity: t0, CanAnswer: true})
}

func newPagesServer(t *testing.T) (*fakeReview, http.Handler) { return newPagesServerF(t) }

func newPagesServerF(t testing.TB) (*fakeReview, http.Handler) {
	f := &fakeReview{diff: fixtureDiff(), payload: fixturePayload(), merge: &api.MergeReadiness{MergeCheck: api.MergeCheck{Clean: true, Ahead: 1}, Protected: []string{".github/<ci>.yml"}}, acceptFn: func(api.AcceptArgs) (*api.TaskInfo, error) {
		return nil, review.Refuse(review.ReasonPassphraseRequired, "fix-login", "main", "looks right", []string{".github/ci.yml"})
	}}
	e, err := New(Deps{Bearer: testBearer, DashboardToken: testDash, Call: pages(fakeTasks{}, f)})
	if err != nil {
		t.Fatal(err)
	}
	return f, e
}

func serve(t *testing.T, h http.Handler, method, path, ctype, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Host = "127.0.0.1:26000"
	req.Header.Set("Authorization", "Bearer "+testBearer)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./httpapi -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s (run go test ./httpapi -update after checking the change)", name, path)
	}
}

func TestGoldenPages(t *testing.T) {
	_, h := newPagesServer(t)
	for _, tc := range []struct{ name, path string }{
		{"queue", "/review"},
		{"review", "/review/fix-login"},
		{"review-comment-open", "/review/" + fakeID + "?comment=l-login.go-new-3"},
		{"commit", "/commits/abcdef0123456789"},
	} {
		rec := serve(t, h, "GET", tc.path, "", "")
		if rec.Code != 200 {
			t.Fatalf("%s: %d %s", tc.path, rec.Code, rec.Body)
		}
		golden(t, tc.name, rec.Body.Bytes())
	}
	rec := serve(t, h, "POST", "/review/fix-login/accept", "application/x-www-form-urlencoded", url.Values{"reason": {"looks right"}, "draft_feedback": {"my <draft>"}, "head": {"abc123"}}.Encode())
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("refused accept: %d", rec.Code)
	}
	golden(t, "review-remedy", follow(t, h, rec).Body.Bytes())
}

// follow is the GET a 303 sends the browser to (with the same bearer).
func follow(t *testing.T, h http.Handler, rec *httptest.ResponseRecorder) *httptest.ResponseRecorder {
	t.Helper()
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("want 303 to a page, got %d %s", rec.Code, rec.Body)
	}
	loc := rec.Header().Get("Location")
	path, _, _ := strings.Cut(loc, "#")
	got := serve(t, h, "GET", path, "", "")
	if got.Code != http.StatusOK {
		t.Fatalf("GET %s after the POST: %d %s", loc, got.Code, got.Body)
	}
	return got
}

func TestReviewPageStructure(t *testing.T) {
	_, h := newPagesServer(t)
	page := serve(t, h, "GET", "/review/fix-login", "", "").Body.String()
	for _, want := range []string{
		`data-file="login.go" data-side="old" data-line="3"`, `id="l-login.go-old-3"`, `id="l-login.go-new-5"`,
		`data-rv-pair="f0-h0-p2" data-rv-pane="old"`, `data-rv-pair="f0-h0-p2" data-rv-pane="new"`, `data-rv-pair="f0-h0-p4" data-rv-pane="new"`,
		`data-rv-pane="both"`, `<del class="body">withdrawn words</del>`, `Re-send to agent`, `An orphan note`, `Originally on <code>login.go</code> line 40`,
		`&lt;script&gt;alert(1)&lt;/script&gt;`, `Why /home? &lt;b&gt;bold?&lt;/b&gt;`, `Fix the &lt;login&gt; loop`,
		`action="/review/` + fakeID + `/unblock"`, `href="#l-login.go-old-4"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("review page lacks %s", want)
		}
	}
	if strings.Count(page, `<section class="actions">`) != 2 {
		t.Error("the action blocks must render twice")
	}
	actions := page[strings.Index(page, `<section class="actions">`):]
	actions = actions[:strings.Index(actions, "</section>")]
	if strings.Contains(actions, ` id="`) {
		t.Error("an action block carries an element id")
	}
	if strings.Contains(page, "<script>alert") || strings.Contains(page, "<b>bold") {
		t.Error("unescaped user or agent text")
	}
}

func TestReviewForms(t *testing.T) {
	f, h := newPagesServer(t)
	// the comment POST: JSON → 201; form → 303 back to the line
	rec := serve(t, h, "POST", "/review/fix-login/comment", "application/json", `{"body":"why?","file":"login.go","line":3,"side":"new","intent":"ask"}`)
	if rec.Code != http.StatusCreated || !strings.Contains(rec.Body.String(), `"ask_state":"pending"`) {
		t.Fatalf("JSON comment: %d %s", rec.Code, rec.Body)
	}
	rec = serve(t, h, "POST", "/review/fix-login/comment", "application/x-www-form-urlencoded", "body=note&file=login.go&line=4&side=old&intent=comment")
	if rec.Code != http.StatusSeeOther || !strings.HasSuffix(rec.Header().Get("Location"), "#l-login.go-old-4") {
		t.Fatalf("form comment: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	if len(f.posted) != 2 || f.posted[1].Line != 4 || f.posted[1].Side != "old" {
		t.Errorf("posted: %+v", f.posted)
	}
	if rec := serve(t, h, "POST", "/review/fix-login/comment", "application/json", `{"body":`); rec.Code != 400 {
		t.Errorf("bad JSON: %d", rec.Code)
	}
	// retry refused by a rule: 303 with the rule's words as the notice
	rec = serve(t, h, "POST", "/review/fix-login/comment/c1/retry", "application/x-www-form-urlencoded", "")
	if loc := rec.Header().Get("Location"); rec.Code != 303 || !strings.HasPrefix(loc, "/review/fix-login?flash=") || !strings.Contains(follow(t, h, rec).Body.String(), "This is a comment, not a question.") {
		t.Errorf("retry: %d %s", rec.Code, loc)
	}
	rec = serve(t, h, "POST", "/review/fix-login/comment/c1/withdraw", "application/x-www-form-urlencoded", "")
	if rec.Code != 303 {
		t.Errorf("withdraw: %d", rec.Code)
	}
	rec = serve(t, h, "POST", "/review/fix-login/unblock", "application/x-www-form-urlencoded", "feedback=go")
	if rec.Code != 303 || !strings.HasPrefix(rec.Header().Get("Location"), "/tasks/"+fakeID) {
		t.Errorf("unblock: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	// a refused accept keeps the typed reason and feedback, and never echoes a passphrase
	rec = serve(t, h, "POST", "/review/fix-login/accept", "application/x-www-form-urlencoded", url.Values{"draft_reason": {"my reason"}, "draft_feedback": {"my feedback"}, "passphrase": {"SECRET-PASS"}, "head": {"abc123"}}.Encode())
	body := follow(t, h, rec).Body.String()
	if !strings.Contains(body, `name="draft_reason" value="my reason"`) || !strings.Contains(body, ">my feedback</textarea>") || strings.Contains(body, "SECRET-PASS") {
		t.Errorf("refused accept lost input or echoed the passphrase")
	}
	// an unknown remedy reason degrades to no panel, the message still shown
	f.acceptFn = func(api.AcceptArgs) (*api.TaskInfo, error) {
		return nil, &review.Refusal{Message: "Something odd happened.", Remedy: &review.Remedy{Reason: "martian", Next: "x"}}
	}
	body = follow(t, h, serve(t, h, "POST", "/review/fix-login/accept", "application/x-www-form-urlencoded", "reason=r&head=abc123")).Body.String()
	if !strings.Contains(body, "Something odd happened.") || strings.Contains(body, `class="remedy"`) {
		t.Error("an unmapped reason must show the message without a panel")
	}
	var got api.AcceptArgs
	f.acceptFn = func(a api.AcceptArgs) (*api.TaskInfo, error) {
		got = a
		return &api.TaskInfo{ID: fakeID, Parent: "main"}, nil
	}
	if rec := serve(t, h, "POST", "/review/fix-login/accept", "application/x-www-form-urlencoded", "reason=r&head=abc123"); rec.Code != 303 || got.Head != "abc123" {
		t.Errorf("accept: %d, head sent %q", rec.Code, got.Head)
	}
	// a form that names no head (an older page) decides nothing
	got = api.AcceptArgs{}
	if rec := serve(t, h, "POST", "/review/fix-login/accept", "application/x-www-form-urlencoded", "reason=r"); rec.Code != 303 || got.Reason != "" || !strings.Contains(follow(t, h, rec).Body.String(), "which commit you reviewed") {
		t.Errorf("accept without a head: %d (accept called: %v)", rec.Code, got.Reason != "")
	}
	// head_moved: the new commits listed, the way back to review them
	f.acceptFn = func(api.AcceptArgs) (*api.TaskInfo, error) {
		return nil, review.HeadMoved("fix-login", "abc123", "def456", "looks good", []string{"def4567 add backdoor.sh"})
	}
	body = follow(t, h, serve(t, h, "POST", "/review/fix-login/accept", "application/x-www-form-urlencoded", "reason=r&head=abc123")).Body.String()
	if !strings.Contains(body, "moved since you reviewed it") || !strings.Contains(body, "<code>def4567 add backdoor.sh</code>") || !strings.Contains(body, `class="review-new"`) {
		t.Errorf("head_moved page lacks the new commits or the way to review them")
	}
	if rec := serve(t, h, "POST", "/review/fix-login/accept", "application/x-www-form-urlencoded", ""); rec.Code != 303 || !strings.Contains(follow(t, h, rec).Body.String(), "say why you accept") {
		t.Errorf("accept without a reason: %d", rec.Code)
	}
	if rec := serve(t, h, "GET", "/review/nosuch", "", ""); rec.Code != 404 {
		t.Errorf("unknown task: %d", rec.Code)
	}
	if rec := serve(t, h, "GET", "/api/review/fix-login/threads", "", ""); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"pendingDelivery":1`) {
		t.Errorf("threads JSON: %d %s", rec.Code, rec.Body)
	}

}

// BenchmarkRenderLargeReview renders a 5,000-changed-line diff over 100
// files with 200 threads, the way GET /review/:task does.
func BenchmarkRenderLargeReview(b *testing.B) {
	var sb strings.Builder
	for f := 0; f < 100; f++ {
		name := "pkg/file" + itoa(f) + ".go"
		sb.WriteString("diff --git a/" + name + " b/" + name + "\n--- a/" + name + "\n+++ b/" + name + "\n@@ -1,25 +1,25 @@\n")
		for l := 0; l < 25; l++ {
			sb.WriteString("-old line " + itoa(l) + " of <file> " + itoa(f) + "\n")
		}
		for l := 0; l < 25; l++ {
			sb.WriteString("+new line " + itoa(l) + " of <file> " + itoa(f) + "\n")
		}
	}
	d, err := gitx.ParseDiff([]byte(sb.String()))
	if err != nil {
		b.Fatal(err)
	}
	var all []review.ReviewComment
	for i := 0; i < 200; i++ {
		th := "t" + itoa(i)
		all = append(all, review.ReviewComment{ID: "q" + itoa(i), TaskID: fakeID, ThreadID: th, File: "pkg/file" + itoa(i%100) + ".go", Line: 1 + i%25, Side: review.New,
			Intent: review.Ask, Body: "Why is this <so>?", Actor: review.Human, AskState: review.AskAnswered, CreatedAt: t0},
			review.ReviewComment{ID: "r" + itoa(i), TaskID: fakeID, ThreadID: th, File: "pkg/file" + itoa(i%100) + ".go", Line: 1 + i%25, Side: review.New,
				Intent: review.Ask, Body: "Because.", Actor: review.Agent, CreatedAt: t0})
	}
	inDiff := func(file string, side review.Side, line int) bool {
		_, ok := d.Find(file, string(side), line)
		return ok
	}
	f := &fakeReview{diff: d.Files, payload: review.BuildPayload(all, inDiff, review.StatusBar{Status: "blocked"})}
	e, err := New(Deps{Bearer: testBearer, DashboardToken: testDash, Call: pages(fakeTasks{}, f)})
	if err != nil {
		b.Fatal(err)
	}
	var size int
	b.Run("page", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			rec := serve(nil, e, "GET", "/review/fix-login", "", "")
			if rec.Code != 200 {
				b.Fatal(rec.Code)
			}
			size = rec.Body.Len()
		}
		b.ReportMetric(float64(size)/1024, "KiB/page")
	})
	b.Run("page-cold", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			views.ForgetHighlights()
			rec := serve(nil, e, "GET", "/review/fix-login", "", "")
			if rec.Code != 200 {
				b.Fatal(rec.Code)
			}
		}
	})
	b.Run("threads-json", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			rec := serve(nil, e, "GET", "/api/review/fix-login/threads", "", "")
			if rec.Code != 200 {
				b.Fatal(rec.Code)
			}
		}
	})
	b.Run("threads-payload-build", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_ = review.BuildPayload(all, inDiff, review.StatusBar{})
		}
	})
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestRawFileRoute: where the review actions cannot stream a file (the dev
// server's RPC client) the raw route says where to go; with no path it says
// what to give.
func TestRawFileRoute(t *testing.T) {
	_, h := newPagesServer(t)
	if rec := serve(t, h, http.MethodGet, "/review/fix-login/raw?path=a.go", "", ""); rec.Code != http.StatusNotImplemented || !strings.Contains(rec.Body.String(), "lazy open") {
		t.Errorf("raw without RawFiles: got %d %q, want 501 naming lazy open", rec.Code, rec.Body.String())
	}
}

// endedFixture makes the fake's task accepted (merged from base to head) or
// cancelled (left at head, base where it left main).
func endedFixture(status string) func(*api.TaskInfo) {
	return func(t *api.TaskInfo) {
		at := t0.Add(time.Hour)
		t.Status, t.EndedAt = status, &at
		t.EndBase, t.EndHead = "1234567890abcdef1234567890abcdef12345678", "abcdef0123456789abcdef0123456789abcdef01"
	}
}

// TestEndedReviewPage: an accepted or cancelled task's page is its record:
// what went in (or was left), the commits and the threads, with the page
// contract kept, and no form or button that acts.
func TestEndedReviewPage(t *testing.T) {
	for _, tc := range []struct{ status, golden, says string }{
		{"accepted", "review-accepted", `<b>Accepted</b> into <code>main</code> at <a href="/commits/abcdef0123456789abcdef0123456789abcdef01"><code>abcdef0123</code></a>`},
		{"cancelled", "review-cancelled", `What was left on <code>lazy/fix-login</code> at <a href="/commits/abcdef0123456789abcdef0123456789abcdef01"><code>abcdef0123</code></a>, against <code>main</code> as it was (<code>1234567890</code>)`},
	} {
		t.Run(tc.status, func(t *testing.T) {
			f, h := newPagesServer(t)
			f.ended, f.merge = endedFixture(tc.status), nil
			rec := serve(t, h, "GET", "/review/fix-login", "", "")
			if rec.Code != 200 {
				t.Fatalf("GET: %d %s", rec.Code, rec.Body)
			}
			page := rec.Body.String()
			golden(t, tc.golden, rec.Body.Bytes())
			for _, want := range []string{
				tc.says, `<nav class="file-nav"`, `data-file="login.go" data-side="old" data-line="3"`, `id="l-login.go-new-5"`, `<ins>`, `<del>`,
				`Why /home? &lt;b&gt;bold?&lt;/b&gt;`, `Because the dashboard lives there.`, `An orphan note`, `&lt;script&gt;alert(1)&lt;/script&gt;`,
				`<code>abcdef0123</code></a> <span class="subject">Rework &lt;login&gt;</span>`, `Comments never delivered (1)`, `Keep the old check as a fallback.`,
			} {
				if !strings.Contains(page, want) {
					t.Errorf("the %s page lacks %s", tc.status, want)
				}
			}
			for _, banned := range []string{"<form", "<textarea", `type="submit"`, "comment-link", "comment-form-tpl", "Re-send to agent", ">Withdraw<",
				"Unblock", "Accept and merge", "Sync with parent", "accept-open", "ask-warning", "No changes against the parent branch yet", "<script>alert"} {
				if strings.Contains(page, banned) {
					t.Errorf("the %s page offers or shows %q", tc.status, banned)
				}
			}
			// a file loaded into the page later is read-only too
			frag := serve(t, h, "GET", "/review/fix-login/file?path=login.go", "", "").Body.String()
			if !strings.Contains(frag, `data-line="3"`) || strings.Contains(frag, "comment-link") || strings.Contains(frag, "<form") {
				t.Errorf("the %s task's file fragment is not read-only:\n%s", tc.status, frag)
			}
			// a form posted all the same is refused, said on the page, which stays read-only
			rec = serve(t, h, "POST", "/review/fix-login/unblock", "application/x-www-form-urlencoded", "feedback=more")
			if body := follow(t, h, rec).Body.String(); !strings.Contains(body, "Not unblocked: task fix-login is "+tc.status) || strings.Contains(body, "<form") || !strings.Contains(body, ">more</pre>") {
				t.Errorf("unblock of a %s task: want the page saying why, no form, the typed text kept to copy:\n%s", tc.status, body)
			}
		})
	}
	// an accepted task from before lazy kept its commits says so rather than "no changes yet"
	f, h := newPagesServer(t)
	f.ended, f.merge, f.diff = func(t *api.TaskInfo) { t.Status = "accepted" }, nil, nil
	page := serve(t, h, "GET", "/review/fix-login", "", "").Body.String()
	if !strings.Contains(page, "This task was accepted before lazy kept the commits it merged") || strings.Contains(page, "No changes against the parent branch yet") || strings.Contains(page, "<form") {
		t.Errorf("an accepted task without its commits kept:\n%s", page)
	}
}

// TestBlockersApartFromMergeState: a change that merges cleanly but touches
// a protected file shows the green merge state, and the blocker in a box of
// its own beside it, never inside the green one.
func TestBlockersApartFromMergeState(t *testing.T) {
	_, h := newPagesServer(t)
	rec := serve(t, h, "GET", "/review/fix-login", "", "")
	page := rec.Body.String()
	start := strings.Index(page, `<div class="merge-panel merge-clean">`)
	if start < 0 {
		t.Fatalf("no green merge panel on the page")
	}
	panel := page[start:]
	panel = panel[:strings.Index(panel, "</div>")]
	if strings.Contains(panel, "Protected") {
		t.Errorf("the protected file sits inside the green merge state: %s", panel)
	}
	b := strings.Index(page, `<div class="merge-blockers"`)
	if b < start || !strings.Contains(page[b:], "<b>Protected files changed</b>") || !strings.Contains(page[b:], "<code>.github/&lt;ci&gt;.yml</code>") {
		t.Errorf("no blockers box after the merge state naming the protected file (escaped)")
	}
}
