package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"lazy/api"
)

// FuzzCommentJSON posts arbitrary bodies as the comment JSON: the handler
// answers 201 or a 4xx, never a 5xx, and never panics.
func FuzzCommentJSON(f *testing.F) {
	for _, s := range []string{`{"body":"why?","file":"login.go","line":3,"side":"new","intent":"ask"}`, `{"body":`, `[]`, `{"line":"x"}`, `{"thread_id":"t1","body":"b","intent":"comment"}`, ``} {
		f.Add(s)
	}
	fr, h := newPagesServerF(f)
	f.Fuzz(func(t *testing.T, body string) {
		before := len(fr.posted)
		rec := serve(nil, h, http.MethodPost, "/review/fix-login/comment", "application/json", body)
		if rec.Code >= 500 {
			t.Fatalf("%q: %d %s", body, rec.Code, rec.Body)
		}
		if rec.Code == http.StatusCreated && len(fr.posted) != before+1 {
			t.Fatalf("201 without a post")
		}
	})
}

// FuzzReviewForms sends arbitrary form bodies to every form route: never a
// 5xx, and a passphrase field never comes back in the page.
func FuzzReviewForms(f *testing.F) {
	for _, s := range []string{"reason=ok&passphrase=SECRETPASS1", "draft_reason=%3Cb%3E&draft_feedback=x", "feedback=go", "body=x&line=NaN&side=old", "=&&=", "%zz"} {
		f.Add(s)
	}
	_, h := newPagesServerF(f)
	routes := []string{"/review/fix-login/accept", "/review/fix-login/unblock", "/review/fix-login/sync", "/review/fix-login/comment", "/review/fix-login/comment/c1/withdraw", "/review/fix-login/comment/c1/retry", "/review/fix-login/comment/c1/apply"}
	f.Fuzz(func(t *testing.T, body string) {
		if strings.Contains(body, "SECRETPASS1") || strings.Contains(body, "SECRETPASS%31") {
			return // typed into another field, where echoing it back is right
		}
		for _, r := range routes {
			rec := serve(nil, h, http.MethodPost, r, "application/x-www-form-urlencoded", body+"&passphrase=SECRETPASS1")
			if rec.Code >= 500 {
				t.Fatalf("%s %q: %d", r, body, rec.Code)
			}
			if strings.Contains(rec.Body.String(), "SECRETPASS1") {
				t.Fatalf("%s echoed the passphrase", r)
			}
		}
	})
}

// FuzzSearch sends arbitrary search text: a 200 whose every hit holds the
// text (as the smart case folds it) or a 400, never a 5xx or a panic.
func FuzzSearch(f *testing.F) {
	for _, s := range []string{"redirect", "GONE", "<script>", "ß", "%ff", "\x00", strings.Repeat("a", 300)} {
		f.Add(s)
	}
	_, h := newPagesServerF(f)
	f.Fuzz(func(t *testing.T, q string) {
		rec := serve(nil, h, http.MethodGet, "/api/review/fix-login/search?q="+url.QueryEscape(q), "", "")
		if rec.Code >= 500 {
			t.Fatalf("%q: %d %s", q, rec.Code, rec.Body)
		}
		if rec.Code != http.StatusOK {
			return
		}
		var res api.SearchResult
		if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
			t.Fatalf("%q: not JSON: %v", q, err)
		}
		for _, hit := range res.Hits {
			text, want := hit.Text, q
			if strings.ToLower(q) == q {
				text = strings.ToLower(text)
			}
			if len(hit.Text) < api.SearchTextMax && !strings.Contains(text, want) {
				t.Fatalf("%q: hit %q does not hold it", q, hit.Text)
			}
		}
	})
}

// FuzzFragments sends arbitrary queries to the fragments the page's script
// loads (one file's rows with full and context, every thread): a 200 or a
// 4xx, never a 5xx, and nothing in the query comes back as markup.
func FuzzFragments(f *testing.F) {
	for _, s := range []string{"path=login.go", "path=login.go&full=login.go&context=20", "path=login.go&full=old.txt", "path=%3Cb%3E", "full=login.go&context=-3", "context=99999999999999999999", "path=login.go&full=login.go&context=x", "%zz"} {
		f.Add(s)
	}
	_, h := newPagesServerF(f)
	f.Fuzz(func(t *testing.T, q string) {
		if strings.ContainsFunc(q, func(r rune) bool { return r <= ' ' || r == '#' || r == 0x7f }) {
			return // no request line carries it as it is
		}
		for _, route := range []string{"/review/fix-login/file?", "/review/fix-login/threads?"} {
			rec := serve(nil, h, http.MethodGet, route+q, "", "")
			if rec.Code >= 500 {
				t.Fatalf("%s%q: %d %s", route, q, rec.Code, rec.Body)
			}
			if rec.Code == http.StatusOK && strings.Contains(rec.Body.String(), "<script>") {
				t.Fatalf("%s%q: a raw <script> in the fragment", route, q)
			}
		}
	})
}
