package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"lazy/api"
)

// TestReviewStateRoutes: the page's script reads and changes the
// reviewer's state through the router: each POST runs its command with the
// task of the path and the session's reviewer (api.Owner, whoever the
// session is) and answers the state; a cookie session needs its form
// token, another origin is refused, and a body that is not JSON says what
// it must hold.
func TestReviewStateRoutes(t *testing.T) {
	var mu sync.Mutex
	var got []any
	keep := func(a any) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, a)
	}
	state := func(task, reviewer string) *api.ReviewState {
		return &api.ReviewState{Task: task, Reviewer: reviewer, Viewed: map[string]string{"login.go": "abc"}, Resolved: map[string]api.ResolvedMark{}}
	}
	e, err := New(Deps{Bearer: testBearer, DashboardToken: testDash, Call: Table(
		Handle(api.CmdReviewState, func(_ context.Context, a api.ReviewStateArgs) (*api.ReviewState, error) {
			keep(a)
			return state(a.Task, a.Reviewer), nil
		}),
		Handle(api.CmdReviewViewed, func(_ context.Context, a api.ViewedArgs) (*api.ReviewState, error) {
			keep(a)
			return state(a.Task, a.Reviewer), nil
		}),
		Handle(api.CmdReviewResolve, func(_ context.Context, a api.ResolveArgs) (*api.ReviewState, error) {
			keep(a)
			st := state(a.Task, a.Reviewer)
			st.Notice = "Thread resolved."
			return st, nil
		}),
		Handle(api.CmdReviewSeen, func(_ context.Context, a api.SeenArgs) (*api.ReviewState, error) {
			keep(a)
			return state(a.Task, a.Reviewer), nil
		}),
	)})
	if err != nil {
		t.Fatal(err)
	}
	ck := login(t, e)
	tok := (&handler{d: Deps{DashboardToken: testDash}}).formToken(strings.Split(ck.Value, ".")[0])
	js := map[string]string{"Content-Type": "application/json", "X-Lazy-CSRF": tok, "Origin": "http://127.0.0.1:26000"}
	for _, c := range []struct {
		method, path, body string
		want               any
	}{
		{"GET", "/api/review/fix-login/state", "", api.ReviewStateArgs{Task: "fix-login", Reviewer: api.Owner}},
		{"POST", "/api/review/fix-login/viewed", `{"file":"login.go","hash":"abc","viewed":true,"reviewer":"mallory","task":"other"}`,
			api.ViewedArgs{Task: "fix-login", Reviewer: api.Owner, File: "login.go", Hash: "abc", Viewed: true}},
		{"POST", "/api/review/fix-login/resolved", `{"thread_id":"t1","resolved":true}`, api.ResolveArgs{Task: "fix-login", Reviewer: api.Owner, ThreadID: "t1", Resolved: true}},
		{"POST", "/api/review/fix-login/seen", `{"head":"0123456789abcdef"}`, api.SeenArgs{Task: "fix-login", Reviewer: api.Owner, Head: "0123456789abcdef"}},
	} {
		got = nil
		rec := run(e, request(c.method, c.path, c.body, js, ck))
		var st api.ReviewState
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &st) != nil || st.Reviewer != api.Owner || st.Viewed["login.go"] != "abc" {
			t.Errorf("%s %s: %d %s", c.method, c.path, rec.Code, rec.Body)
			continue
		}
		if rec.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("%s %s: Cache-Control %q", c.method, c.path, rec.Header().Get("Cache-Control"))
		}
		if len(got) != 1 || got[0] != c.want {
			t.Errorf("%s %s ran %+v, want %+v", c.method, c.path, got, c.want)
		}
	}
	got = nil
	for name, req := range map[string]*http.Request{
		"no form token":   request("POST", "/api/review/fix-login/viewed", `{"file":"a","hash":"b","viewed":true}`, map[string]string{"Content-Type": "application/json"}, ck),
		"another origin":  request("POST", "/api/review/fix-login/resolved", `{"thread_id":"t1","resolved":true}`, map[string]string{"Content-Type": "application/json", "X-Lazy-CSRF": tok, "Origin": "http://evil.example"}, ck),
		"cross-site":      request("POST", "/api/review/fix-login/seen", `{"head":"0123456789abcdef"}`, map[string]string{"Content-Type": "application/json", "X-Lazy-CSRF": tok, "Sec-Fetch-Site": "cross-site"}, ck),
		"not logged in":   request("POST", "/api/review/fix-login/viewed", `{"file":"a","hash":"b","viewed":true}`, js, nil),
		"a page for none": request("GET", "/api/review/fix-login/state", "", nil, nil),
	} {
		if rec := run(e, req); rec.Code != http.StatusForbidden && rec.Code != http.StatusUnauthorized {
			t.Errorf("%s: %d %s", name, rec.Code, rec.Body)
		}
	}
	if len(got) != 0 {
		t.Errorf("a refused request ran %+v", got)
	}
	if rec := run(e, request("POST", "/api/review/fix-login/viewed", `file=a`, js, ck)); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "file, hash and viewed") {
		t.Errorf("a body that is not JSON: %d %s", rec.Code, rec.Body)
	}
}
