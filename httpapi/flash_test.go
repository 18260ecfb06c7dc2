package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"lazy/api"
)

// formTokenOf is the form token of the page a cookie session gets.
func formTokenOf(t *testing.T, h http.Handler, ck *http.Cookie) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(run(h, request("GET", "/review/fix-login", "", nil, ck)).Body.String())
	if m == nil {
		t.Fatal("the page carries no form token")
	}
	return m[1]
}

// browserForm are the headers of a browser's own form post.
var browserForm = map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Accept": "text/html,application/xhtml+xml",
	"Origin": "http://127.0.0.1:26000", "Sec-Fetch-Site": "same-origin"}

// TestEveryFormAnswersSeeOther: each form of the review page, accepted or
// refused, answers 303 to a GET page, never a page of its own.
func TestEveryFormAnswersSeeOther(t *testing.T) {
	_, h := newPagesServerF(t)
	ck := login(t, h)
	tok := formTokenOf(t, h, ck)
	for _, tc := range []struct{ name, path, body, loc string }{
		{"comment", "/review/fix-login/comment", "body=note&file=login.go&line=4&side=old&intent=comment", "/review/" + fakeID + "?flash="},
		{"retry (refused)", "/review/fix-login/comment/c1/retry", "", "/review/fix-login?flash="},
		{"withdraw", "/review/fix-login/comment/c1/withdraw", "", "/review/fix-login?flash="},
		{"unblock", "/review/fix-login/unblock", "feedback=go", "/tasks/" + fakeID + "?flash="},
		{"accept (refused)", "/review/fix-login/accept", "reason=fine&head=abc123", "/review/fix-login?flash="},
		{"accept (no reason)", "/review/fix-login/accept", "head=abc123", "/review/fix-login?flash="},
		{"passphrase", "/review/fix-login/accept", "draft_reason=fine&head=abc123&passphrase=x", "/review/fix-login?flash="},
		{"sync", "/review/fix-login/sync", "draft_reason=fine", "/review/fix-login?flash="},
	} {
		rec := run(h, request("POST", tc.path, tc.body+"&csrf="+tok, browserForm, ck))
		if loc := rec.Header().Get("Location"); rec.Code != http.StatusSeeOther || !strings.HasPrefix(loc, tc.loc) {
			t.Errorf("%s: %d %q, want 303 to %s…", tc.name, rec.Code, loc, tc.loc)
			continue
		}
		path, _, _ := strings.Cut(rec.Header().Get("Location"), "#")
		page := run(h, request("GET", path, "", nil, ck))
		if page.Code != http.StatusOK || !strings.Contains(page.Body.String(), `class="notice`) {
			t.Errorf("%s: the page after it: %d, notice shown: %v", tc.name, page.Code, strings.Contains(page.Body.String(), `class="notice`))
		}
	}
}

