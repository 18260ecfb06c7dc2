package daemon

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"lazy/api"
)

// TestUsageBooksShareTheStore: two members' books over one store. The
// host's book counts its calls; the other member's book shows them once
// they are in the store (after its TTL); a budget set in the store through
// the other member is enforced by the host's book on the budget event, and
// each book counts its own calls once (never again from its own rows).
func TestUsageBooksShareTheStore(t *testing.T) {
	ctx := context.Background()
	st, ids := usageStore(t, 0, "c")
	tk, err := st.GetTask(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 50 * time.Millisecond
	host := newUsageBook(st, slog.New(slog.DiscardHandler), ttl)
	other := newUsageBook(st, slog.New(slog.DiscardHandler), ttl)
	defer host.close()
	defer other.close()
	if total, _, _ := other.of(ctx, tk.ID); total.Requests != 0 {
		t.Fatalf("before any call the other member shows %+v", total)
	}
	for range 3 {
		host.record(api.Traffic{Time: time.Now().UTC(), TaskID: tk.ID, TaskRef: "c", Status: 200, Usage: &api.CallUsage{InputTokens: 10, OutputTokens: 5}})
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("never: %s", what)
			}
		}
	}
	waitFor("the other member shows the host's 3 calls", func() bool {
		total, _, _ := other.of(ctx, tk.ID)
		return total.Requests == 3 && total.InputTokens == 30 && total.OutputTokens == 15
	})
	// the host reads its own rows back without counting them twice
	time.Sleep(2 * ttl)
	if total, _, _ := host.of(ctx, tk.ID); total.Requests != 3 || total.InputTokens != 30 {
		t.Fatalf("the host counts %+v after reading the store again, want its 3 calls once", total)
	}
	if over, _ := host.overBudget(tk.ID); over {
		t.Fatal("over budget with no budget")
	}
	// a budget set through the other member: the store has it, its event
	// reaches the host's book (whose TTL is long now: the event does it)
	host.ttl = time.Hour
	tk.BudgetTokens = 20
	if err := st.SaveTask(ctx, tk); err != nil {
		t.Fatal(err)
	}
	events := make(chan api.Event, 1)
	events <- api.Event{Kind: api.EventBudget, TaskID: tk.ID}
	close(events)
	host.follow(ctx, events)
	waitFor("the host enforces the budget set elsewhere", func() bool {
		over, why := host.overBudget(tk.ID)
		return over && why != ""
	})
	if n, why := host.reserve(tk.ID, func() int64 { return 1 }); n != 0 || why == "" {
		t.Errorf("the host reserved %d for a call over the budget set elsewhere (%q)", n, why)
	}
}
