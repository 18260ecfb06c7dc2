package daemon

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"lazy/api"
	"lazy/gitx/gitxtest"
	"lazy/store"
	"lazy/task"
)

// TestReconcileTaskLeftRunning: a daemon killed after a work turn's end was
// recorded and before the task's status was leaves the task "running" with
// nothing running or queued. The next start settles it from that turn's end:
// blocked (with the turn's session) after a finished turn, failed with the
// turn's error after a failed one; a running task with no work turn at all
// is failed with the fix.
func TestReconcileTaskLeftRunning(t *testing.T) {
	root := gitxtest.NewRepo(t, nil)
	home := t.TempDir()
	paths := api.StatePaths(home, root)
	if err := os.MkdirAll(paths.State, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenSQL(paths.DB)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now().UTC()
	mk := func(code string, turns ...store.Turn) string {
		c := code
		tk := &store.Task{ID: task.NewID(now), Code: &c, Status: task.Running, Branch: "lazy/" + code, Parent: "main", CreatedAt: now, UpdatedAt: now}
		if err := st.CreateTask(ctx, tk); err != nil {
			t.Fatal(err)
		}
		for i := range turns {
			tu := turns[i]
			tu.ID, tu.TaskID, tu.QueuedAt = task.NewID(now), tk.ID, now
			if err := st.CreateTurn(ctx, &tu); err != nil {
				t.Fatal(err)
			}
		}
		return tk.ID
	}
	ended := &now
	done := mk("done", store.Turn{Kind: store.TurnWork, Status: store.TurnDone, EndedAt: ended, SessionID: "sess-1"})
	failed := mk("failed", store.Turn{Kind: store.TurnWork, Status: store.TurnFailed, EndedAt: ended, Error: "agent exited with status 3"})
	bare := mk("bare")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	d, err := startIn(t, root, home)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { d.Stop(); <-d.Done() }()
	get := func(id string) *store.Task {
		tk, err := d.Service().Resolve(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	if tk := get(done); tk.Status != task.Blocked || tk.SessionID != "sess-1" {
		t.Errorf("after a finished turn: status %q session %q, want blocked with sess-1", tk.Status, tk.SessionID)
	}
	if tk := get(failed); tk.Status != task.Failed || !strings.Contains(tk.FailReason, "agent exited with status 3") {
		t.Errorf("after a failed turn: status %q reason %q", tk.Status, tk.FailReason)
	}
	if tk := get(bare); tk.Status != task.Failed || !strings.Contains(tk.FailReason, "unblock the task") {
		t.Errorf("with no turn: status %q reason %q", tk.Status, tk.FailReason)
	}
}