// TestFlashOnlyForItsSession: a flash id shows to the session that posted
// the form, and to no one else: not another browser, not a bearer client,
// not an id made up or from a link; and it ends.
func TestFlashOnlyForItsSession(t *testing.T) {
	_, h := newPagesServerF(t)
	a := login(t, h)
	b := login(t, h) // another browser: its own session
	if a.Value == b.Value {
		t.Fatal("two logins share a session")
	}
	tok := formTokenOf(t, h, a)
	// the fake refuses the accept: its page keeps the typed reason
	rec := run(h, request("POST", "/review/fix-login/accept", "csrf="+tok+"&head=abc123&reason="+url.QueryEscape("because <script>x</script>"), browserForm, a))
	loc := rec.Header().Get("Location")
	if rec.Code != http.StatusSeeOther || !strings.Contains(loc, "flash=") {
		t.Fatalf("refused accept: %d %q", rec.Code, loc)
	}
	mine := run(h, request("GET", loc, "", nil, a)).Body.String()
	if !strings.Contains(mine, "Not accepted") || !strings.Contains(mine, "because &lt;script&gt;x&lt;/script&gt;</textarea>") {
		t.Fatalf("the posting session's page lacks its notice or its escaped typed reason:\n%s", mine)
	}
	if strings.Contains(mine, "<script>x") {
		t.Fatal("typed text reached the page unescaped")
	}
	// a reload shows the same (and posts nothing)
	if again := run(h, request("GET", loc, "", nil, a)).Body.String(); !strings.Contains(again, "because &lt;script&gt;") {
		t.Error("a reload lost the typed reason")
	}
	for name, req := range map[string]*http.Request{
		"another browser's session": request("GET", loc, "", nil, b),
		"a bearer client":           request("GET", loc, "", map[string]string{"Authorization": "Bearer " + testBearer}, nil),
		"a made-up id":              request("GET", "/review/fix-login?flash="+strings.Repeat("0", 32), "", nil, a),
	} {
		page := run(h, req).Body.String()
		if strings.Contains(page, "Not accepted") || strings.Contains(page, "because") || strings.Contains(page, `class="notice`) {
			t.Errorf("%s sees the flash", name)
		}
	}
	// a bearer's flash is the bearer's alone
	bearer := map[string]string{"Authorization": "Bearer " + testBearer, "Content-Type": "application/x-www-form-urlencoded"}
	rec = run(h, request("POST", "/review/fix-login/comment/c1/withdraw", "", bearer, nil))
	bloc := rec.Header().Get("Location")
	if !strings.Contains(run(h, request("GET", bloc, "", bearer, nil)).Body.String(), "Withdrawn.") {
		t.Error("the bearer's own flash does not show")
	}
	if strings.Contains(run(h, request("GET", bloc, "", nil, a)).Body.String(), "Withdrawn.") {
		t.Error("a cookie session sees the bearer's flash")
	}
}

func TestFlashStore(t *testing.T) {
	var s flashes
	now := time.Now()
	id := s.put("session:a", Flash{Notice: "hi"}, now)
	if f, ok := s.get("session:a", id, now.Add(time.Minute)); !ok || f.Notice != "hi" {
		t.Fatalf("own flash: %v %+v", ok, f)
	}
	if _, ok := s.get("session:b", id, now); ok {
		t.Error("another session reads the flash")
	}
	if _, ok := s.get("", id, now); ok {
		t.Error("no session reads the flash")
	}
	if _, ok := s.get("session:a", id, now.Add(flashTTL)); ok {
		t.Error("an expired flash shows")
	}
	// bounded: the oldest go first
	first := s.put("session:a", Flash{Notice: "first"}, now)
	for i := 0; i < flashMax+10; i++ {
		s.put("session:a", Flash{Notice: "n"}, now)
	}
	if _, ok := s.get("session:a", first, now); ok || len(s.m) > flashMax {
		t.Errorf("the store is not bounded: %d entries, the first kept: %v", len(s.m), ok)
	}
	// and in bytes: forty 1 MiB drafts keep at most flashMaxBytes
	big := strings.Repeat("x", 1<<20)
	var last string
	for i := 0; i < 40; i++ {
		last = s.put("session:a", Flash{Fields: map[string]string{"feedback": big}}, now)
	}
	if s.bytes > flashMaxBytes || len(s.m) > flashMaxBytes>>20 {
		t.Errorf("%d bytes in %d flashes, over the bound", s.bytes, len(s.m))
	}
	if f, ok := s.get("session:a", last, now); !ok || f.Field("feedback") != big {
		t.Error("the newest flash was evicted")
	}
}

