package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lazy/gitx"
	"lazy/gitx/gitxtest"
)

// browserPage is a dashboard page as a browser gets it: opened once through
// the login token (the session cookie), then fetched with that cookie.
func (p *project) browserPage(path string) (int, string) {
	p.t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	base := p.info().BaseURL
	resp, err := c.Get(p.login(base + "/"))
	if err != nil {
		p.t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = c.Get(base + path)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func trimGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return strings.TrimSpace(gitxtest.Git(t, dir, args...))
}

// twoCommits is a task's script: two commits of its own files.
func twoCommits(code string) string {
	return "@write " + code + "-1.txt one\n@commit " + code + " one\n@write " + code + "-2.txt two\n@commit " + code + " two\n@answer done"
}

// TestSyncConflictsSayUnblock (issue 25 item 9): a sync that hits conflicts
// exits 1 naming the files and the next step (unblock: the agent resolves
// them), the RPC says so in its status and message, and the review page's
// merge panel follows the real next step: Accept when the task merges
// cleanly (behind or not), Sync when it would conflict, Unblock once a sync
// left it in conflict.
func TestSyncConflictsSayUnblock(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "cl", "-m", "@write README.md # mine\n@commit mine")
	cl := p.waitStatus("cl", "blocked")
	p.lazy(0, "task", "new", "--code", "ok", "-m", "@write ok.txt ok\n@commit ok")
	ok := p.waitStatus("ok", "blocked")
	panel := func(id string) string {
		code, html := p.browserPage("/review/" + id)
		if code != http.StatusOK {
			t.Fatalf("review page of %s: %d\n%s", id, code, html)
		}
		return html
	}
	if html := panel(ok.ID); !strings.Contains(html, `data-next="accept"`) || !strings.Contains(html, "Next: <b>Accept</b>") {
		t.Errorf("a clean task's panel does not say Accept:\n%s", grepLines(html, "next"))
	}
	gitxtest.Commit(t, p.root, "main edits the README", map[string]string{"README.md": "# theirs\n"})
	// behind, but merging cleanly: still Accept, no sync asked
	if html := panel(ok.ID); !strings.Contains(html, `data-next="accept"`) || !strings.Contains(html, "no sync needed") {
		t.Errorf("a task behind a clean parent: the panel does not say Accept:\n%s", grepLines(html, "next"))
	}
	html := panel(cl.ID)
	if !strings.Contains(html, `data-next="sync"`) || !strings.Contains(html, "Next: <b>Sync</b>") || !strings.Contains(html, `<form class="sync-form" method="post" action="/review/`+cl.ID+`/sync">`) {
		t.Errorf("a task that would conflict: the panel does not say Sync:\n%s", grepLines(html, "next"))
	}
	out, errs, code := p.run("sync", "cl")
	if code != 1 || !strings.Contains(errs, "conflicts in README.md: unblock the task: the agent resolves them (lazy unblock cl)") {
		t.Fatalf("lazy sync with conflicts: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if st := p.show("cl").Status; st != "conflict" {
		t.Fatalf("status after a conflicting sync: %s", st)
	}
	html = panel(cl.ID)
	p.keep("sync-conflict-review.html", html)
	if !strings.Contains(html, `data-next="unblock"`) || !strings.Contains(html, "Next: <b>Unblock</b>") {
		t.Errorf("a task in conflict: the panel does not say Unblock:\n%s", grepLines(html, "next"))
	}
	if strings.Contains(html, `data-next="sync"`) || strings.Contains(html, "Sync with the parent") {
		t.Errorf("a task in conflict: the panel still offers a sync:\n%s", grepLines(html, "ync"))
	}
	// the RPC: a clear status, the files and the message
	p.lazy(0, "task", "new", "--code", "cl2", "-m", "@write README.md # also mine\n@commit also mine")
	p.waitStatus("cl2", "blocked")
	gitxtest.Commit(t, p.root, "main edits the README again", map[string]string{"README.md": "# theirs again\n"})
	var res struct {
		Status    string   `json:"status"`
		Conflicts []string `json:"conflicts"`
		Message   string   `json:"message"`
		Next      string   `json:"next"`
	}
	if err := p.rpc().Call(context.Background(), "sync", map[string]any{"task": "cl2", "wait": true}, &res); err != nil {
		t.Fatal(err)
	}
	if res.Status != "conflict" || strings.Join(res.Conflicts, ",") != "README.md" || res.Next != "unblock" ||
		res.Message != "conflicts in README.md: unblock the task: the agent resolves them (lazy unblock cl2)" {
		t.Errorf("sync RPC: %+v", res)
	}
	// a clean sync exits 0 and says the next step
	if out := p.lazy(0, "sync", "ok"); !strings.Contains(out, "synced") {
		t.Errorf("clean sync: %s", out)
	}
}

// TestAcceptMethods (issue 25 item 14): accept takes a merge method, in the
// CLI, the RPC and the page, and main's history holds exactly what each
// promises — no "Merge main into lazy/X" commit ever; merge: a fast-forward
// when the task holds main, else one merge commit of the task into main;
// squash: one commit with the task's title and the reason; rebase: the
// task's commits replayed, linear — and the user's checkout of main follows.
func TestAcceptMethods(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	for _, c := range []string{"ff", "mg", "sq", "rb", "rbx", "mgx", "rby"} {
		script := twoCommits(c)
		if strings.HasSuffix(c, "x") { // edits what main will edit too
			script = "@write main.go package main // " + c + "\n@commit " + c + " edits main.go"
		}
		if c == "rby" { // edits main.go and puts it back: the whole merges, a replay does not
			script = "@write main.go package main // rby\n@commit rby edits main.go\n@write main.go package main\\n\n@commit rby puts main.go back\n@write rby.txt y\n@commit rby adds a file"
		}
		p.lazy(0, "task", "new", "--code", c, "-m", script)
	}
	for _, c := range []string{"ff", "mg", "sq", "rb", "rbx", "mgx", "rby"} {
		p.waitStatus(c, "blocked")
	}
	main := func() string { return trimGit(t, p.root, "rev-parse", "main") }
	checkoutMatches := func(what string) {
		t.Helper()
		if head := trimGit(t, p.root, "rev-parse", "HEAD"); head != main() {
			t.Errorf("%s: the user's checkout is at %s, main at %s", what, head, main())
		}
		if st := trimGit(t, p.root, "status", "--porcelain", "--untracked-files=no"); st != "" {
			t.Errorf("%s: the user's checkout differs from main:\n%s", what, st)
		}
	}
	noMergeOfMain := func() {
		t.Helper()
		if log := trimGit(t, p.root, "log", "--format=%s", "main"); strings.Contains(log, "Merge main into") {
			t.Errorf("main has a merge of main into a task:\n%s", log)
		}
	}

	// a bad method is refused with the list, nothing merged
	before := main()
	if _, errs, code := p.run("accept", "ff", "--reason", "r", "--method", "octopus"); code != 1 || !strings.Contains(errs, "merge, squash, rebase") {
		t.Errorf("a bad method: exit %d %s", code, errs)
	}
	if err := p.rpc().Call(context.Background(), "reviewAccept", map[string]any{"task": "ff", "reason": "r", "method": "fast"}, nil); err == nil || !strings.Contains(err.Error(), "merge, squash, rebase") {
		t.Errorf("RPC with a bad method: %v", err)
	}
	if main() != before {
		t.Fatal("a refused method moved main")
	}

	// merge, the task holding main: a fast-forward to exactly its head
	ffHead := trimGit(t, p.root, "rev-parse", "lazy/ff")
	p.lazy(0, "accept", "ff", "--reason", "fine")
	if main() != ffHead {
		t.Errorf("merge of a task that holds main: main %s, want the task's head %s", main(), ffHead)
	}
	checkoutMatches("fast-forward")

	// merge, main moved on (ff went in): one merge commit of the task into
	// main, main first; the task's commits under it; no sync asked
	old, mgHead := main(), trimGit(t, p.root, "rev-parse", "lazy/mg")
	p.lazy(0, "accept", "mg", "--reason", "merge it", "--method", "merge")
	if n := trimGit(t, p.root, "rev-list", "--count", "--first-parent", old+"..main"); n != "1" {
		t.Errorf("merge: %s first-parent commits on main, want 1 merge commit", n)
	}
	if parents := trimGit(t, p.root, "log", "-1", "--format=%P", "main"); parents != old+" "+mgHead {
		t.Errorf("merge commit parents %q, want %q", parents, old+" "+mgHead)
	}
	if subj := trimGit(t, p.root, "log", "-1", "--format=%s", "main"); !strings.HasPrefix(subj, "Merge lazy/mg into main") {
		t.Errorf("merge commit subject %q", subj)
	}
	noMergeOfMain()
	checkoutMatches("merge")

	// squash through the page's accept form: one commit, one parent, the
	// task's title and the reason
	old = main()
	head := p.pageHead("sq")
	if html := p.page("/review/sq"); !strings.Contains(html, `name="method" value="squash"`) {
		t.Fatal("the accept form offers no merge method")
	}
	resp, err := p.request(http.MethodPost, "/review/sq/accept", "application/x-www-form-urlencoded",
		url.Values{"reason": {"squash reason"}, "head": {head}, "method": {"squash"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if st := p.show("sq").Status; st != "accepted" {
		t.Fatalf("squash from the page: %d, status %s", resp.StatusCode, st)
	}
	if n := trimGit(t, p.root, "rev-list", "--count", old+"..main"); n != "1" {
		t.Errorf("squash: %s new commits on main, want 1", n)
	}
	if parents := trimGit(t, p.root, "log", "-1", "--format=%P", "main"); parents != old {
		t.Errorf("squash commit parents %q, want %q", parents, old)
	}
	msg := trimGit(t, p.root, "log", "-1", "--format=%B", "main")
	if title := p.show("sq").Title; !strings.HasPrefix(msg, title) || !strings.Contains(msg, "squash reason") {
		t.Errorf("squash message:\n%s\nwant the title %q and the reason", msg, title)
	}
	for _, f := range []string{"sq-1.txt", "sq-2.txt"} {
		if _, err := os.Stat(filepath.Join(p.root, f)); err != nil {
			t.Errorf("squash: the checkout lacks %s", f)
		}
	}
	checkoutMatches("squash")

	// rebase: the task's two commits replayed onto main, no merge commit
	old = main()
	p.lazy(0, "accept", "rb", "--reason", "line", "--method", "rebase")
	if n := trimGit(t, p.root, "rev-list", "--count", old+"..main"); n != "2" {
		t.Errorf("rebase: %s new commits, want 2", n)
	}
	if merges := trimGit(t, p.root, "rev-list", "--merges", old+"..main"); merges != "" {
		t.Errorf("rebase left merge commits: %s", merges)
	}
	if subj := trimGit(t, p.root, "log", "--format=%s", old+"..main"); subj != "rb two\nrb one" {
		t.Errorf("rebase: commits %q", subj)
	}
	noMergeOfMain()
	checkoutMatches("rebase")

	// conflicts: main edits main.go; rebase is refused with a remedy,
	// merge with the sync remedy; nothing moves
	gitxtest.Commit(t, p.root, "main edits main.go", map[string]string{"main.go": "package main // main\n"})
	old = main()
	// a replay that stops where the whole change merges: merge or squash
	// is the way; where the whole conflicts too, the next step is a sync
	if _, errs, code := p.run("accept", "rby", "--reason", "r", "--method", "rebase"); code != 1 || !strings.Contains(errs, "stops on conflicts") || !strings.Contains(errs, "--method merge") {
		t.Errorf("a conflicting rebase of a change that merges: exit %d\n%s", code, errs)
	}
	if _, errs, code := p.run("accept", "rbx", "--reason", "r", "--method", "rebase"); code != 1 || !strings.Contains(errs, "does not merge cleanly") || !strings.Contains(errs, "run: lazy sync rbx") || strings.Contains(errs, "--method merge") {
		t.Errorf("a conflicting rebase of a change that conflicts whole: exit %d\n%s", code, errs)
	}
	if _, errs, code := p.run("accept", "mgx", "--reason", "r"); code != 1 || !strings.Contains(errs, "does not merge cleanly") || !strings.Contains(errs, "run: lazy sync mgx") {
		t.Errorf("a conflicting merge: exit %d\n%s", code, errs)
	}
	if main() != old {
		t.Error("a refused accept moved main")
	}
	if wts := trimGit(t, p.root, "worktree", "list"); strings.Contains(wts, "lazy-rebase-") {
		t.Errorf("the rebase left its worktree:\n%s", wts)
	}
	checkoutMatches("refusals")
	// every accepted task's page is still its record
	for _, c := range []string{"ff", "mg", "sq", "rb"} {
		if code, html := p.browserPage("/review/" + p.show(c).ID); code != http.StatusOK || !strings.Contains(html, c+"-1.txt") {
			t.Errorf("the ended page of %s: %d", c, code)
		}
	}
}

// TestPruneEndedTasks (issue 25 item 14): an accept or a cancel removes the
// task's worktree; `lazy task prune` removes what is left over, says what it
// removed (--dry-run: would remove), keeps ended tasks' branches for
// tasks.keep_branches and then deletes them, their commits kept under
// refs/lazy/ended/, and never touches a live task; the ended tasks' review
// pages still render after.
func TestPruneEndedTasks(t *testing.T) {
	p := newProject(t, "process")
	cfgPath := filepath.Join(p.root, ".lazy", "config.toml")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, append(b, "[tasks]\nkeep_branches = \"1h\"\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	p.lazy(0, "daemon", "start")
	for _, c := range []string{"acc", "can", "live"} {
		p.lazy(0, "task", "new", "--code", c, "-m", twoCommits(c))
	}
	for _, c := range []string{"acc", "can", "live"} {
		p.waitStatus(c, "blocked")
	}
	// squash: the task's own commits are on its branch only
	p.lazy(0, "accept", "acc", "--reason", "ok", "--method", "squash")
	p.lazy(0, "task", "cancel", "can")
	acc, can, live := p.show("acc"), p.show("can"), p.show("live")
	for _, c := range []string{"acc", "can"} {
		if _, err := os.Stat(filepath.Join(p.paths.Worktrees, c)); !os.IsNotExist(err) {
			t.Errorf("the worktree of ended task %s is still there: %v", c, err)
		}
	}
	// what an older daemon (or a crash) left behind
	left := filepath.Join(p.paths.Worktrees, "can")
	if err := os.MkdirAll(left, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(left, "stale.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	branches := func() string { return trimGit(t, p.root, "branch", "--list", "lazy/*", "--format=%(refname:short)") }

	out := p.lazy(0, "task", "prune", "--dry-run")
	if !strings.Contains(out, "can cancelled: would remove worktree "+left) || !strings.Contains(out, "keeps branch lazy/acc until") || !strings.Contains(out, "keeps branch lazy/can until") {
		t.Errorf("prune --dry-run:\n%s", out)
	}
	if _, err := os.Stat(left); err != nil {
		t.Error("--dry-run removed the worktree")
	}
	out = p.lazy(0, "task", "prune")
	if !strings.Contains(out, "can cancelled: removed worktree "+left) || strings.Contains(out, "removed branch") {
		t.Errorf("prune within keep_branches:\n%s", out)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Error("prune left the worktree")
	}
	if got := branches(); got != "lazy/acc\nlazy/can\nlazy/live" {
		t.Errorf("branches within keep_branches: %q", got)
	}
	// past the retention (given for this run): the ended tasks' branches go,
	// their commits kept; the live task keeps everything
	out = p.lazy(0, "task", "prune", "--keep-branches", "0s")
	for _, want := range []string{"acc accepted: removed branch lazy/acc (its commits stay at refs/lazy/ended/" + acc.ID + ")", "can cancelled: removed branch lazy/can"} {
		if !strings.Contains(out, want) {
			t.Errorf("prune past keep_branches lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "live") {
		t.Errorf("prune touched the live task:\n%s", out)
	}
	if got := branches(); got != "lazy/live" {
		t.Errorf("branches after prune: %q", got)
	}
	if _, err := os.Stat(filepath.Join(p.paths.Worktrees, "live")); err != nil {
		t.Errorf("the live task's worktree: %v", err)
	}
	if got := trimGit(t, p.root, "rev-parse", gitx.EndedRef(can.ID)); got != can.EndHead {
		t.Errorf("the cancelled task's commits: %s at %s, want %s", gitx.EndedRef(can.ID), got, can.EndHead)
	}
	trimGit(t, p.root, "gc", "--prune=now", "--quiet")
	for _, tk := range []struct{ id, file string }{{acc.ID, "acc-2.txt"}, {can.ID, "can-2.txt"}} {
		code, html := p.browserPage("/review/" + tk.id)
		if code != http.StatusOK || !strings.Contains(html, tk.file) || !strings.Contains(html, `class="ended`) && !strings.Contains(html, "ended") {
			t.Errorf("the ended page of %s after prune and gc: %d\n%s", tk.id, code, grepLines(html, "ended"))
		}
	}
	if st := p.show("live").Status; st != "blocked" || live.Branch != "lazy/live" {
		t.Errorf("the live task: %s", st)
	}
	if out := p.lazy(0, "task", "prune"); !strings.Contains(out, "nothing to prune") {
		t.Errorf("a second prune:\n%s", out)
	}
}

// TestPruneSweepsByItself: with a short tasks.keep_branches the daemon
// deletes an ended task's branch on its own once it is due, keeping its
// commits, and leaves the live task's alone.
func TestPruneSweepsByItself(t *testing.T) {
	p := newProject(t, "process")
	cfgPath := filepath.Join(p.root, ".lazy", "config.toml")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, append(b, "[tasks]\nkeep_branches = \"2s\"\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "gone", "-m", twoCommits("gone"))
	p.lazy(0, "task", "new", "--code", "stay", "-m", twoCommits("stay"))
	p.waitStatus("gone", "blocked")
	p.waitStatus("stay", "blocked")
	p.lazy(0, "task", "cancel", "gone")
	gone := p.show("gone")
	waitFor(t, "the sweep to delete lazy/gone", func() bool {
		return !gitx.BranchExists(context.Background(), p.root, "lazy/gone")
	})
	if got := trimGit(t, p.root, "rev-parse", gitx.EndedRef(gone.ID)); got != gone.EndHead {
		t.Errorf("kept ref %s, want %s", got, gone.EndHead)
	}
	if !gitx.BranchExists(context.Background(), p.root, "lazy/stay") {
		t.Error("the sweep deleted a live task's branch")
	}
	if code, html := p.browserPage("/review/" + gone.ID); code != http.StatusOK || !strings.Contains(html, "gone-1.txt") {
		t.Errorf("the swept task's page: %d", code)
	}
}

// waitFor polls cond until it holds (or fails the test after 30 s).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
