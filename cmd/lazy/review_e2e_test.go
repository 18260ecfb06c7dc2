package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lazy/api"
	"lazy/client"
	"lazy/gitx/gitxtest"
	"lazy/proxy"
	"lazy/review"
	"lazy/scriptagent"
)

func (p *project) rpc() *client.Client {
	p.t.Helper()
	c, _, err := client.Discover(p.paths)
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

func (p *project) post(ref string, a api.PostCommentArgs) review.ReviewComment {
	p.t.Helper()
	var c review.ReviewComment
	args := map[string]any{"task": ref, "body": a.Body, "file": a.File, "line": a.Line, "start_line": a.StartLine, "side": a.Side, "intent": a.Intent, "thread_id": a.ThreadID}
	if err := p.rpc().Call(context.Background(), "reviewPostComment", args, &c); err != nil {
		p.t.Fatalf("post %q: %v", a.Body, err)
	}
	return c
}

func (p *project) threads(ref string) review.Payload {
	p.t.Helper()
	var pl review.Payload
	if err := p.rpc().Call(context.Background(), "reviewComments", map[string]string{"task": ref}, &pl); err != nil {
		p.t.Fatal(err)
	}
	return pl
}

// waitThreads polls the threads payload until cond holds.
func (p *project) waitThreads(ref string, what string, cond func(review.Payload) bool) review.Payload {
	p.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		pl := p.threads(ref)
		if cond(pl) {
			return pl
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out waiting for %s: %+v", what, pl)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func find(pl review.Payload, id string) review.ReviewComment {
	for _, th := range pl.Threads {
		for _, m := range th.Messages {
			if m.ID == id {
				return m
			}
		}
	}
	return review.ReviewComment{}
}

// fourLines is a task whose first turn commits a four-line file.
const fourLines = "write a\n@write a.go one\\ntwo\\nthree\\nfour\\n\n@commit add a.go\n@answer wrote a.go"

func TestReviewSequenceWithScriptedAgent(t *testing.T) {
	t.Run("sql", func(t *testing.T) { checkReviewSequence(t, "") })
	t.Run("file", func(t *testing.T) { checkReviewSequence(t, "file") })
}

func checkReviewSequence(t *testing.T, backend string) {
	p := newProject(t, "process")
	if backend != "" {
		p.env = append(p.env, "LAZY_STORAGE__BACKEND="+backend)
	}
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "seq", "-m", fourLines)
	p.waitStatus("seq", "blocked")
	c1 := p.post("seq", api.PostCommentArgs{Body: "C1: rename one\n@write a.go ONE\\ntwo\\nthree\\nfour\\n\n@commit rename", File: "a.go", Line: 1, Side: "new", Intent: "comment"})
	a1 := p.post("seq", api.PostCommentArgs{Body: "A1: why two?", File: "a.go", Line: 2, Side: "new", Intent: "ask"})
	c2 := p.post("seq", api.PostCommentArgs{Body: "C2: keep three", File: "a.go", Line: 3, Side: "new", Intent: "comment"})
	a2 := p.post("seq", api.PostCommentArgs{Body: "A2: and four?", File: "a.go", Line: 4, Side: "new", Intent: "ask"})
	if c1.LineText != "one" || a2.LineText != "four" || c1.DeliveryState != review.PendingDelivery || a1.AskState != review.AskPending {
		t.Fatalf("saved records: %+v / %+v", c1, a2)
	}
	var turn struct {
		Number int `json:"seq"` // the work turn's number, which delivered_turn names
	}
	if err := p.rpc().Call(context.Background(), "reviewUnblock", map[string]string{"task": "seq", "feedback": "Overall: ship it"}, &turn); err != nil {
		t.Fatal(err)
	}
	p.waitThreads("seq", "delivery", func(pl review.Payload) bool {
		return find(pl, c1.ID).DeliveryState == review.Delivered && find(pl, a2.ID).AskState == review.AskAnswered
	})
	p.waitStatus("seq", "blocked")
	turns, err := scriptagent.ReadTurns(filepath.Join(p.paths.Agents, "seq", "home"))
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 4 {
		t.Fatalf("the agent recorded %d turns, want 4 (first work turn + A1 + A2 + one unblock work turn)", len(turns))
	}
	after := turns[1:]
	if after[0].Mode != "plan" || !strings.Contains(after[0].Prompt, "A1: why two?") || !strings.Contains(after[0].Prompt, "a.go, line 2 (new)") {
		t.Errorf("turn 2 must be A1, read-only: %+v", after[0])
	}
	if after[1].Mode != "plan" || !strings.Contains(after[1].Prompt, "A2: and four?") {
		t.Errorf("turn 3 must be A2, read-only: %+v", after[1])
	}
	w := after[2]
	if w.Mode == "plan" || !strings.Contains(w.Prompt, "C1: rename one") || !strings.Contains(w.Prompt, "C2: keep three") ||
		!strings.Contains(w.Prompt, "Line: one") || !strings.Contains(w.Prompt, "Overall: ship it") || strings.Contains(w.Prompt, "A1: why two?") {
		t.Errorf("turn 4 must be the work turn with C1, C2 and the message:\n%s", w.Prompt)
	}
	for _, tr := range after {
		if !tr.Resumed || tr.Session != turns[0].Session {
			t.Errorf("every later turn resumes the first session: %+v", tr)
		}
	}
	pl := p.threads("seq")
	for _, c := range []review.ReviewComment{c1, c2} {
		if got := find(pl, c.ID); got.DeliveredTurn != turn.Number || got.DeliveryState != review.Delivered {
			t.Errorf("%s: %s turn %d, want delivered with turn %d", c.Body, got.DeliveryState, got.DeliveredTurn, turn.Number)
		}
	}
	if pl.Pending != 0 || pl.PendingDelivery != 0 || len(pl.Queued) != 0 {
		t.Errorf("counts after delivery: %+v", pl)
	}
	// the work turn really ran: the comment's directive changed the file
	if out := gitxtest.Git(t, p.root, "show", "lazy/seq:a.go"); !strings.HasPrefix(out, "ONE") {
		t.Errorf("a.go on the branch: %q", out)
	}
	// the ask's answer is on its thread, same anchor
	for _, th := range pl.Threads {
		if th.ID == a1.ThreadID && (len(th.Messages) != 2 || th.Messages[1].Actor != review.Agent || th.Line != 2 || th.Orphan) {
			t.Errorf("A1's thread: %+v", th)
		}
	}
	if backend == "file" {
		files, _ := filepath.Glob(filepath.Join(p.paths.FileStore, "*.jsonl"))
		if _, err := os.Stat(p.paths.DB); len(files) != 1 || err == nil {
			t.Errorf("the file backend must keep one JSON-lines file per task and no lazy.db: %v", files)
		}
	}
	// a review comment never feeds the auto-react loop
	before := len(turns)
	p.post("seq", api.PostCommentArgs{Body: "just a note", File: "a.go", Line: 1, Side: "new", Intent: "comment"})
	time.Sleep(500 * time.Millisecond)
	turns, _ = scriptagent.ReadTurns(filepath.Join(p.paths.Agents, "seq", "home"))
	if len(turns) != before || p.show("seq").Status != "blocked" {
		t.Error("a review comment started a turn")
	}
}

func TestAskOnRunningTaskAndBadAnchors(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "busy", "-m", fourLines+"\n@sleep 3s")
	for p.show("busy").Turns != 1 {
		time.Sleep(50 * time.Millisecond)
	}
	// the diff is empty while the first turn runs: an anchor outside it is refused
	err := p.rpc().Call(context.Background(), "reviewPostComment", map[string]any{"task": "busy", "body": "x", "file": "nope.go", "line": 1, "side": "new", "intent": "ask"}, nil)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 400 || !strings.Contains(ce.Message, "not a line of the current diff") {
		t.Fatalf("bad anchor: %v", err)
	}
	for _, bad := range []map[string]any{
		{"task": "busy", "body": "", "file": "a.go", "line": 1, "side": "new", "intent": "ask"},
		{"task": "busy", "body": "x", "file": "a.go", "line": 1, "side": "left", "intent": "ask"},
		{"task": "busy", "body": "x", "file": "a.go", "line": 1, "side": "new", "intent": "shout"},
		{"task": "nosuch", "body": "x", "file": "a.go", "line": 1, "side": "new", "intent": "ask"},
	} {
		if err := p.rpc().Call(context.Background(), "reviewPostComment", bad, nil); !errors.As(err, &ce) || ce.Status/100 != 4 {
			t.Errorf("%v: got %v, want a 4xx", bad, err)
		}
	}
	p.waitStatus("busy", "blocked")
	// once blocked, an ask posted on a now-running task (unblock with a slow turn) is saved and failed
	p.lazy(0, "unblock", "busy", "-m", "@sleep 3s")
	for p.show("busy").Status != "running" {
		time.Sleep(50 * time.Millisecond)
	}
	c := p.post("busy", api.PostCommentArgs{Body: "what now?", File: "a.go", Line: 1, Side: "new", Intent: "ask"})
	if c.AskState != review.AskFailed || !strings.Contains(c.AskError, "working on a turn") || c.Body != "what now?" {
		t.Fatalf("ask on a running task: %+v", c)
	}
	p.waitStatus("busy", "blocked")
	var res api.ActionResult
	if err := p.rpc().Call(context.Background(), "reviewRetryAsk", map[string]string{"task": "busy", "id": c.ID}, &res); err != nil {
		t.Fatal(err)
	}
	p.waitThreads("busy", "retried ask answered", func(pl review.Payload) bool { return find(pl, c.ID).AskState == review.AskAnswered })
}

