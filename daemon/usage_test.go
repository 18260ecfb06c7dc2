package daemon

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"lazy/api"
	"lazy/store"
	"lazy/task"
)

// TestUsageRowsCountTheirBatch: the calls of one batch are one row per
// task, turn, role, status and refusal, counting them (requests) and
// summing their tokens; a call cut before its reply ended keeps its charge
// in its row's sum; a book loaded again from the rows counts what the book
// that recorded them counted, the last turn's apart.
func TestUsageRowsCountTheirBatch(t *testing.T) {
	ctx := context.Background()
	st, ids := usageStore(t, 1<<30, "a", "b")
	book := newUsageBook(st, slog.New(slog.DiscardHandler), 0)
	call := func(id string, turn int, role string, status int, refused string, in, out, held, charged int64) {
		book.mu.Lock()
		if turn == 0 {
			delete(book.running, id)
		} else {
			book.running[id] = turn
		}
		book.mu.Unlock()
		tr := api.Traffic{Time: time.Now().UTC(), TaskID: id, TaskRef: "x", Role: role, Status: status, Refused: refused, Reserved: held, Charged: charged}
		if in+out > 0 {
			tr.Usage = &api.CallUsage{InputTokens: in, OutputTokens: out, CacheReadInputTokens: 1}
		}
		book.record(tr)
	}
	// task a: 100 calls in turn 1, then 50 in turn 2 (one cut, one refused)
	for range 100 {
		call(ids[0], 1, "", 200, "", 10, 2, 0, 0)
	}
	for range 48 {
		call(ids[0], 2, "fast", 200, "", 7, 1, 0, 0)
	}
	call(ids[0], 2, "fast", 200, "", 3, 1, 500, 500) // cut: charged its hold
	call(ids[0], 2, "fast", 429, "budget_exceeded", 0, 0, 0, 0)
	// task b: 30 calls with no turn running
	for range 30 {
		call(ids[1], 0, "", 200, "", 1, 1, 0, 0)
	}
	want := map[string]api.Usage{}
	wantLast := map[string]api.Usage{}
	for _, id := range ids {
		total, last, _ := book.of(ctx, id)
		want[id] = *total
		if last != nil {
			wantLast[id] = *last
		}
	}
	book.close() // writes the batch

	if w := want[ids[0]]; w.Requests != 150 || w.ChargedTokens != 100*12+48*8+500 || w.InputTokens != 100*10+48*7+3 {
		t.Fatalf("the book counted %+v", w)
	}
	rowsA, err := st.ListUsage(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	rowsB, err := st.ListUsage(ctx, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("task a: 150 calls in %d rows, task b: 30 calls in %d rows", len(rowsA), len(rowsB))
	// turn 1; turn 2 fast 200 (the cut one with them); turn 2 fast 429
	if len(rowsA) != 3 || len(rowsB) != 1 {
		t.Fatalf("rows of a batch: task a %+v, task b %+v: want 3 and 1", rowsA, rowsB)
	}
	if r := rowsA[1]; r.Calls() != 49 || r.Turn != 2 || r.Role != "fast" || r.Charged() != 48*8+500 || r.InputTokens != 48*7+3 || r.CacheReadInputTokens != 49 {
		t.Fatalf("turn 2's row: %+v (charged %d)", r, r.Charged())
	}
	if r := rowsA[2]; r.Calls() != 1 || r.Refused != "budget_exceeded" || r.Status != 429 {
		t.Fatalf("the refusal's row: %+v", r)
	}

	again := newUsageBook(st, slog.New(slog.DiscardHandler), 0)
	defer again.close()
	for _, id := range ids {
		total, last, _ := again.of(ctx, id)
		if *total != want[id] {
			t.Errorf("task %s loaded again from the rows: %+v, recorded %+v", id, *total, want[id])
		}
		if w, ok := wantLast[id]; ok && (last == nil || *last != w) {
			t.Errorf("task %s's last turn loaded again: %+v, recorded %+v", id, last, w)
		}
	}
}

// usageStore is a SQLite store in a temp dir with a running task per code,
// each with budget tokens (0: none); it returns their ids in order.
func usageStore(t *testing.T, budget int64, codes ...string) (*store.SQL, []string) {
	t.Helper()
	st, err := store.OpenSQL(filepath.Join(t.TempDir(), "lazy.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	var ids []string
	for _, code := range codes {
		tk := &store.Task{ID: task.NewID(now), Code: &code, Status: task.Running, Branch: "lazy/" + code, Parent: "main", BudgetTokens: budget, CreatedAt: now, UpdatedAt: now}
		if err := st.CreateTask(context.Background(), tk); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tk.ID)
		now = now.Add(time.Millisecond) // ids of their own
	}
	return st, ids
}
