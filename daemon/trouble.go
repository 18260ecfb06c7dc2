package daemon

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"lazy/actors"
	"lazy/agent"
	"lazy/api"
	"lazy/proxy"
)

// trouble keeps, per task, the model calls that are failing right now (no
// upstream answered, or it answered 5xx), so the cause shows within seconds
// on task show, the pages and watch, and a turn that fails says why — not
// only "the agent exited with status 1". A call that succeeds clears it.
type trouble struct {
	mu sync.Mutex
	m  map[string]*modelTrouble
	n  atomic.Int32 // len(m): a call that succeeds while none fails takes no lock
}

type modelTrouble struct {
	cause       string
	answered    bool // the upstream answered (a 5xx), rather than not at all
	count       int
	since, last time.Time
}

// record takes one proxied call; it returns the event that reports a
// task's first failure in a row (nil: nothing to report).
func (t *trouble) record(tr api.Traffic) *api.Event {
	if tr.TaskID == "" {
		return nil
	}
	failed := tr.Error != "" || tr.Status >= 500 || tr.Refused == proxy.CauseBudgetExceeded
	if !failed && t.n.Load() == 0 {
		return nil // nothing to clear
	}
	t.mu.Lock()
	if t.m == nil {
		t.m = map[string]*modelTrouble{}
	}
	cur := t.m[tr.TaskID]
	if !failed {
		if tr.Status < 400 {
			delete(t.m, tr.TaskID)
			t.n.Store(int32(len(t.m)))
		}
		t.mu.Unlock()
		return nil
	}
	cause := tr.Error
	switch {
	case tr.Refused == proxy.CauseBudgetExceeded:
		cause = budgetCause
	case tr.Refused == proxy.CauseTooManyConnections:
		cause = connCause
	case cause == "":
		cause = fmt.Sprintf("the upstream %s answered %d", tr.Upstream, tr.Status)
	}
	answered := tr.Error == "" && tr.Refused == ""
	first := cur == nil
	if first {
		cur = &modelTrouble{since: tr.Time}
		t.m[tr.TaskID] = cur
		t.n.Store(int32(len(t.m)))
	}
	cur.cause, cur.answered, cur.last = cause, answered, tr.Time
	cur.count++
	msg := cur.text()
	t.mu.Unlock()
	if !first {
		return nil
	}
	return &api.Event{Time: tr.Time, Kind: api.EventModelError, TaskID: tr.TaskID, TaskRef: tr.TaskRef, Detail: msg}
}

// budgetCause is a budget refusal's trouble: the proxy said no, not the
// upstream.
const budgetCause = "budget_exceeded"

// connCause is the task at its connection cap: the proxy's socket said no.
const connCause = "too_many_connections"

func (m *modelTrouble) text() string {
	if m.cause == budgetCause {
		return fmt.Sprintf("token budget used up: %d calls refused (budget_exceeded) since %s; raise it with lazy task budget TASK --tokens N, then unblock", m.count, m.since.UTC().Format(time.RFC3339))
	}
	if m.cause == connCause {
		return fmt.Sprintf("proxy connections refused since %s: the task held sandbox.max_connections open; raise it in .lazy/config.toml if the agent needs more", m.since.UTC().Format(time.RFC3339))
	}
	what := "model upstream unreachable"
	if m.answered {
		what = "model upstream failing" // it answered, with a 5xx
	}
	return fmt.Sprintf("%s: %s (%d calls failed since %s)", what, m.cause, m.count, m.since.UTC().Format(time.RFC3339))
}

// of is the task's current model trouble, or "".
func (t *trouble) of(taskID string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m := t.m[taskID]; m != nil {
		return m.text()
	}
	return ""
}

// troubleLauncher adds the model trouble to a failed turn's reason.
type troubleLauncher struct {
	inner actors.TurnLauncher
	tr    *trouble
}

func (l troubleLauncher) RunTurn(ctx context.Context, req agent.TurnRequest) (agent.Result, agent.Outcome, error) {
	res, out, err := l.inner.RunTurn(ctx, req)
	if err != nil {
		if msg := l.tr.of(req.TaskID); msg != "" {
			err = fmt.Errorf("%w; %s", err, msg)
		}
	}
	return res, out, err
}
