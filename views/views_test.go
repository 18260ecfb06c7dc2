package views

import (
	"net/url"
	"strings"
	"testing"

	"lazy/gitx"
)

// TestCommentLinkRoundTrip: a line of a nested path links to ?comment=<frag>
// such that the server, decoding the query, gets back the exact fragment id.
func TestCommentLinkRoundTrip(t *testing.T) {
	d, err := gitx.ParseDiff([]byte("diff --git a/dir/a b.go b/dir/a b.go\n--- a/dir/a b.go\n+++ b/dir/a b.go\n@@ -1 +1 @@\n-x\n+y\n"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	frag := FragID("dir/a b.go", "new", 1)
	if frag != "l-dir%2Fa%20b.go-new-1" {
		t.Fatalf("frag %q", frag)
	}
	view, _ := BuildDiff(d.Files, nil, "T", "", true, "")
	h, err := v.DiffHTML(view)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(h), `href="?comment=l-dir%252Fa%2520b.go-new-1`)
	if i < 0 {
		t.Fatalf("no link for the added line in %s", h)
	}
	href := string(h)[i+len(`href="`):]
	href = href[:strings.IndexByte(href, '"')]
	u, err := url.Parse(strings.ReplaceAll(href, "&amp;", "&"))
	if err != nil {
		t.Fatal(err)
	}
	if got := u.Query().Get("comment"); got != frag {
		t.Errorf("link %q: query gives %q; want %q", href, got, frag)
	}
	open, _ := BuildDiff(d.Files, nil, "T", "", true, frag)
	if !open.Files[0].Hunks[0].Rows[1].CommentOpen {
		t.Error("the decoded query does not open the form on its line")
	}
	// the open form takes the focus, which brings it into view
	h, err = v.DiffHTML(open)
	if err != nil || !strings.Contains(string(h), `required autofocus`) {
		t.Errorf("the opened form does not take the focus: %v", err)
	}
}
