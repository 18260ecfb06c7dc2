package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"lazy/api"
)

// TestSearchWholeDiff: the search answers the lines of every file with the
// fragment ids the page anchors them by (a deleted line on the old side),
// the files whose path matches, and refuses an empty or oversized query.
func TestSearchWholeDiff(t *testing.T) {
	_, h := newPagesServer(t)
	rec := serve(t, h, "GET", "/api/review/fix-login/search?q=redirect", "", "")
	if rec.Code != 200 {
		t.Fatalf("search: %d %s", rec.Code, rec.Body)
	}
	var res api.SearchResult
	if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	var frags []string
	for _, hit := range res.Hits {
		frags = append(frags, hit.Frag)
	}
	if got, want := strings.Join(frags, " "), "l-login.go-old-3 l-login.go-new-3"; got != want {
		t.Errorf("hits %q, want %q", got, want)
	}
	if rec.Header().Get("Cache-Control") != "no-store" {
		t.Error("a search answer may be cached")
	}
	// smart case: an upper-case letter makes it exact; a path matches too
	for q, want := range map[string]string{"GONE": "", "gone": "l-old.txt-old-1", "old.TXT": "", "%3Cscript%3E": "l-login.go-new-5"} {
		rec := serve(t, h, "GET", "/api/review/fix-login/search?q="+q, "", "")
		var res api.SearchResult
		if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, hit := range res.Hits {
			got = append(got, hit.Frag)
		}
		if strings.Join(got, " ") != want {
			t.Errorf("q=%s: hits %v, want %q", q, got, want)
		}
		// what an agent wrote goes back as JSON text, never as markup
		if strings.Contains(rec.Body.String(), "<script>") {
			t.Errorf("q=%s: a raw <script> in the JSON answer", q)
		}
	}
	rec = serve(t, h, "GET", "/api/review/fix-login/search?q=old.txt", "", "")
	if !strings.Contains(rec.Body.String(), `"files":["old.txt"]`) {
		t.Errorf("a path match: %s", rec.Body)
	}
	for _, q := range []string{"", "%20%20", strings.Repeat("x", 300), "%ff"} {
		if rec := serve(t, h, "GET", "/api/review/fix-login/search?q="+q, "", ""); rec.Code != http.StatusBadRequest {
			t.Errorf("q=%.20s: %d, want 400", q, rec.Code)
		}
	}
	if rec := serve(t, h, "GET", "/api/review/nosuch/search?q=x", "", ""); rec.Code != http.StatusNotFound {
		t.Errorf("an unknown task: %d", rec.Code)
	}
}

// TestThreadsFragment: every thread as its row (escaped), the orphans and
// the queued list, in one small answer: not the page.
func TestThreadsFragment(t *testing.T) {
	_, h := newPagesServer(t)
	rec := serve(t, h, "GET", "/review/fix-login/threads", "", "")
	if rec.Code != 200 {
		t.Fatalf("threads: %d %s", rec.Code, rec.Body)
	}
	body := rec.Body.String()
	page := serve(t, h, "GET", "/review/fix-login", "", "").Body.String()
	for _, want := range []string{`<table class="thread-rows"><tbody>`, `<tr class="thread-row" data-thread-id="t1" data-thread-for="l-login.go-new-3">`, `<section class="orphans">`, `<ul class="queued-list" data-count="`} {
		if !strings.Contains(body, want) {
			t.Errorf("the fragment has no %s", want)
		}
	}
	for _, no := range []string{"<html", "diff-table", "statusbar"} {
		if strings.Contains(body, no) {
			t.Errorf("the fragment carries %s: it is the page, not its threads", no)
		}
	}
	// each thread's markup is the page's own (review state, suggestions
	// and turn links applied alike): a refresh puts back what the page had
	row := func(html, id string) string {
		start := strings.Index(html, `<tr class="thread-row" data-thread-id="`+id+`"`)
		if start < 0 {
			return ""
		}
		end := strings.Index(html[start:], "</td></tr>")
		return html[start : start+end]
	}
	for _, id := range []string{"t1", "t2", "t3"} {
		if got, want := row(body, id), row(page, id); got == "" || got != want {
			t.Errorf("thread %s in the fragment differs from the page's:\n%s\n---\n%s", id, got, want)
		}
	}
	orphans := func(html string) string {
		start := strings.Index(html, `<section class="orphans">`)
		if start < 0 {
			return ""
		}
		return html[start : start+strings.Index(html[start:], "</section>")]
	}
	if got, want := orphans(body), orphans(page); got == "" || got != want {
		t.Errorf("the orphans differ from the page's:\n%s\n---\n%s", got, want)
	}
	if strings.Contains(body, "<script>alert") {
		t.Error("an unescaped script in the threads fragment")
	}
}

// TestFileFragmentExpands: the one-file fragment takes full and context, so
// expanding a file's context (or the whole file) is loaded in place.
func TestFileFragmentExpands(t *testing.T) {
	_, h := newPagesServer(t)
	rec := serve(t, h, "GET", "/review/fix-login/file?path=login.go&full=login.go&context=20", "", "")
	if rec.Code != 200 {
		t.Fatalf("fragment: %d %s", rec.Code, rec.Body)
	}
	// the next expansion asks for 20 more lines than this one
	if !strings.Contains(rec.Body.String(), `context=40`) {
		t.Errorf("the expanded fragment's ↕ link does not ask for more: %s", rec.Body)
	}
	for _, q := range []string{"&full=old.txt", "&context=-1", "&context=x"} {
		if rec := serve(t, h, "GET", "/review/fix-login/file?path=login.go"+q, "", ""); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, rec.Code)
		}
	}
}

// TestActionsAnswerTheScript: withdraw and retry answer the page's script
// with JSON (it updates the thread in place) and a form with a redirect.
func TestActionsAnswerTheScript(t *testing.T) {
	_, h := newPagesServer(t)
	json := func(path string) *http.Request {
		r := request("POST", path, "", map[string]string{"Accept": "application/json", "Authorization": "Bearer " + testBearer, "Content-Type": "application/x-www-form-urlencoded"}, nil)
		return r
	}
	rec := run(h, json("/review/fix-login/comment/c1/withdraw"))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"notice":"Withdrawn."`) {
		t.Errorf("withdraw from the script: %d %s", rec.Code, rec.Body)
	}
	rec = run(h, json("/review/fix-login/comment/c1/retry"))
	if rec.Code < 400 || rec.Code >= 500 || !strings.Contains(rec.Body.String(), `"error":`) {
		t.Errorf("a refused retry from the script: %d %s", rec.Code, rec.Body)
	}
	if rec := serve(t, h, "POST", "/review/fix-login/comment/c1/withdraw", "application/x-www-form-urlencoded", ""); rec.Code != http.StatusSeeOther {
		t.Errorf("withdraw from a form: %d, want 303", rec.Code)
	}
}
