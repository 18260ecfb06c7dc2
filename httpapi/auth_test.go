package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// request builds a loopback request with optional cookie, bearer and headers.
func request(method, path string, body string, hdr map[string]string, cookie *http.Cookie) *http.Request {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Host = "127.0.0.1:26000"
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	return req
}

func run(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// login opens ?token= and returns the session cookie it sets.
func login(t *testing.T, h http.Handler) *http.Cookie {
	t.Helper()
	rec := run(h, request("GET", "/review/fix-login?token="+testDash+"&x=1", "", nil, nil))
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/review/fix-login?x=1" {
		t.Fatalf("login: %d, Location %q", rec.Code, rec.Header().Get("Location"))
	}
	cs := rec.Result().Cookies()
	if len(cs) != 1 || cs[0].Name != "lazy_session_26000" || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode || cs[0].Path != "/" {
		t.Fatalf("session cookie: %+v", cs)
	}
	return cs[0]
}

func TestDashboardNeedsLogin(t *testing.T) {
	_, h := newPagesServerF(t)
	for _, p := range []string{"/", "/review", "/review/fix-login", "/api/tasks", "/api/review/queue", "/tasks/x", "/commits/abc",
		"/review/fix-login/file?path=login.go", "/api/review/fix-login/diff", "/review/fix-login?since=abcdef&open=login.go",
		"/review/fix-login/raw?path=login.go", "/api/review/fix-login/search?q=login", "/review/fix-login/threads",
		"/review/fix-login/file?path=login.go&full=login.go", "/api/review/fix-login/state"} {
		rec := run(h, request("GET", p, "", nil, nil))
		if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "lazy open") {
			t.Errorf("GET %s without login: %d %s", p, rec.Code, rec.Body)
		}
	}
	if rec := run(h, request("GET", "/assets/app.css", "", nil, nil)); rec.Code != 200 {
		t.Errorf("assets need no login: %d", rec.Code)
	}
	for name, req := range map[string]*http.Request{
		"wrong token":                     request("GET", "/?token=nope", "", nil, nil),
		"forged cookie":                   request("GET", "/", "", nil, &http.Cookie{Name: "lazy_session_26000", Value: strings.Repeat("a", 32) + ".deadbeef"}),
		"wrong bearer":                    request("GET", "/", "", map[string]string{"Authorization": "Bearer nope"}, nil),
		"the dashboard token as a bearer": request("GET", "/", "", map[string]string{"Authorization": "Bearer " + testDash}, nil),
	} {
		if rec := run(h, req); rec.Code != http.StatusUnauthorized {
			t.Errorf("%s: %d", name, rec.Code)
		}
	}
	// the cookie of another port's dashboard is not this one's
	ck := login(t, h)
	other := request("GET", "/review", "", nil, &http.Cookie{Name: "lazy_session_26001", Value: ck.Value})
	if rec := run(h, other); rec.Code != http.StatusUnauthorized {
		t.Errorf("a cookie under another port's name: %d", rec.Code)
	}
	if rec := run(h, request("GET", "/review", "", nil, ck)); rec.Code != 200 {
		t.Fatalf("with the session cookie: %d", rec.Code)
	}
	if rec := run(h, request("HEAD", "/review", "", nil, ck)); rec.Code != 200 {
		t.Errorf("HEAD: %d", rec.Code)
	}
}

var csrfRE = regexp.MustCompile(`data-csrf="([0-9a-f]+)"`)

// TestNoCrossSiteWrites: a state-changing request a browser marks as from
// another site or origin is refused whatever it carries; a form on the
// session cookie needs the session's form token.
func TestNoCrossSiteWrites(t *testing.T) {
	f, h := newPagesServerF(t)
	ck := login(t, h)
	page := run(h, request("GET", "/review/fix-login", "", nil, ck)).Body.String()
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("the page carries no form token")
	}
	tok := m[1]
	if !strings.Contains(page, `name="csrf" value="`+tok+`"`) {
		t.Fatal("the forms do not carry the form token")
	}
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range form {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	body := "feedback=commit+evil&csrf=" + tok
	for name, req := range map[string]*http.Request{
		"another origin":        request("POST", "/review/fix-login/unblock", body, with(map[string]string{"Origin": "http://evil.example"}), ck),
		"origin null":           request("POST", "/review/fix-login/unblock", body, with(map[string]string{"Origin": "null"}), ck),
		"cross-site fetch":      request("POST", "/review/fix-login/unblock", body, with(map[string]string{"Sec-Fetch-Site": "cross-site"}), ck),
		"same-site, other port": request("POST", "/review/fix-login/unblock", body, with(map[string]string{"Sec-Fetch-Site": "same-site"}), ck),
		"bearer from a page":    request("POST", "/review/fix-login/unblock", body, with(map[string]string{"Origin": "http://evil.example", "Authorization": "Bearer " + testBearer}), nil),
		"no form token":         request("POST", "/review/fix-login/unblock", "feedback=x", form, ck),
		"wrong form token":      request("POST", "/review/fix-login/unblock", "feedback=x&csrf=00", form, ck),
		"JSON without token":    request("POST", "/review/fix-login/comment", `{"body":"x","file":"a","line":1,"side":"new","intent":"ask"}`, map[string]string{"Content-Type": "application/json"}, ck),
		// a suggestion applied from another page: a commit as the reviewer
		"apply from another origin": request("POST", "/review/fix-login/comment/c1/apply", "head=abc&csrf="+tok, with(map[string]string{"Origin": "http://evil.example"}), ck),
		"apply cross-site":          request("POST", "/review/fix-login/comment/c1/apply", "head=abc&csrf="+tok, with(map[string]string{"Sec-Fetch-Site": "cross-site"}), ck),
		"apply without token":       request("POST", "/review/fix-login/comment/c1/apply", "head=abc", form, ck),
	} {
		if rec := run(h, req); rec.Code != http.StatusForbidden {
			t.Errorf("%s: %d %s", name, rec.Code, rec.Body)
		}
	}
	if len(f.posted) != 0 {
		t.Fatalf("a refused request reached the review actions (%d comments)", len(f.posted))
	}
	// the page's own forms and script pass
	same := with(map[string]string{"Origin": "http://127.0.0.1:26000", "Sec-Fetch-Site": "same-origin"})
	if rec := run(h, request("POST", "/review/fix-login/unblock", body, same, ck)); rec.Code != http.StatusSeeOther {
		t.Errorf("the page's own unblock form: %d %s", rec.Code, rec.Body)
	}
	js := map[string]string{"Content-Type": "application/json", "X-Lazy-CSRF": tok, "Origin": "http://127.0.0.1:26000"}
	if rec := run(h, request("POST", "/review/fix-login/comment", `{"body":"x","file":"login.go","line":4,"side":"old","intent":"ask"}`, js, ck)); rec.Code != http.StatusCreated {
		t.Errorf("the page's script: %d %s", rec.Code, rec.Body)
	}
	// too large is said so, never read as empty
	big := "body=" + url.QueryEscape(strings.Repeat("x", 2<<20)) + "&csrf=" + tok + "&file=a&line=1&side=new&intent=comment"
	rec := run(h, request("POST", "/review/fix-login/comment", big, form, ck))
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "too large (limit 1048576") {
		t.Errorf("a 2 MiB form: %d %s", rec.Code, rec.Body)
	}
}
