package supervisor

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"lazy/actors"
	"lazy/agent"
	"lazy/api"
	"lazy/store"
	"lazy/task"
)

// fakeLauncher runs turns by calling fn; it records the prompts it saw.
type fakeLauncher struct {
	mu      sync.Mutex
	prompts []string
	fn      func(ctx context.Context, req agent.TurnRequest) (agent.Result, agent.Outcome, error)
	raw     bool // fn gets the request unrendered (it calls FinalPrompt itself)
}

func (f *fakeLauncher) RunTurn(ctx context.Context, req agent.TurnRequest) (agent.Result, agent.Outcome, error) {
	if f.raw {
		return f.fn(ctx, req) // fn renders the prompt itself, when it chooses
	}
	prompt, err := req.FinalPrompt(ctx) // as the launcher does, once a slot is free
	if err != nil {
		return agent.Result{}, agent.Outcome{}, err
	}
	req.Prompt = prompt
	f.mu.Lock()
	f.prompts = append(f.prompts, req.Prompt)
	f.mu.Unlock()
	return f.fn(ctx, req)
}

func (f *fakeLauncher) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.prompts...)
}

type harness struct {
	dir    string
	sup    *Supervisor
	st     *store.SQL
	events <-chan api.Event
	taskID string
}

func newHarness(t *testing.T, l *fakeLauncher) *harness {
	t.Helper()
	dir := t.TempDir()
	st, err := store.OpenSQL(filepath.Join(dir, "lazy.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	sup, err := New(Config{Core: testCore(t, filepath.Join(dir, "proxy-tokens.json")), Log: log, Timeout: 5 * time.Second,
		Task: &actors.TaskDeps{Store: st, Launcher: l, LockDir: filepath.Join(dir, "locks"), Log: log,
			RecoveryDir: filepath.Join(dir, "recovery"), AskTimeout: time.Minute, CheckPassphrase: noPassphrase}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sup.Shutdown)
	ch, cancel, err := sup.Subscribe(actors.Filter{Tasks: true}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	now := time.Now().UTC()
	tk := &store.Task{ID: task.NewID(now), Status: task.Blocked, CreatedAt: now, UpdatedAt: now, LastActivity: now, Worktree: dir}
	if err := st.CreateTask(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	return &harness{sup: sup, st: st, events: ch, taskID: tk.ID, dir: dir}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// waitEvent waits for an event matching pred.
func (h *harness) waitEvent(t *testing.T, what string, pred func(api.Event) bool) api.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-h.events:
			if pred(e) {
				return e
			}
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (h *harness) work(t *testing.T, prompt string) store.Turn {
	t.Helper()
	res, err := h.sup.ask(h.taskID, &actors.StartWork{Trigger: "unblock", Prompt: prompt})
	if err != nil {
		t.Fatal(err)
	}
	return res.(*actors.WorkQueued).Turn
}

func ok(context.Context, agent.TurnRequest) (agent.Result, agent.Outcome, error) {
	return agent.Result{Text: "done", SessionID: "S"}, agent.Outcome{}, nil
}

func TestTurnsRunInOrderAndHealthAnswersMeanwhile(t *testing.T) {
	release := make(chan struct{})
	l := &fakeLauncher{fn: func(ctx context.Context, req agent.TurnRequest) (agent.Result, agent.Outcome, error) {
		if req.Prompt == "first" {
			select {
			case <-release:
			case <-ctx.Done():
				return agent.Result{}, agent.Outcome{}, ctx.Err()
			}
		}
		return ok(ctx, req)
	}}
	h := newHarness(t, l)
	for _, p := range []string{"first", "second", "third"} {
		h.work(t, p)
	}
	h.waitEvent(t, "turn 1 start", func(e api.Event) bool { return e.Kind == "turn_start" && e.Turn == 1 })
	// the first turn is blocked in the launcher; the mailbox must still answer
	res, err := h.sup.ask(h.taskID, &actors.GetHealth{})
	if err != nil {
		t.Fatalf("health while a turn runs: %v", err)
	}
	hl := res.(api.ActorHealth)
	if hl.Running != "work turn 1" || len(hl.Queued) != 2 || hl.Queued[0] != "work turn 2" {
		t.Fatalf("health: %+v", hl)
	}
	close(release)
	h.waitEvent(t, "turn 3 end", func(e api.Event) bool { return e.Kind == "turn_end" && e.Turn == 3 })
	h.waitEvent(t, "blocked", func(e api.Event) bool { return e.Kind == "status" && e.Status == string(task.Blocked) })
	if got := l.seen(); len(got) != 3 || got[0] != "first" || got[1] != "second" || got[2] != "third" {
		t.Fatalf("order: got %v", got)
	}
	tk, _ := h.st.GetTask(context.Background(), h.taskID)
	if tk.Status != task.Blocked || tk.Turns != 3 || tk.SessionID != "S" {
		t.Errorf("task after turns: %+v", tk)
	}
}

func TestPanicRestartsAndQueueSurvives(t *testing.T) {
	started := make(chan string, 10)
	l := &fakeLauncher{fn: func(ctx context.Context, req agent.TurnRequest) (agent.Result, agent.Outcome, error) {
		started <- req.Prompt
		if req.Prompt == "long" {
			<-ctx.Done()
			return agent.Result{}, agent.Outcome{}, ctx.Err()
		}
		return ok(ctx, req)
	}}
	h := newHarness(t, l)
	h.work(t, "long")
	h.work(t, "after-1")
	h.work(t, "after-2")
	if got := <-started; got != "long" {
		t.Fatalf("first turn: %s", got)
	}
	if err := h.sup.InjectPanic(h.taskID, "test"); err != nil {
		t.Fatal(err)
	}
	h.waitEvent(t, "turn 1 interrupted", func(e api.Event) bool {
		return e.Kind == "turn_end" && e.Turn == 1 && e.Status == store.TurnInterrupted
	})
	h.waitEvent(t, "turn 3 end", func(e api.Event) bool { return e.Kind == "turn_end" && e.Turn == 3 })
	if got := l.seen(); len(got) != 3 || got[1] != "after-1" || got[2] != "after-2" {
		t.Fatalf("after restart: got %v", got)
	}
	turns, _ := h.st.ListTurns(context.Background(), h.taskID)
	want := []string{store.TurnInterrupted, store.TurnDone, store.TurnDone}
	for i, tu := range turns {
		if tu.Status != want[i] {
			t.Errorf("turn %d: got %s, want %s", tu.Number, tu.Status, want[i])
		}
	}
	var restarts int
	for _, hl := range h.sup.Health() {
		if hl.TaskID == h.taskID {
			restarts = hl.Restarts
		}
	}
	if restarts != 1 || h.sup.Restarts() != 1 {
		t.Errorf("restarts: got %d / %d, want 1", restarts, h.sup.Restarts())
	}
}

func TestCommentAutoReactAndCancel(t *testing.T) {
	l := &fakeLauncher{fn: ok}
	h := newHarness(t, l)
	res, err := h.sup.ask(h.taskID, &actors.AddComment{Body: "please also add tests"})
	if err != nil {
		t.Fatal(err)
	}
	if ca := res.(*actors.CommentAdded); ca.Triggered == nil || ca.Triggered.Trigger != "comment" {
		t.Fatalf("a comment on a blocked task must trigger a work turn: %+v", ca)
	}
	h.waitEvent(t, "comment turn end", func(e api.Event) bool { return e.Kind == "turn_end" && e.Turn == 1 })
	if _, err := h.sup.ask(h.taskID, &actors.CancelTask{}); err != nil {
		t.Fatal(err)
	}
	h.waitEvent(t, "cancelled", func(e api.Event) bool { return e.Kind == "status" && e.Status == string(task.Cancelled) })
	_, err = h.sup.ask(h.taskID, &actors.StartWork{Prompt: "more"})
	if !errors.Is(err, actors.ErrEnded) {
		t.Fatalf("work on a cancelled task: got %v, want ErrEnded", err)
	}
}

func TestGrantsMintReuseRevoke(t *testing.T) {
	h := newHarness(t, &fakeLauncher{fn: ok})
	m := &actors.MintGrants{Role: "coder", TaskRef: "fix", TaskID: h.taskID, Vars: map[string]actors.MintVar{"ANTHROPIC_API_KEY": {Kind: "api_key", ShapeOf: "sk-ant-api03-REALREALREAL"}}}
	env1, err := h.sup.Mint(m)
	if err != nil {
		t.Fatal(err)
	}
	env2, _ := h.sup.Mint(m)
	ph := env1["ANTHROPIC_API_KEY"]
	if ph == "" || ph != env2["ANTHROPIC_API_KEY"] || ph[:17] != "sk-ant-api03-svc-" {
		t.Fatalf("placeholder: %q then %q", ph, env2["ANTHROPIC_API_KEY"])
	}
	if g := (*h.sup.Grants.Load())[ph]; g.Role != "coder" || g.TaskRef != "fix" {
		t.Fatalf("snapshot: %+v", g)
	}
	if err := h.sup.Revoke(h.taskID); err != nil {
		t.Fatal(err)
	}
	if _, ok := (*h.sup.Grants.Load())[ph]; ok {
		t.Fatal("grant survived revocation")
	}
}

// BenchmarkSpawnIdleTaskActors spawns 10,000 idle task actors per iteration
// (each loads its task row) and reports time and heap per actor.
func BenchmarkSpawnIdleTaskActors(b *testing.B) {
	const n = 10000
	dir := b.TempDir()
	st, err := store.OpenSQL(filepath.Join(dir, "lazy.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	ids := make([]string, n)
	for i := range ids {
		now := time.Now().UTC()
		ids[i] = task.NewID(now)
		if err := st.CreateTask(ctx, &store.Task{ID: ids[i], Status: task.Blocked, CreatedAt: now, UpdatedAt: now, LastActivity: now}); err != nil {
			b.Fatal(err)
		}
	}
	var perActorBytes float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		sup, err := New(Config{Core: testCore(b, filepath.Join(dir, "g.json")), Task: &actors.TaskDeps{Store: st, Launcher: &fakeLauncher{fn: ok}, LockDir: dir, Log: testLog(), CheckPassphrase: noPassphrase}})
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		for _, id := range ids {
			if _, err := sup.ask(id, &actors.GetHealth{}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		perActorBytes = float64(after.HeapAlloc-before.HeapAlloc) / n
		if got := len(sup.Health()); got != n+3 {
			b.Fatalf("health rows: %d, want %d", got, n+3)
		}
		sup.Shutdown()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/actor")
	b.ReportMetric(perActorBytes, "heap-B/actor")
}

// testLog discards the logs of a test tree that does not read them.
func testLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// noPassphrase is the passphrase check of a test that approves nothing.
func noPassphrase(string, string) error { return errors.New("this test sets no passphrase") }

// TestNewNamesWhatIsMissing: a tree built without what its task actors
// need refuses at construction, naming the fields, rather than crash on
// the first job that needs one.
func TestNewNamesWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no core", Config{Task: &actors.TaskDeps{}}, "Core"},
		{"no task deps", Config{Core: testCore(t, filepath.Join(dir, "g.json"))}, "Task"},
		{"task deps without store, passphrase check", Config{Core: testCore(t, filepath.Join(dir, "g.json")),
			Task: &actors.TaskDeps{Launcher: &fakeLauncher{}, LockDir: dir, Log: testLog()}}, "CheckPassphrase, Store missing"},
		{"cluster without secret", Config{Core: testCore(t, filepath.Join(dir, "g.json")), Task: &actors.TaskDeps{},
			Cluster: &ClusterOptions{Name: "c", Etcd: []string{"127.0.0.1:1"}, Host: "127.0.0.1"}}, "secret"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sup, err := New(c.cfg)
			if err == nil {
				sup.Shutdown()
				t.Fatalf("got a supervisor, want an error naming %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want it to name %q", err, c.want)
			}
		})
	}
}

// TestAskAsTheActorStops: asks sent while a task actor stops (its task was
// cancelled) are all answered at once — by the actor, or by a fresh one
// that finds the task ended — never left to time out (protoactor drops a
// message still in the mailbox of an actor that stops).
func TestAskAsTheActorStops(t *testing.T) {
	for range 10 {
		h := newHarness(t, &fakeLauncher{fn: ok})
		if _, err := h.sup.ask(h.taskID, &actors.GetHealth{}); err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		errs := make(chan error, 21)
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := h.sup.ask(h.taskID, &actors.GetHealth{})
				errs <- err
			}()
		}
		close(start)
		_, err := h.sup.ask(h.taskID, &actors.CancelTask{})
		errs <- err
		wg.Wait()
		close(errs)
		for err := range errs {
			if errors.Is(err, ErrUnresponsive) {
				t.Fatalf("an ask sent as the actor stopped was not answered: %v", err)
			}
		}
	}
}

// TestTrippedOnceUntilRearmed: a task whose wire trips again and again (an
// agent sending decoys in a loop) is recorded and announced once; after the
// reviewer's unblock re-arms it, the next trip is announced again.
func TestTrippedOnceUntilRearmed(t *testing.T) {
	h := newHarness(t, &fakeLauncher{fn: ok})
	trip := func() {
		for range 50 {
			if err := h.sup.Send(h.taskID, &actors.Tripwire{What: "canary"}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := h.sup.ask(h.taskID, &actors.GetHealth{}); err != nil { // the trips are handled
			t.Fatal(err)
		}
	}
	count := func() int {
		// a marker published after the trips were handled comes after
		// every event they made (the hub is one mailbox)
		h.sup.Publish(api.Event{Kind: api.EventStatus, TaskID: h.taskID, Detail: "marker"})
		n := 0
		h.waitEvent(t, "the marker", func(e api.Event) bool {
			if e.Kind == api.EventTripwire {
				n++
			}
			return e.Detail == "marker"
		})
		return n
	}
	trip()
	if n := count(); n != 1 {
		t.Fatalf("50 trips of a task made %d tripwire events, want 1", n)
	}
	if _, err := h.sup.ask(h.taskID, &actors.Unblock{Message: "go on"}); err != nil {
		t.Fatal(err)
	}
	h.waitEvent(t, "the unblock's turn end", func(e api.Event) bool { return e.Kind == api.EventTurnEnd })
	trip()
	if n := count(); n != 1 {
		t.Fatalf("after the unblock re-armed the task, 50 trips made %d tripwire events, want 1", n)
	}
}
