package main

import (
	"context"
	"encoding/json"
	"io"
	"lazy/api"
	"strings"
	"testing"
	"time"
)

// TestUsageCounted: each task's model calls are counted at the proxy from
// the upstream's own replies, JSON and SSE, exactly as the stub reported
// them; task show, task list, watch --net, the review page and /metrics say
// so.
func TestUsageCounted(t *testing.T) {
	p := newProject(t, "process")
	const reply = "four words right here" // JSON: 21/4 = 5 out; SSE: 4 words out, 10 in
	p.stub.Reply = func(string) string { return reply }
	p.lazy(0, "daemon", "start")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lines := p.watchNet(ctx)

	p.lazy(0, "task", "new", "--code", "js", "-m", "@model 2\n@answer two calls")
	p.waitStatus("js", "blocked")
	var wantIn int64
	for _, r := range p.stub.Requests() {
		if r.Path == "/v1/messages" {
			wantIn += int64(len(r.Body) / 4)
		}
	}
	ti := p.show("js")
	if u := ti.Usage; u == nil || u.Requests != 2 || u.InputTokens != wantIn || u.OutputTokens != 2*5 {
		t.Fatalf("JSON usage %+v, want 2 calls, %d in, 10 out", ti.Usage, wantIn)
	}
	if ti.LastTurnNo != 1 || ti.LastTurn == nil || ti.LastTurn.Requests != 2 {
		t.Errorf("the turn's usage: %d %+v", ti.LastTurnNo, ti.LastTurn)
	}

	p.lazy(0, "task", "new", "--code", "sse", "-m", "@stream\n@model 1\n@answer streamed")
	p.waitStatus("sse", "blocked")
	if u := p.show("sse").Usage; u == nil || u.Requests != 1 || u.InputTokens != 10 || u.OutputTokens != 4 {
		t.Fatalf("SSE usage %+v, want 1 call, 10 in, 4 out", u)
	}

	// the CLI, the stream, the page, the metrics
	if out := p.lazy(0, "task", "show", "js"); !strings.Contains(out, "usage: 2 calls, ") {
		t.Errorf("task show: %s", out)
	}
	if out := p.lazy(0, "task", "list"); !strings.Contains(out, "TOKENS") || !strings.Contains(out, "14") {
		t.Errorf("task list: %s", out)
	}
	var list []api.TaskInfo
	if err := json.Unmarshal([]byte(p.lazy(0, "task", "list", "--json")), &list); err != nil || len(list) != 2 || list[0].Usage == nil {
		t.Errorf("task list --json: %v %+v", err, list)
	}
	got := strings.Join(collect(lines, 2*time.Second), "\n")
	if !strings.Contains(got, " sse ") || !strings.Contains(got, "tokens: 10 in / 4 out") {
		t.Errorf("watch --net lacks the call's tokens:\n%s", got)
	}
	page := p.page("/review/" + ti.ID)
	if !strings.Contains(page, "This task: 2 calls, ") {
		t.Errorf("the review page does not say what the task cost")
	}
	metrics := p.page("/metrics")
	if !strings.Contains(metrics, `lazy_model_calls_total{role="default"} 3`) || !strings.Contains(metrics, `lazy_model_tokens_total{kind="output",role="default"} 14`) {
		t.Errorf("metrics lack the calls by role:\n%s", grepLines(metrics, "lazy_model"))
	}
}

// TestBudgetStopsATask: a budget the first call uses up refuses the second
// before it leaves (429 budget_exceeded): the turn fails saying so, the task
// needs attention; raising the budget lets the next turn go on.
func TestBudgetStopsATask(t *testing.T) {
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lines := p.watchNet(ctx)
	p.lazy(0, "task", "new", "--code", "b", "--budget-tokens", "1", "-m", "@model 2\n@answer never")
	ti := p.waitStatus("b", "failed")
	if !strings.Contains(ti.FailReason, "token budget used up") || ti.Usage == nil || ti.Usage.Requests != 2 || ti.BudgetTokens != 1 {
		t.Fatalf("failed task: reason %q usage %+v budget %d", ti.FailReason, ti.Usage, ti.BudgetTokens)
	}
	upstream := 0
	for _, r := range p.stub.Requests() {
		if r.Path == "/v1/messages" {
			upstream++
		}
	}
	if upstream != 1 {
		t.Fatalf("%d calls reached the upstream, want 1 (the second is refused before it leaves)", upstream)
	}
	got := strings.Join(collect(lines, 2*time.Second), "\n")
	if !strings.Contains(got, "-> 429") || !strings.Contains(got, "refused: budget_exceeded") {
		t.Errorf("watch --net:\n%s", got)
	}
	if out := p.lazy(0, "task", "show", "b"); !strings.Contains(out, "budget 1 tokens, 0 left") {
		t.Errorf("task show: %s", out)
	}
	if page := p.page("/review"); !strings.Contains(page, "Needs attention") || !strings.Contains(page, "token budget used up") {
		t.Errorf("the review queue does not list the task under Needs attention")
	}
	out := p.lazy(0, "task", "budget", "b", "--tokens", "100000")
	if !strings.Contains(out, "budget 100000 tokens") {
		t.Errorf("task budget: %s", out)
	}
	p.lazy(0, "unblock", "b", "-m", "@model 1\n@answer done")
	for i := 0; ; i++ {
		if ti = p.show("b"); ti.Status == "blocked" && ti.Turns == 2 {
			break
		}
		if ti.Status == "failed" && ti.Turns == 2 || i > 600 {
			t.Fatalf("after raising the budget: %s %s", ti.Status, ti.FailReason)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, errOut, code := p.run("task", "budget", "b", "--tokens", "-5"); code == 0 || !strings.Contains(errOut, "0 (no budget) or more") {
		t.Errorf("a negative budget: exit %d %s", code, errOut)
	}
}

// page fetches a dashboard path with the auth token.
func (p *project) page(path string) string {
	p.t.Helper()
	resp, err := p.get(path)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
