package storetest

import (
	"errors"
	"testing"
	"time"

	"lazy/store"
	"lazy/task"
)

// testLeases: a task's lease is taken only when free or expired (its epoch
// one more each time), renewed only by its holder before it runs out, and a
// write fenced by a lease that was taken since is refused and changes
// nothing. Stores without leases (the file store, one daemon's) skip.
func testLeases(t *testing.T, open Opener) {
	s := open(t, t.TempDir())
	ls, ok := s.(store.Leases)
	if !ok {
		t.Skipf("%T keeps no task leases (one daemon's store)", s)
	}
	tk := NewTask("")
	must(t, s.CreateTask(ctx, tk))
	if _, err := ls.GetLease(ctx, tk.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("lease never taken: got %v, want ErrNotFound", err)
	}
	const ttl = 300 * time.Millisecond
	a, err := ls.AcquireLease(ctx, tk.ID, "member-a", ttl)
	must(t, err)
	if a.Epoch != 1 || a.Holder != "member-a" {
		t.Fatalf("first lease: got %+v, want member-a epoch 1", a)
	}
	// held: another member is refused, and told whose it is and until when
	_, err = ls.AcquireLease(ctx, tk.ID, "member-b", ttl)
	var le *store.LeaseError
	if !errors.As(err, &le) || !le.Held || le.Holder != "member-a" || le.Epoch != 1 || le.Until.IsZero() {
		t.Fatalf("acquire while held: got %v, want a held LeaseError naming member-a epoch 1", err)
	}
	// the holder renews; a renewal under another holder or epoch is stale
	a, err = ls.RenewLease(ctx, a, ttl)
	must(t, err)
	if _, err := ls.RenewLease(ctx, store.Lease{TaskID: tk.ID, Holder: "member-b", Epoch: 1}, ttl); !store.IsStaleLease(err) {
		t.Fatalf("renew by another holder: got %v, want a stale lease", err)
	}
	fa := ls.Fenced(a)
	cur, err := fa.GetTask(ctx, tk.ID)
	must(t, err)
	cur.Title = "by a"
	must(t, fa.SaveTask(ctx, cur))

	// a's lease runs out unrenewed (a paused member): b takes it, epoch 2
	deadline := time.Now().Add(10 * time.Second)
	var b store.Lease
	for {
		b, err = ls.AcquireLease(ctx, tk.ID, "member-b", 5*time.Second)
		if err == nil {
			break
		}
		if !errors.As(err, &le) || !le.Held || time.Now().After(deadline) {
			t.Fatalf("acquire after expiry: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // the lease runs out on the database's clock
	}
	if b.Epoch != 2 || b.Holder != "member-b" {
		t.Fatalf("lease after expiry: got %+v, want member-b epoch 2", b)
	}
	fb := ls.Fenced(b)
	cur.Title = "by b"
	must(t, fb.SaveTask(ctx, cur))
	tu := &store.Turn{ID: task.NewID(time.Now()), TaskID: tk.ID, Kind: store.TurnWork, Status: store.TurnRunning, QueuedAt: time.Now().UTC()}
	must(t, fb.CreateTurn(ctx, tu))

	// a wakes up: its writes and its renewal are refused, and change nothing
	late := *cur
	late.Title, late.Status = "late write by a", task.Failed
	for name, err := range map[string]error{
		"save task":     fa.SaveTask(ctx, &late),
		"save turn":     fa.SaveTurn(ctx, &store.Turn{ID: tu.ID, TaskID: tk.ID, Number: tu.Number, Seq: tu.Seq, Kind: store.TurnWork, Status: store.TurnDone, QueuedAt: tu.QueuedAt}),
		"create turn":   fa.CreateTurn(ctx, &store.Turn{ID: task.NewID(time.Now()), TaskID: tk.ID, Kind: store.TurnWork, Status: store.TurnQueued, QueuedAt: time.Now().UTC()}),
		"mark launched": fa.MarkLaunched(ctx, tu.ID, time.Now().UTC(), nil),
	} {
		if !store.IsStaleLease(err) {
			t.Errorf("%s under the stale lease: got %v, want a stale LeaseError", name, err)
		} else if errors.As(err, &le); le.Holder != "member-b" || le.Epoch != 2 || le.Mine != 1 {
			t.Errorf("%s: the refusal names %q epoch %d (mine %d), want member-b epoch 2 (mine 1)", name, le.Holder, le.Epoch, le.Mine)
		}
	}
	if _, err := ls.RenewLease(ctx, a, ttl); !store.IsStaleLease(err) {
		t.Errorf("renew of the stale lease: got %v, want a stale LeaseError", err)
	}
	got, err := s.GetTask(ctx, tk.ID)
	must(t, err)
	if got.Title != "by b" || got.Status != tk.Status {
		t.Errorf("after the late write: title %q status %s, want %q %s", got.Title, got.Status, "by b", tk.Status)
	}
	turns, err := s.ListTurns(ctx, tk.ID)
	must(t, err)
	if len(turns) != 1 || turns[0].Status != store.TurnRunning || turns[0].StartedAt != nil {
		t.Errorf("turns after the late writes: %+v, want b's one running turn, not launched", turns)
	}
	// a release lets the next member take it at once, with the next epoch
	must(t, ls.ReleaseLease(ctx, a)) // stale: leaves b's alone
	if _, err := ls.AcquireLease(ctx, tk.ID, "member-c", ttl); err == nil {
		t.Fatal("a stale release freed the current lease")
	}
	must(t, ls.ReleaseLease(ctx, b))
	c, err := ls.AcquireLease(ctx, tk.ID, "member-c", ttl)
	must(t, err)
	if c.Epoch != 3 {
		t.Errorf("lease after release: epoch %d, want 3", c.Epoch)
	}
	if l, err := ls.GetLease(ctx, tk.ID); err != nil || l.Holder != "member-c" || l.Epoch != 3 {
		t.Errorf("get lease: %+v %v", l, err)
	}
}
