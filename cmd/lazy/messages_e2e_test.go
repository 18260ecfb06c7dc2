package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lazy/api"
	"lazy/review"
	"lazy/scriptagent"
)

// shown is `lazy task show --json`: the task object with its turn records
// and task messages.
type shown struct {
	api.TaskInfo
	TurnRecords []api.Turn    `json:"turn_records"`
	Comments    []api.Comment `json:"comments"`
}

func (p *project) showAll(ref string) shown {
	p.t.Helper()
	var s shown
	if err := json.Unmarshal([]byte(p.lazy(0, "task", "show", ref, "--json")), &s); err != nil {
		p.t.Fatal(err)
	}
	return s
}

// waitFor polls the task until cond holds (or fails the test).
func (p *project) waitFor(ref, what string, cond func(shown) bool) shown {
	p.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := p.showAll(ref)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("task %s: timed out waiting for %s: %+v", ref, what, s.TaskInfo)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// agentTurns is what the scripted agent of task ref saw, turn by turn.
func (p *project) agentTurns(ref string) []scriptagent.TurnRecord {
	p.t.Helper()
	turns, err := scriptagent.ReadTurns(filepath.Join(p.paths.Agents, ref, "home"))
	if err != nil {
		p.t.Fatal(err)
	}
	return turns
}

// reconfigure rewrites the project's config with edit and waits until the
// daemon says it applied it.
func (p *project) reconfigure(edit func(string) string) {
	p.t.Helper()
	path := filepath.Join(p.root, ".lazy", "config.toml")
	b, err := os.ReadFile(path)
	if err != nil {
		p.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lines := p.watch(ctx)
	if err := os.WriteFile(path+".tmp", []byte(edit(string(b))), 0o644); err != nil {
		p.t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		p.t.Fatal(err)
	}
	for {
		select {
		case l := <-lines:
			if strings.Contains(l, "config applied") {
				return
			}
			if strings.Contains(l, "config not applied") {
				p.t.Fatalf("the config change was refused: %s", l)
			}
		case <-ctx.Done():
			p.t.Fatal("the daemon never applied the config change")
		}
	}
}

func messageOf(s shown, body string) api.Comment {
	for _, c := range s.Comments {
		if strings.Contains(c.Body, body) {
			return c
		}
	}
	return api.Comment{}
}

// TestTaskMessageRidesTheNextWorkTurn (issue 25, item 2): `lazy comment` on
// a running task says it is queued for the next work turn; the running
// turn does not carry it, the next one does (in its prompt) and it is
// marked delivered with that turn. A turn that fails to start leaves a
// message queued; an ended task refuses one.
func TestTaskMessageRidesTheNextWorkTurn(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "msg", "-m", "first\n@sleep 3s\n@write a.txt a\\n\n@commit add a\n@answer one")
	// the first turn's agent has started: what is queued now is not in it
	p.waitFor("msg", "the first turn's agent to start", func(s shown) bool {
		return len(s.TurnRecords) == 1 && s.TurnRecords[0].StartedAt != nil && s.Status == "running"
	})
	out := p.lazy(0, "comment", "msg", "-m", "MSG-ONE: also write b.txt")
	t.Logf("lazy comment on a running task: %s", out)
	if !strings.HasPrefix(out, "queued: delivered with the next work turn") || strings.Contains(out, "comment saved") {
		t.Fatalf("lazy comment on a running task says %q, want \"queued: delivered with the next work turn …\"", out)
	}
	if pl := p.threads("msg"); pl.PendingDelivery != 1 || pl.State.Queued != 1 || len(pl.Threads) != 0 {
		t.Errorf("threads payload: pendingDelivery %d, state.queued %d, threads %d; want 1, 1, 0 (a task message is on no line)", pl.PendingDelivery, pl.State.Queued, len(pl.Threads))
	}
	s := p.waitStatus("msg", "blocked")
	if s.Turns != 1 {
		t.Fatalf("the message started a turn of its own on a running task: turns %d", s.Turns)
	}
	if seen := p.agentTurns("msg"); len(seen) != 1 || strings.Contains(seen[0].Prompt, "MSG-ONE") {
		t.Fatalf("the running turn carried the message: %+v", seen)
	}
	if m := messageOf(p.showAll("msg"), "MSG-ONE"); m.DeliveryState != string(review.PendingDelivery) {
		t.Fatalf("after the running turn the message is %q, want still queued", m.DeliveryState)
	}

	// the next work turn carries it, and it is marked delivered with it
	if out := p.lazy(0, "unblock", "msg", "-m", "go on"); !strings.HasPrefix(out, "work turn 2 queued") {
		t.Fatalf("unblock: %q", out)
	}
	got := p.waitFor("msg", "work turn 2 to end", func(s shown) bool { return s.Turns == 2 && s.Status == "blocked" })
	seen := p.agentTurns("msg")
	if len(seen) != 2 || !strings.Contains(seen[1].Prompt, "MSG-ONE: also write b.txt") || !strings.Contains(seen[1].Prompt, "go on") {
		t.Fatalf("work turn 2's prompt lacks the message:\n%+v", seen)
	}
	t.Logf("work turn 2's prompt:\n%s", seen[1].Prompt)
	if m := messageOf(got, "MSG-ONE"); m.DeliveryState != string(review.Delivered) || m.DeliveredTurn != 2 {
		t.Fatalf("the message: %q with turn %d, want delivered with work turn 2", m.DeliveryState, m.DeliveredTurn)
	}
	if pl := p.threads("msg"); pl.PendingDelivery != 0 {
		t.Errorf("still %d queued after the delivery", pl.PendingDelivery)
	}

	// a turn that cannot start delivers nothing: the message stays queued
	// for the next one that does
	good, _ := os.ReadFile(filepath.Join(p.root, ".lazy", "config.toml"))
	p.reconfigure(func(c string) string {
		return strings.Replace(c, "[agent]\n", "[agent]\ncommand = \"/nonexistent/agent-two\"\n", 1)
	})
	out = p.lazy(0, "comment", "msg", "-m", "MSG-TWO: and c.txt")
	if !strings.HasPrefix(out, "queued: delivered with the next work turn (work turn 3, queued now)") {
		t.Fatalf("lazy comment on a blocked task: %q", out)
	}
	p.waitStatus("msg", "failed")
	if m := messageOf(p.showAll("msg"), "MSG-TWO"); m.DeliveryState != string(review.PendingDelivery) {
		t.Fatalf("after a turn that could not start the message is %q, want still queued", m.DeliveryState)
	}
	p.reconfigure(func(string) string { return string(good) })
	p.lazy(0, "unblock", "msg")
	got = p.waitFor("msg", "work turn 4 to end", func(s shown) bool { return s.Status == "blocked" && s.Turns == 4 })
	if m := messageOf(got, "MSG-TWO"); m.DeliveryState != string(review.Delivered) || m.DeliveredTurn != 4 {
		t.Fatalf("MSG-TWO: %q with turn %d, want delivered with work turn 4", m.DeliveryState, m.DeliveredTurn)
	}
	if seen := p.agentTurns("msg"); !strings.Contains(seen[len(seen)-1].Prompt, "MSG-TWO") {
		t.Fatalf("work turn 4's prompt lacks MSG-TWO: %q", seen[len(seen)-1].Prompt)
	}

	// a message rides a prompt: the review comment's bound holds for it
	if _, errOut, code := p.run("comment", "msg", "-m", strings.Repeat("m", 70000)); code != 1 || !strings.Contains(errOut, "keep it under 65536") {
		t.Fatalf("a 70,000-byte message: exit %d, %q; want 1 and the bound", code, errOut)
	}

	// an ended task takes no message
	p.lazy(0, "task", "cancel", "msg")
	_, errOut, code := p.run("comment", "msg", "-m", "too late")
	if code != 1 || !strings.Contains(errOut, "has ended") || !strings.Contains(errOut, "lazy task new") || strings.Count(errOut, "has ended") != 1 {
		t.Fatalf("comment on an ended task: exit %d, %q; want 1 and what to do", code, errOut)
	}
}

// TestAgentChangeStartsANewConversation (issue 25, item 3): the task
// records the agent of its conversation; after the config names another
// agent the next turn does not resume the old session, starts a new one
// and says so (CLI, turn record, prompt); a resume the client refuses with
// "no conversation found" starts a new conversation rather than fail.
func TestAgentChangeStartsANewConversation(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "drv", "-m", writeAndCommit)
	first := p.waitStatus("drv", "blocked")
	script := "script: " + lazyBin + " script-agent"
	if first.Agent != script {
		t.Fatalf("task agent: got %q, want %q", first.Agent, script)
	}

	// the same program under another driver and command: another agent
	claude := "claude-code: " + lazyBin + " script-agent"
	p.reconfigure(func(c string) string {
		return strings.Replace(c, `driver = "script"`, fmt.Sprintf("driver = \"claude-code\"\ncommand = %q", lazyBin+" script-agent"), 1)
	})
	out := p.lazy(0, "unblock", "drv", "-m", "next\n@answer two")
	t.Logf("lazy unblock after the change:\n%s", out)
	want := "the agent changed from " + script + " to " + claude + ": this turn starts a new conversation"
	if !strings.HasPrefix(out, "work turn 2 queued") || !strings.Contains(out, want) {
		t.Fatalf("unblock after an agent change says %q, want work turn 2 and %q", out, want)
	}
	got := p.waitFor("drv", "work turn 2 to end", func(s shown) bool { return s.Turns == 2 && s.Status == "blocked" })
	seen := p.agentTurns("drv")
	if len(seen) != 2 || seen[1].Resumed || !strings.Contains(seen[1].Prompt, want) || !strings.Contains(seen[1].Prompt, "> add a file") {
		t.Fatalf("work turn 2 resumed the old conversation or was not told: %+v", seen[len(seen)-1])
	}
	if tu := got.TurnRecords[1]; tu.Notice != want || tu.Agent != claude || tu.Status != "done" {
		t.Fatalf("turn record: notice %q agent %q status %s", tu.Notice, tu.Agent, tu.Status)
	}
	if got.Agent != claude {
		t.Fatalf("the task's agent after the change: %q, want %q", got.Agent, claude)
	}
	if text := p.lazy(0, "task", "show", "drv"); !strings.Contains(text, want) || !strings.Contains(text, "agent: "+claude) {
		t.Errorf("task show does not say the change:\n%s", text)
	}

	// the same agent again: the conversation resumes, nothing is said
	if out := p.lazy(0, "unblock", "drv", "-m", "@answer three"); strings.Contains(out, "changed") {
		t.Fatalf("unblock with the same agent: %q", out)
	}
	p.waitFor("drv", "work turn 3 to end", func(s shown) bool { return s.Turns == 3 && s.Status == "blocked" })
	if seen := p.agentTurns("drv"); !seen[2].Resumed || seen[2].Session != seen[1].Session {
		t.Fatalf("work turn 3 did not resume work turn 2's conversation: %+v", seen[2])
	}

	// the client lost the session: the turn starts a new conversation
	if err := os.RemoveAll(filepath.Join(p.paths.Agents, "drv", "home", ".script-agent", "sessions")); err != nil {
		t.Fatal(err)
	}
	p.lazy(0, "unblock", "drv", "-m", "@answer four")
	got = p.waitFor("drv", "work turn 4 to end", func(s shown) bool { return s.Turns == 4 && s.Status != "running" })
	if got.Status != "blocked" {
		t.Fatalf("a lost session stranded the task: %s (%s)", got.Status, got.FailReason)
	}
	tu := got.TurnRecords[len(got.TurnRecords)-1]
	if !strings.Contains(tu.Notice, "no conversation with session ID") || !strings.Contains(tu.Notice, "starts a new conversation") {
		t.Fatalf("work turn 4 does not say it started a new conversation: %+v", tu)
	}
	if seen := p.agentTurns("drv"); seen[len(seen)-1].Resumed || seen[len(seen)-1].Answer != "four" {
		t.Fatalf("the last agent turn: %+v", seen[len(seen)-1])
	}
}