// TestStaleSessionToken: opening the tokened address again keeps the
// browser's session, so the form token of a page open in another tab still
// works; a token truly stale gets a page (never JSON) that says to reload and
// shows what was typed; the page's script still gets JSON.
func TestStaleSessionToken(t *testing.T) {
	f, h := newPagesServerF(t)
	ck := login(t, h)
	tok := formTokenOf(t, h, ck) // tab 1 loaded its page
	// tab 2 opens the `lazy open` address again, with the cookie it has
	rec := run(h, request("GET", "/?token="+testDash, "", nil, ck))
	if rec.Code != http.StatusSeeOther || len(rec.Result().Cookies()) != 0 {
		t.Fatalf("a second login replaced the session: %d %v", rec.Code, rec.Result().Cookies())
	}
	// tab 1 submits: it works
	if rec := run(h, request("POST", "/review/fix-login/unblock", "feedback=go&csrf="+tok, browserForm, ck)); rec.Code != http.StatusSeeOther {
		t.Fatalf("tab 1's form after a second login: %d %s", rec.Code, rec.Body)
	}
	// a truly stale token (a page from a session since replaced)
	typedText := "please keep <this> & that"
	rec = run(h, request("POST", "/review/fix-login/unblock", "feedback="+url.QueryEscape(typedText)+"&csrf=0000", browserForm, ck))
	body := rec.Body.String()
	if rec.Code != http.StatusForbidden || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("stale token as a browser: %d %s %s", rec.Code, rec.Header().Get("Content-Type"), body)
	}
	for _, want := range []string{"Reload the page and send it again", "please keep &lt;this&gt; &amp; that", `href="/review/fix-login"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the stale-token page lacks %q:\n%s", want, body)
		}
	}
	if len(f.posted) != 0 {
		t.Error("a stale form reached the review actions")
	}
	// the page's script (JSON) gets JSON
	js := map[string]string{"Content-Type": "application/json", "Accept": "application/json", "X-Lazy-CSRF": "0000", "Origin": "http://127.0.0.1:26000"}
	rec = run(h, request("POST", "/review/fix-login/comment", `{"body":"x","file":"login.go","line":4,"side":"old","intent":"ask"}`, js, ck))
	var e errorBody
	if rec.Code != http.StatusForbidden || json.Unmarshal(rec.Body.Bytes(), &e) != nil || !strings.Contains(e.Error, "Reload the page") {
		t.Errorf("stale token from the script: %d %s", rec.Code, rec.Body)
	}
	// a cross-site post never gets its words shown back
	evil := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Accept": "text/html", "Sec-Fetch-Site": "cross-site"}
	rec = run(h, request("POST", "/review/fix-login/unblock", "feedback=Your+session+expired+go+to+evil.example", evil, ck))
	if rec.Code != http.StatusForbidden || strings.Contains(rec.Body.String(), "evil.example") || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Errorf("cross-site form: %d %s", rec.Code, rec.Body)
	}
	// no cookie at all (the browser lost it): the login page, with the text
	rec = run(h, request("POST", "/review/fix-login/unblock", "feedback="+url.QueryEscape(typedText), browserForm, nil))
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "lazy open") || !strings.Contains(rec.Body.String(), "please keep &lt;this&gt;") {
		t.Errorf("a form with no session: %d %s", rec.Code, rec.Body)
	}
}

// TestFormErrorsHTMLForBrowsersJSONForClients: one failure, two answers.
func TestFormErrorsHTMLForBrowsersJSONForClients(t *testing.T) {
	_, h := newPagesServerF(t)
	ck := login(t, h)
	tok := formTokenOf(t, h, ck)
	// a failure with no page to go back to: an unknown task
	rec := run(h, request("POST", "/review/nosuch/unblock", "feedback=hello+there&csrf="+tok, browserForm, ck))
	if rec.Code != http.StatusNotFound || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") || !strings.Contains(rec.Body.String(), "hello there") || !strings.Contains(rec.Body.String(), `class="back"`) {
		t.Errorf("browser form to an unknown task: %d %s %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	bearerJSON := map[string]string{"Authorization": "Bearer " + testBearer, "Content-Type": "application/json", "Accept": "application/json"}
	rec = run(h, request("POST", "/review/nosuch/comment", `{"body":"x","file":"a","line":1,"side":"new","intent":"comment"}`, bearerJSON, nil))
	var e errorBody
	if rec.Code != http.StatusNotFound || json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error == "" {
		t.Errorf("JSON client: %d %s", rec.Code, rec.Body)
	}
	// a bad comment form: back on the line, the text in the form
	rec = run(h, request("POST", "/review/fix-login/comment", "body="+url.QueryEscape("keep me")+"&file=login.go&line=3&side=new&intent=comment&start_line=x&csrf="+tok, browserForm, ck))
	loc := rec.Header().Get("Location")
	if rec.Code != http.StatusSeeOther || !strings.Contains(loc, "comment=l-login.go-new-3") {
		t.Fatalf("bad comment form: %d %q", rec.Code, loc)
	}
	path, _, _ := strings.Cut(loc, "#")
	page := run(h, request("GET", path, "", nil, ck)).Body.String()
	if !strings.Contains(page, ">keep me</textarea>") || !strings.Contains(page, "Comment not saved") {
		t.Errorf("the comment's text is not back in its form")
	}
}

// blockingReview is the fake whose sync takes until release.
type blockingReview struct {
	*fakeReview
	release chan struct{}
}

func (b *blockingReview) Sync(context.Context, string, bool) (*api.SyncResult, error) {
	<-b.release
	return &api.SyncResult{Status: "blocked"}, nil
}

// TestSyncFormWaitsThenRedirects: the sync form waits for the merge (the
// page after it shows the new state); one queued behind a turn answers 303
// "queued" within SyncWait; conflicts come as an alert.
func TestSyncFormWaitsThenRedirects(t *testing.T) {
	f, _ := newPagesServerF(t)
	b := &blockingReview{fakeReview: f, release: make(chan struct{})}
	e, err := New(Deps{Bearer: testBearer, DashboardToken: testDash, Call: pages(fakeTasks{}, b), SyncWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	bearer := map[string]string{"Authorization": "Bearer " + testBearer, "Content-Type": "application/x-www-form-urlencoded"}
	rec := run(e, request("POST", "/review/fix-login/sync", "draft_reason=ok", bearer, nil))
	if rec.Code != http.StatusSeeOther || !strings.Contains(run(e, request("GET", rec.Header().Get("Location"), "", bearer, nil)).Body.String(), "Sync queued") {
		t.Errorf("a sync that waits: %d", rec.Code)
	}
	close(b.release)
	// conflicts
	cf := &conflictReview{fakeReview: f}
	e2, err := New(Deps{Bearer: testBearer, DashboardToken: testDash, Call: pages(fakeTasks{}, cf)})
	if err != nil {
		t.Fatal(err)
	}
	rec = run(e2, request("POST", "/review/fix-login/sync", "", bearer, nil))
	page := run(e2, request("GET", rec.Header().Get("Location"), "", bearer, nil)).Body.String()
	if rec.Code != http.StatusSeeOther || !strings.Contains(page, "conflicts in a.go") || !strings.Contains(page, "notice-alert") {
		t.Errorf("a sync with conflicts: %d\n%s", rec.Code, page)
	}
}

type conflictReview struct{ *fakeReview }

func (conflictReview) Sync(context.Context, string, bool) (*api.SyncResult, error) {
	return &api.SyncResult{Status: "conflict", Conflicts: []string{"a.go"}}, nil
}

// countingReview counts what the review page costs: the diff (with its
// merge dry run).
type countingReview struct {
	*fakeReview
	diffs int
}

func (c *countingReview) Diff(ctx context.Context, ref string, o api.DiffOptions) (*api.DiffResult, error) {
	c.diffs++
	return c.fakeReview.Diff(ctx, ref, o)
}

// TestActionRedirectComputesNoDiff: the retry and withdraw forms go back to
// the review page by the ref they were posted to; answering them never
// computes the diff or a merge dry run.
func TestActionRedirectComputesNoDiff(t *testing.T) {
	cr := &countingReview{fakeReview: &fakeReview{}}
	e, err := New(Deps{Bearer: testBearer, DashboardToken: testDash, Call: pages(fakeTasks{}, cr)})
	if err != nil {
		t.Fatal(err)
	}
	bearer := map[string]string{"Authorization": "Bearer " + testBearer, "Content-Type": "application/x-www-form-urlencoded"}
	for _, action := range []string{"retry", "withdraw"} {
		rec := run(e, request("POST", "/review/fix-login/comment/c1/"+action, "", bearer, nil))
		if loc := rec.Header().Get("Location"); rec.Code != http.StatusSeeOther || !strings.HasPrefix(loc, "/review/fix-login?") {
			t.Errorf("%s: got %d to %q, want 303 to /review/fix-login?flash=…", action, rec.Code, loc)
		}
	}
	if cr.diffs != 0 {
		t.Errorf("the retry and withdraw answers computed the diff %d times", cr.diffs)
	}
	run(e, request("GET", "/review/fix-login", "", bearer, nil))
	if cr.diffs != 1 {
		t.Errorf("the review page computed the diff %d times, want 1 (the count must see it)", cr.diffs)
	}
}
