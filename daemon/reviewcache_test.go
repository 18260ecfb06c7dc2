package daemon

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lazy/api"
	"lazy/gitx"
	"lazy/gitx/gitxtest"
	"lazy/store"
	"lazy/stubmodel"
)

// reviewDaemon starts a daemon with the scripted agent and a task whose
// first turn wrote a.txt, blocked; then, as if a work turn had written
// them, commits files in its worktree and imports them.
func reviewDaemon(t testing.TB, files map[string]string) (*Daemon, *store.Task) {
	t.Helper()
	stub := stubmodel.New()
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	root := gitxtest.NewRepo(t, nil)
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ".lazy"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("[agent]\ndriver = \"script\"\nrunner = \"process\"\n[proxy]\nupstream = %q\n", srv.URL)
	if err := os.WriteFile(filepath.Join(root, ".lazy", "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	d, err := Start(context.Background(), Options{Root: root, Environ: []string{"LAZY_HOME=" + home, "PATH=" + os.Getenv("PATH")}, SelfExe: self})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(); <-d.Done() })
	ctx := context.Background()
	res, err := d.Service().NewTask(ctx, api.NewTaskArgs{Code: "rv", Prompt: "@write a.txt one\\n\n@commit a\n@answer ok"})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		tk, err := d.svc.Resolve(ctx, res.Task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Status == "blocked" {
			if len(files) > 0 {
				commitOnTask(t, d, tk, "more", files)
			}
			return d, tk
		}
		if tk.Status == "failed" || time.Now().After(deadline) {
			t.Fatalf("task is %s (%s), want blocked", tk.Status, tk.FailReason)
		}
	}
}

// commitOnTask commits files on the task's branch in its worktree and
// imports the commit, as after a work turn.
func commitOnTask(t testing.TB, d *Daemon, tk *store.Task, msg string, files map[string]string) {
	t.Helper()
	gitxtest.Commit(t, tk.Worktree, msg, files)
	if _, err := (gitx.TaskRepo{Project: d.paths.Root, Worktree: tk.Worktree, Branch: tk.Branch, Parent: tk.Parent}).Import(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestFileCacheNeverStale: a file sent by itself comes from a cache keyed
// by the commits the diff runs between, so once the branch moves — by a
// turn's import or by hand in the project, with the task row unchanged —
// the very next request shows the new rows, never the cached ones.
func TestFileCacheNeverStale(t *testing.T) {
	d, tk := reviewDaemon(t, nil)
	ctx := context.Background()
	rv := d.Review()
	text := func() string {
		t.Helper()
		res, err := rv.Diff(ctx, tk.ID, api.DiffOptions{File: "a.txt"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Files) != 1 || res.Files[0].Path() != "a.txt" {
			t.Fatalf("asked for a.txt, got %d files", len(res.Files))
		}
		var b strings.Builder
		for _, h := range res.Files[0].Hunks {
			for _, l := range h.Lines {
				b.WriteString(l.Text + "\n")
			}
		}
		return b.String()
	}
	fragment := func() string {
		t.Helper()
		return string(getBody(t, d, "/review/"+tk.ID+"/file?path=a.txt"))
	}
	if got := text(); got != "one\n" {
		t.Fatalf("a.txt: %q", got)
	}
	if f := fragment(); !strings.Contains(f, ">one<") {
		t.Fatalf("the fragment does not show one:\n%s", f)
	}
	// a turn's commit, imported
	commitOnTask(t, d, tk, "c2", map[string]string{"a.txt": "two\n"})
	if got := text(); got != "two\n" {
		t.Fatalf("after the branch moved, a.txt reads %q, want two", got)
	}
	if f := fragment(); !strings.Contains(f, ">two<") || strings.Contains(f, ">one<") {
		t.Fatalf("after the branch moved, the fragment is stale:\n%s", f)
	}
	// by hand in the project: no task row changes
	gitxtest.Git(t, d.paths.Root, "branch", "-f", "side", tk.Branch)
	wt := t.TempDir()
	gitxtest.Git(t, d.paths.Root, "worktree", "add", "-q", wt, "side")
	gitxtest.Commit(t, wt, "c3", map[string]string{"a.txt": "three\n"})
	gitxtest.Git(t, d.paths.Root, "update-ref", "refs/heads/"+tk.Branch, "refs/heads/side")
	if got := text(); got != "three\n" {
		t.Fatalf("after a commit by hand, a.txt reads %q, want three", got)
	}
	if f := fragment(); !strings.Contains(f, ">three<") {
		t.Fatalf("after a commit by hand, the fragment is stale:\n%s", f)
	}
	// the whole page agrees
	if p := string(getBody(t, d, "/review/"+tk.ID)); !strings.Contains(p, ">three<") || strings.Contains(p, ">two<") {
		t.Fatal("the page shows another diff than the file")
	}
}

// review292 is the large review: 292 changed files of 20 to 200
// lines of Go each (~32,000 lines), with a thread on every third file.
func review292(b *testing.B) (*Daemon, *store.Task) {
	files := map[string]string{}
	for i := 0; i < 292; i++ {
		var sb strings.Builder
		fmt.Fprintf(&sb, "package p%d\n\n", i%17)
		for l := 0; l < 20+(i*37)%180; l++ {
			fmt.Fprintf(&sb, "func f%d_%d(x int) string { return fmt.Sprint(\"<b>%d</b>\", x*%d) }\n", i, l, l, i)
		}
		files[fmt.Sprintf("pkg/d%d/f%d.go", i%23, i)] = sb.String()
	}
	d, tk := reviewDaemon(b, files)
	ctx := context.Background()
	for i := 0; i < 292; i += 3 {
		if _, err := d.Review().PostComment(ctx, tk.ID, api.PostCommentArgs{Body: fmt.Sprintf("note %d", i), File: fmt.Sprintf("pkg/d%d/f%d.go", i%23, i),
			Line: 3, Side: "new", Intent: "comment"}); err != nil {
			b.Fatal(err)
		}
	}
	return d, tk
}

// getAs fetches a dashboard path, gzip-accepting or not, and returns the
// bytes as sent and as read.
func getAs(b *testing.B, d *Daemon, path string, gz bool) (sent, body []byte) {
	tok, err := os.ReadFile(d.Paths().AuthToken)
	if err != nil {
		b.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, d.Info().BaseURL+path, nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sent, err = io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
	}
	body = sent
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(sent))
		if err != nil {
			b.Fatal(err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			b.Fatal(err)
		}
	}
	return sent, body
}

// BenchmarkReview292: the review page of a 292-file task through the
// daemon's router over loopback (server render, warm: its diff parsed and
// lexed once before), one file the page sent without its rows, and the
// bytes sent, plain and to a client that takes gzip. Run:
//
//	go test ./daemon -run '^$' -bench Review292 -benchtime 20x
func BenchmarkReview292(b *testing.B) {
	d, tk := review292(b)
	page := "/review/" + tk.ID
	raw, body := getAs(b, d, page, false)
	// the last file: the page sends it without its rows
	at := bytes.LastIndex(body, []byte(`data-lazy="`))
	if at < 0 {
		b.Fatal("no file is sent lazily: the benchmark measures another page")
	}
	lazy, _, _ := strings.Cut(string(body[at+len(`data-lazy="`):]), `"`)
	lazy = html.UnescapeString(lazy)
	_, name, _ := strings.Cut(lazy, "path=")
	fn := strings.TrimSuffix(name[strings.LastIndex(name, "F")+1:], ".go")
	zipped, unz := getAs(b, d, page, true)
	if !bytes.Equal(unz[:len(unz)/2], body[:len(unz)/2]) {
		b.Fatal("the gzipped page is another page")
	}
	_, frag := getAs(b, d, lazy, false)
	if !bytes.Contains(frag, []byte(fn+"_0")) {
		b.Fatal("the lazy file has not its rows")
	}
	b.Run("page", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			getAs(b, d, page, false)
		}
		b.ReportMetric(float64(len(raw))/1024, "KiB/page")
		b.ReportMetric(float64(len(zipped))/1024, "gzip-KiB/page")
	})
	b.Run("page-gzip", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			getAs(b, d, page, true)
		}
	})
	b.Run("lazy-file", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			getAs(b, d, lazy, false)
		}
		b.ReportMetric(float64(len(frag))/1024, "KiB/file")
	})
}
