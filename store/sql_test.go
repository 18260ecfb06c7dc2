package store

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"lazy/review"
	"lazy/task"
)

var update = flag.Bool("update", false, "rewrite testdata/v12.db from the version-12 migrations")

func newTestStore(t *testing.T) *SQL {
	t.Helper()
	s, err := OpenSQL(filepath.Join(t.TempDir(), "lazy.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newTask(code string) *Task {
	now := time.Now().UTC()
	id := task.NewID(now)
	t := &Task{ID: id, Title: "t", Prompt: "p", Status: task.Running, CreatedAt: now, UpdatedAt: now, LastActivity: now}
	if code != "" {
		t.Code = &code
	}
	return t
}

func TestTasksAndTurns(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	a := newTask("alpha")
	if err := s.CreateTask(ctx, a); err != nil {
		t.Fatal(err)
	}
	dup := newTask("alpha")
	if err := s.CreateTask(ctx, dup); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate code: got %v, want ErrConflict", err)
	}
	if err := s.CreateTask(ctx, newTask("")); err != nil {
		t.Fatalf("two tasks without a code must coexist: %v", err)
	}
	if err := s.CreateTask(ctx, newTask("")); err != nil {
		t.Fatalf("two tasks without a code must coexist: %v", err)
	}
	if _, err := s.GetTask(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("got %v, want ErrNotFound", err)
	}
	for i := 0; i < 3; i++ {
		tu := &Turn{ID: task.NewID(time.Now()), TaskID: a.ID, Kind: TurnWork, Status: TurnQueued, QueuedAt: time.Now()}
		if err := s.CreateTurn(ctx, tu); err != nil {
			t.Fatal(err)
		}
		if tu.Number != i+1 {
			t.Errorf("turn number: got %d, want %d", tu.Number, i+1)
		}
	}
	q, err := s.TurnsInState(ctx, TurnQueued)
	if err != nil || len(q) != 3 {
		t.Fatalf("queued turns: got %d %v", len(q), err)
	}
	all, _ := s.ListTasks(ctx)
	if len(all) != 3 {
		t.Errorf("tasks: got %d, want 3", len(all))
	}
}

func TestReviewCommentStateOnly(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	a := newTask("")
	if err := s.CreateTask(ctx, a); err != nil {
		t.Fatal(err)
	}
	c := &review.ReviewComment{ID: task.NewID(time.Now()), TaskID: a.ID, ThreadID: "th", File: "a.go", Line: 3, Side: review.New,
		Intent: review.Comment, Body: "rename this", Actor: review.Human, DeliveryState: review.PendingDelivery, CreatedAt: time.Now().UTC()}
	if err := s.AddReviewComment(ctx, c); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	c.Body = "changed words"
	c.WithdrawnAt = &now
	if err := s.SaveReviewComment(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, _ := s.ListReviewComments(ctx, a.ID)
	if len(got) != 1 || got[0].Body != "rename this" || got[0].WithdrawnAt == nil {
		t.Fatalf("got %+v: words must stay, withdrawal must land", got)
	}
}

// TestUpgradeFromVersion12 opens a real store file written at schema version
// 12 (testdata/v12.db, committed) and checks every row survives the upgrade.
func TestUpgradeFromVersion12(t *testing.T) {
	golden := filepath.Join("testdata", "v12.db")
	if *update {
		_ = os.Remove(golden)
		s, err := openSQL(golden, 12)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for _, code := range []string{"old-one", ""} {
			tk := newTask(code)
			if err := s.CreateTask(ctx, tk); err != nil {
				t.Fatal(err)
			}
			if err := s.CreateTurn(ctx, &Turn{ID: task.NewID(time.Now()), TaskID: tk.ID, Kind: TurnWork, Status: TurnDone, Prompt: "hello", QueuedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			if err := s.db.Exec(`INSERT INTO comments(id, task_id, body, created_at) VALUES (?, ?, ?, ?)`, task.NewID(time.Now()), tk.ID, "an old comment", time.Now()).Error; err != nil {
				t.Fatal(err)
			}
		}
		if err := s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`).Error; err != nil {
			t.Fatal(err)
		}
		_ = s.Close()
		_ = os.Remove(golden + "-wal")
		_ = os.Remove(golden + "-shm")
	}
	path := filepath.Join(t.TempDir(), "lazy.db")
	copyFile(t, golden, path)
	s, err := OpenSQL(path)
	if err != nil {
		t.Fatalf("upgrade from v12: %v", err)
	}
	defer s.Close()
	var versions []int
	s.db.Raw(`SELECT version FROM schema_migrations ORDER BY version`).Scan(&versions)
	if len(versions) != len(migrations) || versions[0] != 12 || versions[len(versions)-1] != SchemaVersion() {
		t.Fatalf("versions after upgrade: got %v, want every step of the migrations from 12 to %d", versions, SchemaVersion())
	}
	ctx := context.Background()
	tasks, err := s.ListTasks(ctx)
	if err != nil || len(tasks) != 2 {
		t.Fatalf("tasks after upgrade: got %d %v, want 2", len(tasks), err)
	}
	for _, tk := range tasks {
		turns, _ := s.ListTurns(ctx, tk.ID)
		cs, _ := s.ListComments(ctx, tk.ID)
		if len(turns) != 1 || turns[0].Prompt != "hello" || len(cs) != 1 || cs[0].Body != "an old comment" {
			t.Errorf("task %s lost rows: turns %+v comments %+v", tk.ID, turns, cs)
		}
		// the new tables work on the upgraded file
		now := time.Now().UTC()
		rc := &review.ReviewComment{ID: task.NewID(now), TaskID: tk.ID, ThreadID: "t", File: "f", Line: 1, Side: review.Old,
			Intent: review.Ask, Body: "why?", Actor: review.Human, AskState: review.AskPending, CreatedAt: now, WithdrawnAt: &now}
		if err := s.AddReviewComment(ctx, rc); err != nil {
			t.Fatalf("review comment on upgraded store: %v", err)
		}
	}
}

func TestRefuseNewerStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lazy.db")
	s, err := OpenSQL(path)
	if err != nil {
		t.Fatal(err)
	}
	s.db.Exec(`INSERT INTO schema_migrations(version, name, applied_at) VALUES (99, 'future', ?)`, time.Now())
	_ = s.Close()
	_, err = OpenSQL(path)
	var tooNew *TooNewError
	if !errors.As(err, &tooNew) || tooNew.Have != 99 {
		t.Fatalf("got %v, want TooNewError for version 99", err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatalf("%v (run: go test ./store -run Upgrade -update)", err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkAddReviewComment is the store's raw durable insert: the floor
// under a comment POST.
func BenchmarkAddReviewComment(b *testing.B) {
	s, err := OpenSQL(filepath.Join(b.TempDir(), "lazy.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	tk := newTask("")
	if err := s.CreateTask(ctx, tk); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now := time.Now().UTC()
		c := &review.ReviewComment{ID: task.NewID(now), TaskID: tk.ID, ThreadID: "t", File: "a.go", Line: 1, Side: review.New,
			Intent: review.Comment, Body: "please rename this", Actor: review.Human, DeliveryState: review.PendingDelivery, CreatedAt: now}
		if err := s.AddReviewComment(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}

// TestGroupCommit: many writers at once share commits, each gets its own
// outcome (a conflicting insert fails alone, its neighbours land), and
// nothing acknowledged is missing after a reopen.
func TestGroupCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lazy.db")
	s, err := OpenSQL(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	code := "gc"
	tk := &Task{ID: task.NewID(time.Now()), Code: &code, Status: "blocked", Branch: "lazy/gc", Parent: "main"}
	if err := s.CreateTask(ctx, tk); err != nil {
		t.Fatal(err)
	}
	const n = 400
	dup := task.NewID(time.Now())
	errs := make([]error, n)
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		ids[i] = task.NewID(time.Now())
		if i%50 == 7 {
			ids[i] = dup // every one after the first with this id conflicts
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = s.AddReviewComment(ctx, &review.ReviewComment{ID: ids[i], TaskID: tk.ID, Body: fmt.Sprint("c", i),
				Intent: review.Comment, Actor: review.Human, DeliveryState: review.PendingDelivery, CreatedAt: time.Now()})
		}(i)
	}
	wg.Wait()
	ok, conflicts := map[string]bool{}, 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok[ids[i]] = true
		case errors.Is(err, ErrConflict):
			conflicts++
		default:
			t.Fatalf("comment %d: %v", i, err)
		}
	}
	if conflicts != n/50-1 {
		t.Fatalf("%d conflicts, want %d (one of the %d same-id inserts lands)", conflicts, n/50-1, n/50)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.AddComment(ctx, &Comment{ID: "x", TaskID: tk.ID, Body: "late"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("a write after Close: %v, want ErrClosed", err)
	}
	s, err = OpenSQL(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cs, err := s.ListReviewComments(ctx, tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != len(ok) {
		t.Fatalf("%d comments after reopen, %d acknowledged", len(cs), len(ok))
	}
	for _, c := range cs {
		if !ok[c.ID] {
			t.Fatalf("comment %s is stored but was not acknowledged", c.ID)
		}
	}
}

// Migration 27 numbers turns by kind in place: an old store's turns get
// their work turn and ask numbers, its tasks their ask and setup counts,
// and a comment delivered with record 3 is delivered with work turn 2.
func TestUpgradeTo27NumbersTurnsByKind(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lazy.db")
	old, err := openSQL(path, 26)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tk := newTask("")
	now := time.Now().UTC()
	if err := old.db.Exec(`INSERT INTO tasks(id, status, turns, created_at, updated_at, last_activity) VALUES (?, 'blocked', 2, ?, ?, ?)`, tk.ID, now, now, now).Error; err != nil {
		t.Fatal(err)
	}
	for i, kind := range []string{TurnWork, TurnAsk, TurnWork} {
		if err := old.db.Exec(`INSERT INTO turns(id, task_id, number, kind, status, queued_at) VALUES (?, ?, ?, ?, ?, ?)`,
			task.NewID(now), tk.ID, i+1, kind, TurnDone, now).Error; err != nil {
			t.Fatal(err)
		}
	}
	if err := old.db.Exec(`INSERT INTO review_comments(id, task_id, thread_id, file, line, side, intent, body, actor, delivery_state, delivered_turn, created_at)
		VALUES (?, ?, 't', 'f', 1, 'new', 'comment', 'b', 'human', 'delivered', 3, ?)`, task.NewID(now), tk.ID, now).Error; err != nil {
		t.Fatal(err)
	}
	_ = old.Close()
	s, err := OpenSQL(path)
	if err != nil {
		t.Fatalf("upgrade to 27: %v", err)
	}
	defer s.Close()
	turns, err := s.ListTurns(ctx, tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tu := range turns {
		got = append(got, tu.Label())
	}
	if fmt.Sprint(got) != "[work turn 1 ask 1 work turn 2]" {
		t.Errorf("turns after the upgrade: got %v, want [work turn 1 ask 1 work turn 2]", got)
	}
	up, _ := s.GetTask(ctx, tk.ID)
	if up.Turns != 2 || up.Asks != 1 || up.Setups != 0 {
		t.Errorf("counts after the upgrade: turns %d asks %d setups %d, want 2 1 0", up.Turns, up.Asks, up.Setups)
	}
	cs, _ := s.ListReviewComments(ctx, tk.ID)
	if len(cs) != 1 || cs[0].DeliveredTurn != 2 {
		t.Errorf("delivered_turn after the upgrade: %+v, want work turn 2", cs)
	}
	// a new turn follows on
	next := &Turn{ID: task.NewID(time.Now()), TaskID: tk.ID, Kind: TurnWork, Status: TurnQueued, QueuedAt: time.Now().UTC()}
	if err := s.CreateTurn(ctx, next); err != nil || next.Seq != 3 || next.Number != 4 {
		t.Errorf("next turn: seq %d number %d err %v, want 3 4", next.Seq, next.Number, err)
	}
}