func TestAcceptRefusalsAndRemedies(t *testing.T) {
	p := newProject(t, "process")
	cfgPath := filepath.Join(p.root, ".lazy", "config.toml")
	b, _ := os.ReadFile(cfgPath)
	if err := os.WriteFile(cfgPath, append(b, []byte("\n[protect]\npaths = [\".github/**\"]\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	p.lazy(0, "daemon", "start")
	accept := func(ref string, extra map[string]any) (*client.Error, *review.Remedy) {
		args := map[string]any{"task": ref, "reason": "looks good"}
		for k, v := range extra {
			args[k] = v
		}
		err := p.rpc().Call(context.Background(), "reviewAccept", args, nil)
		if err == nil {
			return nil, nil
		}
		var ce *client.Error
		if !errors.As(err, &ce) {
			t.Fatalf("accept %s: %v", ref, err)
		}
		return ce, review.ParseRemedy(ce.Remedy)
	}

	// no commits
	p.lazy(0, "task", "new", "--code", "empty", "-m", "@answer nothing to do")
	p.waitStatus("empty", "blocked")
	if ce, r := accept("empty", nil); ce == nil || r == nil || r.Reason != review.ReasonNoCommits || !strings.Contains(ce.Message, "no commits") {
		t.Errorf("no commits: %v %+v", ce, r)
	}
	// the CLI shows the daemon's message, the next step and the exact command
	_, errs, code := p.run("accept", "empty", "--reason", "ok")
	if code != 1 || !strings.Contains(errs, "has no commits") || !strings.Contains(errs, "next: Unblock the task") || !strings.Contains(errs, "run: lazy unblock empty -m") {
		t.Errorf("lazy accept refusal: exit %d\n%s", code, errs)
	}

	// behind its parent, merging cleanly → accepted as it is: one merge
	// commit of the task into main, no sync asked first
	p.lazy(0, "task", "new", "--code", "behind", "-m", "@write b.txt b\n@commit b")
	p.waitStatus("behind", "blocked")
	gitxtest.Commit(t, p.root, "parent moves", map[string]string{"parent.txt": "p"})
	if ce, r := accept("behind", nil); ce != nil {
		t.Fatalf("accept behind the parent: %v %+v", ce, r)
	}
	if ti := p.show("behind"); ti.Status != "accepted" {
		t.Errorf("status after accept: %s", ti.Status)
	}
	if out := gitxtest.Git(t, p.root, "log", "--oneline", "main"); !strings.Contains(out, " b") {
		t.Errorf("main lacks the task's commit:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(p.paths.Worktrees, "behind")); !os.IsNotExist(err) {
		t.Error("the accepted task's worktree is still there")
	}
	grants, _ := proxy.LoadGrants(p.paths.ProxyTokens)
	for _, g := range grants {
		if g.TaskRef == "behind" {
			t.Error("the accepted task's grant was not revoked")
		}
	}

	// a conflicting sync → conflict status (askable, not queued) → merge_in_progress
	p.lazy(0, "task", "new", "--code", "clash", "-m", "@write parent.txt mine\n@commit mine")
	p.waitStatus("clash", "blocked")
	gitxtest.Commit(t, p.root, "parent edits the same file", map[string]string{"parent.txt": "theirs"})
	// the sync did not bring the task up to date: exit 1, and the next
	// step is an unblock (the agent resolves the conflicts)
	_, errs, code = p.run("sync", "clash")
	if code != 1 || !strings.Contains(errs, "conflicts in parent.txt: unblock the task: the agent resolves them (lazy unblock clash)") || p.show("clash").Status != "conflict" {
		t.Fatalf("conflicting sync: exit %d %s %s", code, errs, p.show("clash").Status)
	}

	var q []api.QueueItem
	_ = p.rpc().Call(context.Background(), "reviewQueue", nil, &q)
	for _, it := range q {
		if it.Task.Code == "clash" {
			t.Error("a conflict task is listed in the queue")
		}
	}
	a := p.post("clash", api.PostCommentArgs{Body: "which side?", File: "parent.txt", Line: 1, Side: "new", Intent: "ask"})
	p.waitThreads("clash", "ask in conflict", func(pl review.Payload) bool { return find(pl, a.ID).AskState == review.AskAnswered })
	if ce, r := accept("clash", nil); ce == nil || r == nil || r.Reason != review.ReasonMergeInProgress {
		t.Errorf("merge in progress: %v %+v", ce, r)
	}

	// out of scope → allow decision → protected → wrong passphrase (403) → right one
	p.lazy(0, "task", "new", "--code", "wide", "--scope", "src/**", "-m", "@write src/a.go a\n@write README.md changed\n@write .github/ci.yml on: push\n@commit wide")
	p.waitStatus("wide", "blocked")
	ce, r := accept("wide", nil)
	if ce == nil || r == nil || r.Reason != review.ReasonOutOfScope || strings.Join(r.Files, ",") != ".github/ci.yml,README.md" {
		t.Fatalf("out of scope: %v %+v", ce, r)
	}
	if err := p.rpc().Call(context.Background(), "reviewViolationDecision", map[string]any{"task": "wide", "decision": "revert", "files": []string{"README.md"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.rpc().Call(context.Background(), "reviewViolationDecision", map[string]any{"task": "wide", "decision": "allow", "files": []string{".github/ci.yml"}}, nil); err != nil {
		t.Fatal(err)
	}
	ce, r = accept("wide", nil)
	if ce == nil || r == nil || r.Reason != review.ReasonPassphraseRequired || r.UIAction != review.ActionPassphrase ||
		r.Command != "lazy accept wide --reason 'looks good' --approve-file .github/ci.yml" {
		t.Fatalf("protected: %v %+v", ce, r)
	}
	if ce, _ := accept("wide", map[string]any{"passphrase": "anything"}); ce == nil || !strings.Contains(ce.Message, "lazy passphrase set") {
		t.Fatalf("no passphrase set yet: %v", ce)
	}
	setPass := p.cmd("passphrase", "set")
	setPass.Stdin = strings.NewReader("correct horse battery\n")
	if out, err := setPass.CombinedOutput(); err != nil {
		t.Fatalf("passphrase set: %v %s", err, out)
	}
	if ce, r := accept("wide", map[string]any{"passphrase": "wrong horse battery"}); ce == nil || ce.Status != 403 || r == nil || r.UIAction != review.ActionPassphrase {
		t.Fatalf("wrong passphrase: %v %+v", ce, r)
	}
	// the forged approval of issue 11: the storage RPC is read-only, so an
	// approval written with the auth token (which a process-runner agent
	// could read) does not exist and the gate still asks
	wide := p.show("wide")
	err := p.rpc().Call(context.Background(), "storage.addApproval", map[string]any{"approval": map[string]any{"task_id": wide.ID, "path": ".github/ci.yml", "kind": "protected"}}, nil)
	var forged *client.Error
	if !errors.As(err, &forged) || forged.Status != 403 || !strings.Contains(forged.Message, "read-only") {
		t.Fatalf("storage.addApproval: %v", err)
	}
	if ce, r := accept("wide", nil); ce == nil || r == nil || r.Reason != review.ReasonPassphraseRequired {
		t.Fatalf("after a forged approval the accept must still ask for the passphrase: %v %+v", ce, r)
	}
	// lazy approve reads the passphrase (here from stdin) and records the approval
	approveCmd := p.cmd("approve", "wide", "--file", ".github/ci.yml")
	approveCmd.Stdin = strings.NewReader("wrong horse battery\n")
	if out, err := approveCmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "wrong approval passphrase") || strings.Contains(string(out), "horse") {
		t.Fatalf("lazy approve with a wrong passphrase: %v %s", err, out)
	}
	// refusals are answers, not failures: actor health has no last failure
	resp, err := p.get("/api/actors")
	if err != nil {
		t.Fatal(err)
	}
	var health []struct {
		Name        string `json:"name"`
		LastFailure string `json:"last_failure"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&health)
	resp.Body.Close()
	for _, h := range health {
		if h.LastFailure != "" {
			t.Errorf("%s: a refused accept shows as a failure: %s", h.Name, h.LastFailure)
		}
	}
	// the third wrong one starts a wait that even the right one must sit out
	if ce, _ := accept("wide", map[string]any{"passphrase": "wrong horse battery"}); ce == nil || !strings.Contains(ce.Message, "wait 1s") {
		t.Fatalf("third wrong passphrase: %v", ce)
	}
	if ce, _ := accept("wide", map[string]any{"passphrase": "correct horse battery"}); ce == nil || ce.Status != 429 || !strings.Contains(ce.Message, "too many wrong passphrases") {
		t.Fatalf("a try within the wait: %v", ce)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		approveCmd = p.cmd("approve", "wide", "--file", ".github/ci.yml")
		approveCmd.Stdin = strings.NewReader("correct horse battery\n")
		out, err := approveCmd.CombinedOutput()
		if err == nil {
			break
		}
		if !strings.Contains(string(out), "wait") || time.Now().After(deadline) {
			t.Fatalf("lazy approve: %v %s", err, out)
		}
		time.Sleep(200 * time.Millisecond) // the wait the refusal states
	}
	if out := p.lazy(0, "accept", "wide", "--reason", "approved at the terminal"); !strings.Contains(out, "wide: accepted into main") {
		t.Fatalf("accept after approve: %s", out)
	}
	if gitxtest.Git(t, p.root, "show", "main:src/a.go") != "a" || strings.Contains(gitxtest.Git(t, p.root, "show", "main:README.md"), "changed") ||
		!strings.Contains(gitxtest.Git(t, p.root, "show", "main:.github/ci.yml"), "on: push") {
		t.Error("main after accepting wide: want src/a.go and .github/ci.yml, README.md reverted")
	}
	for _, f := range []string{p.paths.Log, p.paths.DB} {
		b, _ := os.ReadFile(f)
		if strings.Contains(string(b), "horse") {
			t.Errorf("the passphrase reached %s", f)
		}
	}
}

func (p *project) cmd(args ...string) *execCmd {
	c := newExec(lazyBin, append(args, "--project", p.root)...)
	c.Env = p.env
	return c
}

func TestKill9BetweenCommentAndAnswer(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "k", "-m", fourLines)
	p.waitStatus("k", "blocked")
	pid := p.info().PID
	a := p.post("k", api.PostCommentArgs{Body: "slow question\n@sleep 20s", File: "a.go", Line: 1, Side: "new", Intent: "ask"})
	c := p.post("k", api.PostCommentArgs{Body: "a queued note", File: "a.go", Line: 2, Side: "new", Intent: "comment"})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for syscallAlive(pid) {
		time.Sleep(20 * time.Millisecond)
	}
	// the scripted agent of the cut-off ask is orphaned; it must not hold things up
	p.lazy(0, "daemon", "start")
	pl := p.threads("k")
	if got := find(pl, a.ID); got.ID == "" || got.Body != "slow question\n@sleep 20s" {
		t.Fatalf("the 201-acknowledged ask is lost: %+v", pl)
	}
	if got := find(pl, c.ID); got.DeliveryState != review.PendingDelivery {
		t.Fatalf("the queued comment: %+v", got)
	}
	if got := find(pl, a.ID); got.AskState != review.AskPending {
		t.Fatalf("after the restart the ask must be re-queued: %s %q", got.AskState, got.AskError)
	}
	p.waitThreads("k", "the re-queued ask answered", func(pl review.Payload) bool { return find(pl, a.ID).AskState == review.AskAnswered })
}

// TestLargeUnblockReachesTheAgent: three comments of 63 KB each (189 KB with
// the message: over the 128 KiB one argv string may hold) reach the agent
// whole, on standard input, in the default sandbox; a 5 MiB unblock message
// is refused at once with the limit named, and nothing is queued.
func TestLargeUnblockReachesTheAgent(t *testing.T) {
	requireBwrap(t)
	p := newProject(t, "")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "big", "-m", fourLines)
	p.waitStatus("big", "blocked")
	var ids []string
	for i := 1; i <= 3; i++ {
		body := fmt.Sprintf("C%d ", i) + strings.Repeat(fmt.Sprint(i), 63_000)
		ids = append(ids, p.post("big", api.PostCommentArgs{Body: body, File: "a.go", Line: i, Side: "new", Intent: "comment"}).ID)
	}
	if err := p.rpc().Call(context.Background(), "reviewUnblock", map[string]string{"task": "big", "feedback": "all three, please"}, nil); err != nil {
		t.Fatal(err)
	}
	p.waitThreads("big", "delivery", func(pl review.Payload) bool {
		for _, id := range ids {
			if find(pl, id).DeliveryState != review.Delivered {
				return false
			}
		}
		return true
	})
	p.waitStatus("big", "blocked")
	turns, err := scriptagent.ReadTurns(filepath.Join(p.paths.Agents, "big", "home"))
	if err != nil || len(turns) != 2 {
		t.Fatalf("turns: %d %v", len(turns), err)
	}
	got := turns[1].Prompt
	for i := 1; i <= 3; i++ {
		if !strings.Contains(got, fmt.Sprintf("C%d ", i)+strings.Repeat(fmt.Sprint(i), 63_000)) {
			t.Fatalf("comment %d did not reach the agent whole (prompt %d bytes)", i, len(got))
		}
	}
	if len(got) < 189_000 || !strings.Contains(got, "all three, please") {
		t.Fatalf("prompt of %d bytes", len(got))
	}
	// 5 MiB of message: refused now, with the limit, nothing queued
	before := p.show("big").Turns
	err = p.rpc().Call(context.Background(), "reviewUnblock", map[string]string{"task": "big", "feedback": strings.Repeat("m", 5<<20)}, nil)
	var se interface{ HTTPStatus() int }
	if !errors.As(err, &se) || se.HTTPStatus() != 413 || !strings.Contains(err.Error(), "limit 1048576") {
		t.Fatalf("a 5 MiB unblock: %v", err)
	}
	if after := p.show("big").Turns; after != before {
		t.Fatalf("a refused unblock queued a turn (%d -> %d)", before, after)
	}
}

// TestWithdrawWhileUnblockWaitsForASlot is issue 11's sequence on the real
// daemon: agent.max_concurrent = 1 and another task's turn holds the slot;
// queue a comment, unblock (the turn waits for the slot), withdraw. The
// withdrawn comment never reaches the agent and is never marked delivered.
func TestWithdrawWhileUnblockWaitsForASlot(t *testing.T) {
	p := newProject(t, "process")
	p.env = append(p.env, "LAZY_AGENT__MAX_CONCURRENT=1")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "wd", "-m", fourLines)
	p.waitStatus("wd", "blocked")
	c := p.post("wd", api.PostCommentArgs{Body: "WITHDRAW-ME rename it", File: "a.go", Line: 1, Side: "new", Intent: "comment"})
	p.lazy(0, "task", "new", "--code", "holder", "-m", "@sleep 3s\n@answer done")
	p.waitStatus("holder", "running")
	if err := p.rpc().Call(context.Background(), "reviewUnblock", map[string]string{"task": "wd", "feedback": "carry on"}, nil); err != nil {
		t.Fatal(err)
	}
	var res api.ActionResult
	if err := p.rpc().Call(context.Background(), "reviewWithdrawComment", map[string]string{"task": "wd", "id": c.ID}, &res); err != nil {
		t.Fatalf("withdraw while the unblock waits: %v", err)
	}
	if p.show("holder").Status != "running" {
		t.Fatal("the slot was free by the time of the withdrawal: the sequence did not happen")
	}
	p.waitStatus("holder", "blocked")
	p.waitThreads("wd", "the unblock turn to end", func(pl review.Payload) bool { return pl.State.Turns == 2 && pl.State.Status == "blocked" })
	turns, err := scriptagent.ReadTurns(filepath.Join(p.paths.Agents, "wd", "home"))
	if err != nil || len(turns) != 2 {
		t.Fatalf("turns: %d %v", len(turns), err)
	}
	if strings.Contains(turns[1].Prompt, "WITHDRAW-ME") || !strings.Contains(turns[1].Prompt, "carry on") {
		t.Fatalf("the agent got:\n%s", turns[1].Prompt)
	}
	got := find(p.threads("wd"), c.ID)
	if got.WithdrawnAt == nil || got.DeliveryState == review.Delivered {
		t.Fatalf("the withdrawn comment: %+v", got)
	}
}

// TestMergeReadiness: the review page says, before Accept, whether the task
// merges cleanly into its parent (a dry run that changes nothing), and names
// the conflicting files when it does not.
func TestMergeReadiness(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "mr", "-m", "@write main.go package main\\n\\nfunc main() { println(1) }\\n\n@commit one\n@answer Changed main.go to print 1.")
	ti := p.waitStatus("mr", "blocked")
	page := func() string {
		resp, err := p.get("/review/" + ti.ID)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	got := page()
	for _, want := range []string{`data-merge="clean"`, "Merges cleanly", "Changed main.go to print 1.", "<span class=\"subject\">one</span>", "#turn-1\">turn 1</a>"} {
		if !strings.Contains(got, want) {
			t.Errorf("clean: the page lacks %q", want)
		}
	}
	runGit(t, p.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "parent side", "--allow-empty")
	if err := os.WriteFile(filepath.Join(p.root, "main.go"), []byte("package main\n\nfunc main() { println(2) }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, p.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "parent changes main.go")
	head, status := runGit(t, p.root, "rev-parse", "HEAD"), runGit(t, p.root, "status", "--porcelain")
	got = page()
	for _, want := range []string{`data-merge="conflict"`, "<li><code>main.go</code></li>", `data-next="sync"`, "Next: <b>Sync</b>", `<form class="sync-form"`} {
		if !strings.Contains(got, want) {
			t.Errorf("conflict: the page lacks %q", want)
		}
	}
	if runGit(t, p.root, "rev-parse", "HEAD") != head || runGit(t, p.root, "status", "--porcelain") != status {
		t.Fatal("the dry run changed the project")
	}
	var d api.DiffResult
	resp, err := p.get("/api/review/" + ti.ID + "/diff")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || d.Merge == nil || d.Merge.Clean || d.Merge.Behind != 2 || len(d.Commits) != 1 {
		t.Fatalf("diff JSON: %+v %v", d.Merge, err)
	}
}

// TestRangeComment: a comment on lines 1-3 carries its range to the agent's
// prompt and to the page; a range that does not end before its line is
// refused with what to do.
func TestRangeComment(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "rg", "-m", fourLines)
	ti := p.waitStatus("rg", "blocked")
	c := p.post(ti.ID, api.PostCommentArgs{Body: "These three lines go together.", File: "a.go", Line: 3, StartLine: 1, Side: "new", Intent: "comment"})
	if c.StartLine != 1 || c.Line != 3 {
		t.Fatalf("comment: lines %d-%d", c.StartLine, c.Line)
	}
	err := p.rpc().Call(context.Background(), "reviewPostComment", map[string]any{"task": ti.ID, "body": "x", "file": "a.go", "line": 2, "start_line": 4, "side": "new", "intent": "comment"}, nil)
	if err == nil || !strings.Contains(err.Error(), "a range starts at a line from 1 to 2") {
		t.Fatalf("a range past its line: %v", err)
	}
	if page := p.page("/review/" + ti.ID); !strings.Contains(page, "lines 1–3") {
		t.Error("the page does not show the range")
	}
	p.lazy(0, "unblock", "rg", "-m", "@answer ok")
	for i := 0; p.show("rg").Turns < 2 || p.show("rg").Status != "blocked"; i++ {
		if i > 600 {
			t.Fatal("the unblock turn did not end")
		}
		time.Sleep(100 * time.Millisecond)
	}
	turns, err := scriptagent.ReadTurns(filepath.Join(p.paths.Agents, "rg", "home"))
	if err != nil || len(turns) != 2 || !strings.Contains(turns[1].Prompt, "a.go, lines 1-3 (new)") {
		t.Fatalf("the unblock prompt lacks the range: %v %+v", err, turns)
	}
}