// TestTurnCountsAgree (issue 25, item 10): after work turns and asks, the
// CLI's "work turn N", `task show --json`, `task list --json`, the threads
// payload's status bar and the queue all count work turns as turns, and
// asks apart.
func TestTurnCountsAgree(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "cnt", "-m", fourLines)
	p.waitStatus("cnt", "blocked")
	ask := func(line int) {
		a := p.post("cnt", api.PostCommentArgs{Body: fmt.Sprintf("why line %d?", line), File: "a.go", Line: line, Side: "new", Intent: "ask"})
		p.waitThreads("cnt", "the answer", func(pl review.Payload) bool { return find(pl, a.ID).AskState == review.AskAnswered })
	}
	ask(1)
	ask(2)
	if out := p.lazy(0, "unblock", "cnt", "-m", "@answer two"); !strings.HasPrefix(out, "work turn 2 queued") {
		t.Fatalf("unblock after 1 work turn and 2 asks: %q, want work turn 2", out)
	}
	p.waitFor("cnt", "work turn 2", func(s shown) bool { return s.Turns == 2 && s.Status == "blocked" })
	ask(3)
	out := p.lazy(0, "comment", "cnt", "-m", "@answer three")
	if !strings.HasPrefix(out, "queued: delivered with the next work turn (work turn 3, queued now)") {
		t.Fatalf("comment: %q, want work turn 3", out)
	}
	got := p.waitFor("cnt", "work turn 3", func(s shown) bool { return s.Turns == 3 && s.Status == "blocked" })
	p.waitThreads("cnt", "the ask settled", func(pl review.Payload) bool { return pl.Pending == 0 })

	const turns, asks = 3, 3
	if got.Turns != turns || got.Asks != asks {
		t.Errorf("task show --json: turns %d asks %d, want %d %d", got.Turns, got.Asks, turns, asks)
	}
	var list []api.TaskInfo
	if err := json.Unmarshal([]byte(p.lazy(0, "task", "list", "--json")), &list); err != nil || len(list) != 1 || list[0].Turns != turns || list[0].Asks != asks {
		t.Errorf("task list --json: %+v %v, want turns %d asks %d", list, err, turns, asks)
	}
	if pl := p.threads("cnt"); pl.State.Turns != turns {
		t.Errorf("threads payload state.turns: %d, want %d", pl.State.Turns, turns)
	}
	var q []api.QueueItem
	if err := p.rpc().Call(context.Background(), "reviewQueue", map[string]string{}, &q); err != nil || len(q) != 1 || q[0].Turns != turns || q[0].Asks != asks {
		t.Errorf("queue: %+v %v, want turns %d asks %d", q, err, turns, asks)
	}
	text := p.lazy(0, "task", "show", "cnt")
	if !strings.Contains(text, "turns: 3 (asks 3)") || !strings.Contains(text, "work turn 3 (comment) done") || !strings.Contains(text, "ask 3 (ask) done") {
		t.Errorf("task show:\n%s", text)
	}
	var labels []string
	for _, tu := range got.TurnRecords {
		labels = append(labels, tu.Label)
	}
	if fmt.Sprint(labels) != "[work turn 1 ask 1 ask 2 work turn 2 ask 3 work turn 3]" {
		t.Errorf("turn labels: %v", labels)
	}
	// the page's status bar and the task page say the same
	body := p.page("/review/cnt")
	if !strings.Contains(body, `data-sb="turns">3<`) {
		t.Errorf("the review page's status bar does not say Turns 3")
	}
	if body := p.page("/tasks/" + got.ID); !strings.Contains(body, "3 (asks 3)") || !strings.Contains(body, `id="turn-3"`) {
		t.Errorf("the task page does not name the counts or anchor work turn 3")
	}
}
