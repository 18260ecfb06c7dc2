package actors

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"lazy/agent"
	"lazy/api"
	"lazy/gitx/gitxtest"
	"lazy/review"
	"lazy/store"
	"lazy/store/pgtest"
	"lazy/task"
)

// TestOutboxFile: an entry is written whole (0600, no temporary file left)
// and read back as written; a file that is not an entry of this task — cut
// short, another task's, another version, a link — is a *badEntry, which
// setAside moves out of the way.
func TestOutboxFile(t *testing.T) {
	ob := outbox(filepath.Join(t.TempDir(), "outbox"))
	id := task.NewID(time.Now())
	now := time.Now().UTC().Truncate(time.Millisecond)
	j := &job{spec: askSpec{"c1"}, label: "ask c1", launched: true, delivered: []string{"d1"},
		turn: &store.Turn{ID: "turn-1", Number: 3}}
	r := jobResult{result: agent.Result{Text: "the answer", SessionID: "s1"}, outcome: agent.Outcome{Stdout: []byte("out"), ExitCode: 0},
		err: errors.Join(errors.New("slow"), agent.ErrTimeout), undone: "put back a.go"}
	if err := ob.write(newHeldEnd(id, j, r, 7, now)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(ob.path(id))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the entry's mode is %v, want 0600", fi.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(string(ob), ".tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if ids := OutboxTasks(string(ob)); len(ids) != 1 || ids[0] != id {
		t.Errorf("the outbox lists tasks %v, want [%s]", ids, id)
	}
	if held := HeldTurns(string(ob), id); len(held) != 1 || held[0] != "turn-1" {
		t.Errorf("the outbox holds turns %v of the task, want [turn-1]", held)
	}
	e, err := ob.read(id)
	if err != nil || e == nil {
		t.Fatalf("read: %v %v", e, err)
	}
	if e.TurnID != "turn-1" || e.Turn != 3 || e.CommentID != "c1" || e.LeaseEpoch != 7 || !e.EndedAt.Equal(now) || e.Delivered[0] != "d1" {
		t.Errorf("read back %+v", e)
	}
	back := e.result()
	if back.result.Text != "the answer" || string(back.outcome.Stdout) != "out" || back.undone != "put back a.go" ||
		!errors.Is(back.err, agent.ErrTimeout) || back.err.Error() != r.err.Error() {
		t.Errorf("result read back: %+v (err %v)", back, back.err)
	}

	good, _ := os.ReadFile(ob.path(id))
	other := task.NewID(time.Now().Add(time.Hour))
	bad := map[string][]byte{
		"cut short":    good[:len(good)/2],
		"empty":        {},
		"two objects":  append(append([]byte{}, good...), good...),
		"unknown key":  []byte(strings.Replace(string(good), `"version"`, `"versions"`, 1)),
		"other task":   []byte(strings.Replace(string(good), id, other, 1)),
		"next version": []byte(strings.Replace(string(good), `"version":1`, `"version":2`, 1)),
		"not a turn":   []byte(strings.Replace(string(good), `"kind":"ask"`, `"kind":"accept"`, 1)),
	}
	for name, b := range bad {
		if err := os.WriteFile(ob.path(id), b, 0o600); err != nil {
			t.Fatal(err)
		}
		var be *badEntry
		if e, err := ob.read(id); !errors.As(err, &be) {
			t.Errorf("%s: read %+v, %v; want a bad entry", name, e, err)
		}
	}
	if err := os.Remove(ob.path(id)); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "elsewhere.json")
	if err := os.WriteFile(target, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, ob.path(id)); err != nil {
		t.Fatal(err)
	}
	var be *badEntry
	if _, err := ob.read(id); !errors.As(err, &be) {
		t.Errorf("a link in the outbox is followed: %v", err)
	}
	to, err := ob.setAside(id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if e, err := ob.read(id); e != nil || err != nil {
		t.Errorf("after setAside the task has an entry: %+v %v", e, err)
	}
	if _, err := os.Lstat(to); err != nil {
		t.Errorf("the set-aside file: %v", err)
	}
	if err := ob.remove(id); err != nil {
		t.Errorf("remove with no entry: %v", err)
	}
	if err := ob.write(&heldEnd{TaskID: "../x"}); err == nil {
		t.Error("an entry for task ../x was written")
	}
}

// FuzzParseHeldEnd: whatever an outbox file holds, reading it returns an
// entry or an error, and an entry it returns is one of an agent turn of the
// task its file is named for.
func FuzzParseHeldEnd(f *testing.F) {
	id := "0192aaaa-bbbb-7ccc-8ddd-eeeeffff0000"
	j := &job{spec: workSpec{"t1"}, label: "turn 1", turn: &store.Turn{ID: "t1", Number: 1}}
	b, _ := json.Marshal(newHeldEnd(id, j, jobResult{result: agent.Result{Text: "done"}}, 0, time.Now()))
	f.Add(b)
	f.Add([]byte(`{"version":1,"task_id":"` + id + `","kind":"ask","turn_id":"x"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := parseHeldEnd(b, id)
		if err != nil {
			return
		}
		if e.TaskID != id || e.TurnID == "" || (e.Kind != "work" && e.Kind != "ask") {
			t.Fatalf("parsed an entry that is not this task's agent turn: %+v", e)
		}
		_ = e.result()
	})
}

// events collects what the actor publishes.
type events struct {
	mu  sync.Mutex
	all []api.Event
}

func (ev *events) publish(e api.Event) { ev.mu.Lock(); ev.all = append(ev.all, e); ev.mu.Unlock() }

func (ev *events) notes() []string {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var out []string
	for _, e := range ev.all {
		if e.Kind == api.EventTurnNote {
			out = append(out, e.Detail)
		}
	}
	return out
}

// runningTurn stores a turn of kind marked running (its end never
// recorded), as a member that died or lost its lease leaves it.
func (r *rig) runningTurn(kind, trigger string) *store.Turn {
	r.t.Helper()
	now := time.Now().UTC()
	tu := &store.Turn{ID: task.NewID(now), TaskID: r.tk.ID, Kind: kind, Trigger: trigger, Prompt: "go", Status: store.TurnRunning, QueuedAt: now}
	if err := r.st.CreateTurn(context.Background(), tu); err != nil {
		r.t.Fatal(err)
	}
	return tu
}

func (r *rig) comment(intent review.Intent, body string) *review.ReviewComment {
	r.t.Helper()
	now := time.Now().UTC()
	c := &review.ReviewComment{ID: task.NewID(now), TaskID: r.tk.ID, File: "a.go", Line: 1, Side: review.New, Intent: intent, Body: body,
		Actor: review.Human, CreatedAt: now}
	c.ThreadID = c.ID
	if intent == review.Ask {
		c.AskState = review.AskPending
	} else {
		c.DeliveryState = review.PendingDelivery
	}
	if err := r.st.AddReviewComment(context.Background(), c); err != nil {
		r.t.Fatal(err)
	}
	return c
}

func (r *rig) turn(id string) store.Turn {
	r.t.Helper()
	turns, err := r.st.ListTurns(context.Background(), r.tk.ID)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, tu := range turns {
		if tu.ID == id {
			return tu
		}
	}
	r.t.Fatalf("turn %s is not in the store", id)
	return store.Turn{}
}

func (r *rig) setStatus(s task.Status) {
	r.t.Helper()
	tk, err := r.st.GetTask(context.Background(), r.tk.ID)
	if err != nil {
		r.t.Fatal(err)
	}
	tk.Status = s
	if err := r.st.SaveTask(context.Background(), tk); err != nil {
		r.t.Fatal(err)
	}
}

// TestOutboxReplay: a task's actor that starts (a restart, the lease taken
// again) with an outbox entry for a turn the store still marks running
// records the turn from it: a work turn done with its answer, its comments
// delivered (the launch had not reached the store), the task blocked; an
// ask answered once. The entry is removed and the task says so. An entry
// that no longer applies (the turn recorded cut off by the next host, the
// task ended) is removed, the task saying what was discarded and why; one
// that cannot be read is set aside and reported, and the turn is then
// recorded cut off as before.
func TestOutboxReplay(t *testing.T) {
	r := newRigWith(t, "", nil, noAgent{}, "s0")
	ev := &events{}
	ob := outbox(filepath.Join(t.TempDir(), "outbox"))
	ctx := context.Background()
	respawn := func() {
		r.respawn(func(h *TaskHost) { h.Publish = ev.publish; r.deps.Outbox = string(ob) })
		if _, err := r.ask(&GetHealth{}); err != nil { // the actor has loaded the task
			t.Fatal(err)
		}
	}
	keep := func(j *job, res jobResult) {
		t.Helper()
		if err := ob.write(newHeldEnd(r.tk.ID, j, res, 0, time.Now().UTC())); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(what string) {
		t.Helper()
		if _, err := os.Stat(ob.path(r.tk.ID)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the outbox entry is still there (%v)", what, err)
		}
	}

	// a work turn that ended during the outage, its launch not recorded
	r.setStatus(task.Running)
	cm := r.comment(review.Comment, "rename it")
	work := r.runningTurn(store.TurnWork, "unblock")
	keep(&job{spec: workSpec{work.ID}, label: work.Label(), turn: work, launched: true, delivered: []string{cm.ID}},
		jobResult{result: agent.Result{Text: "renamed", SessionID: "s1"}, outcome: agent.Outcome{Stdout: []byte("log")}})
	respawn()
	if got := r.turn(work.ID); got.Status != store.TurnDone || got.Result != "renamed" || got.StartedAt == nil {
		t.Errorf("the work turn after the replay: %s %q started %v, want done \"renamed\", launched", got.Status, got.Result, got.StartedAt)
	}
	if c, err := r.st.GetReviewComment(ctx, cm.ID); err != nil || c.DeliveryState != review.Delivered {
		t.Errorf("the turn's comment after the replay: %+v %v, want delivered", c, err)
	}
	if tk, _ := r.st.GetTask(ctx, r.tk.ID); tk.Status != task.Blocked || tk.SessionID != "s1" {
		t.Errorf("the task after the replay: %s session %q, want blocked, s1", tk.Status, tk.SessionID)
	}
	gone("after a work turn's replay")

	// an ask answered during the outage: answered once
	q := r.comment(review.Ask, "why?")
	askTurn := r.runningTurn(store.TurnAsk, "ask")
	keep(&job{spec: askSpec{q.ID}, label: "ask", turn: askTurn, launched: true}, jobResult{result: agent.Result{Text: "because"}})
	respawn()
	respawn() // a second load finds no entry: nothing answered twice
	cs, err := r.st.ListReviewComments(ctx, r.tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	answers := 0
	for _, c := range cs {
		if c.ThreadID == q.ThreadID && c.Actor == review.Agent {
			answers++
			if c.Body != "because" {
				t.Errorf("the answer is %q, want \"because\"", c.Body)
			}
		}
		if c.ID == q.ID && c.AskState != review.AskAnswered {
			t.Errorf("the ask is %s after the replay, want answered", c.AskState)
		}
	}
	if answers != 1 {
		t.Errorf("the ask has %d answers, want 1", answers)
	}
	if got := r.turn(askTurn.ID); got.Status != store.TurnDone {
		t.Errorf("the ask turn is %s, want done", got.Status)
	}
	gone("after an ask's replay")
	if n := ev.notes(); len(n) != 2 || !strings.Contains(n[0], "recorded from this member's outbox") {
		t.Errorf("the task's notes: %q, want two saying the turns were recorded from the outbox", n)
	}

	// stale: the next host recorded the turn cut off
	cut := r.runningTurn(store.TurnWork, "unblock")
	keep(&job{spec: workSpec{cut.ID}, label: cut.Label(), turn: cut, launched: true}, jobResult{result: agent.Result{Text: "late"}})
	now := time.Now().UTC()
	cut.Status, cut.Error, cut.EndedAt = store.TurnInterrupted, "cut off: member b took the task", &now
	if err := r.st.SaveTurn(ctx, cut); err != nil {
		t.Fatal(err)
	}
	respawn()
	gone("a stale entry")
	if got := r.turn(cut.ID); got.Status != store.TurnInterrupted || got.Result != "" {
		t.Errorf("a turn recorded cut off was written over from a stale entry: %s %q", got.Status, got.Result)
	}
	if n := ev.notes(); !strings.Contains(n[len(n)-1], "was discarded: the store recorded turn") || !strings.Contains(n[len(n)-1], "member b took the task") {
		t.Errorf("the note of the discarded entry: %q", n[len(n)-1])
	}

	// unreadable: set aside, reported; the turn is recorded cut off
	broken := r.runningTurn(store.TurnAsk, "ask")
	if err := os.WriteFile(ob.path(r.tk.ID), []byte(`{"version":1,"task_id":`), 0o600); err != nil {
		t.Fatal(err)
	}
	respawn()
	gone("an unreadable entry")
	if aside, _ := filepath.Glob(ob.path(r.tk.ID) + ".bad-*"); len(aside) != 1 {
		t.Errorf("set aside: %v, want one file", aside)
	}
	if n := ev.notes(); !strings.Contains(n[len(n)-1], "could not be read") {
		t.Errorf("the note of the unreadable entry: %q", n[len(n)-1])
	}
	if got := r.turn(broken.ID); got.Status != store.TurnInterrupted {
		t.Errorf("the turn of an unreadable entry is %s, want interrupted", got.Status)
	}

	// the task ended meanwhile
	last := r.runningTurn(store.TurnWork, "unblock")
	keep(&job{spec: workSpec{last.ID}, label: last.Label(), turn: last, launched: true}, jobResult{result: agent.Result{Text: "late"}})
	r.setStatus(task.Cancelled)
	respawn()
	gone("an ended task's entry")
	if n := ev.notes(); !strings.Contains(n[len(n)-1], "the task has ended (cancelled)") {
		t.Errorf("the note of an ended task's entry: %q", n[len(n)-1])
	}
}

// gatedAgent answers a turn once released; with launch set, its process
// starts only once launch is closed.
type gatedAgent struct {
	launch  chan struct{}
	waiting chan struct{} // closed at the launch gate: the prompt is built (nil: not told)
	started chan struct{}
	release chan struct{}
}

func (g *gatedAgent) RunTurn(ctx context.Context, req agent.TurnRequest) (agent.Result, agent.Outcome, error) {
	if _, err := req.FinalPrompt(ctx); err != nil {
		return agent.Result{}, agent.Outcome{}, err
	}
	if g.waiting != nil {
		close(g.waiting)
	}
	if g.launch != nil {
		<-g.launch
	}
	if req.OnStart != nil {
		req.OnStart(4242)
	}
	close(g.started)
	<-g.release
	return agent.Result{Text: "done in the dark", SessionID: "s1"}, agent.Outcome{Stdout: []byte("ok")}, nil
}

// TestOutboxKeepsAnEndThroughAnOutage: one daemon on PostgreSQL (no
// lease). A work turn ends while the server is stopped: its end is written
// to the outbox. The daemon then stops (as a kill would lose the actor)
// while the server is still down, and starts again once it is back: the
// turn is recorded done from the outbox, not cut off, and the entry is
// gone.
func TestOutboxKeepsAnEndThroughAnOutage(t *testing.T) {
	pg := pgtest.Start(t)
	st, err := store.OpenPostgres(pg.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	g := &gatedAgent{started: make(chan struct{}), release: make(chan struct{})}
	r := newRigOn(t, st, "", nil, g, "")
	ob := outbox(filepath.Join(t.TempDir(), "outbox"))
	ev := &events{}
	r.respawn(func(h *TaskHost) { h.Publish = ev.publish; r.deps.Outbox = string(ob) })
	res, err := r.ask(&StartWork{Trigger: "start", Prompt: "work"})
	if err != nil {
		t.Fatal(err)
	}
	turnID := res.(*WorkQueued).Turn.ID
	<-g.started

	pg.Stop()
	close(g.release)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(ob.path(r.tk.ID)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the turn's end was not written to the outbox while the store was down")
		}
	}
	if err := r.sys.Root.StopFuture(r.pid).Wait(); err != nil { // the daemon stops while the store is down
		t.Fatal(err)
	}
	if _, err := os.Stat(ob.path(r.tk.ID)); err != nil {
		t.Fatalf("the outbox entry is gone after the stop, with the store still down: %v", err)
	}
	pg.Restart(t)
	r.pid = r.sys.Root.Spawn(actor.PropsFromProducer(NewTaskActor(r.tk.ID, r.deps, r.host)))
	if _, err := r.ask(&GetHealth{}); err != nil {
		t.Fatal(err)
	}
	got := r.turn(turnID)
	if got.Status != store.TurnDone || got.Result != "done in the dark" {
		t.Errorf("the turn after the restart: %s %q (%s), want done from the outbox", got.Status, got.Result, got.Error)
	}
	if tk, _ := st.GetTask(context.Background(), r.tk.ID); tk.Status != task.Blocked {
		t.Errorf("the task after the restart is %s (%s), want blocked", tk.Status, tk.FailReason)
	}
	if _, err := os.Stat(ob.path(r.tk.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the outbox entry is still there after the replay: %v", err)
	}
	t.Logf("notes: %q", ev.notes())
}

// TestOutboxReplayPushes: in a cluster, a work turn recorded from the
// outbox whose own push did not happen (the lease had run out, or the
// remote refused) has its commits, which are in this member's clone only,
// pushed through the pending-push path: the remote's branch is the turn's
// commit, and the task has no push pending after. Its agent home, which
// the turn could not keep in the store, is kept there again.
func TestOutboxReplayPushes(t *testing.T) {
	r := newRigWith(t, "", nil, noAgent{}, "s0")
	remote := filepath.Join(t.TempDir(), "remote.git")
	gitxtest.Git(t, r.root, "clone", "-q", "--bare", r.root, remote)
	gitxtest.Git(t, r.root, "remote", "add", "origin", remote)
	gitxtest.Git(t, r.root, "fetch", "-q", "origin")
	r.commit(map[string]string{"b.go": "package a // the turn's work\n"})
	head := revParse(t, r.root, "refs/heads/"+r.tk.Branch)
	r.setStatus(task.Running)
	work := r.runningTurn(store.TurnWork, "unblock")
	ob := outbox(filepath.Join(t.TempDir(), "outbox"))
	if err := ob.write(newHeldEnd(r.tk.ID, &job{spec: workSpec{work.ID}, label: work.Label(), turn: work, launched: true},
		jobResult{result: agent.Result{Text: "added b.go"}}, 3, time.Now().UTC())); err != nil {
		t.Fatal(err)
	}
	home := agentHome(t)
	kept := make(chan []byte, 1)
	homes := &homeStore{save: func(a []byte, _ time.Time) error { kept <- a; return nil },
		load: func() ([]byte, time.Time, error) { return nil, time.Time{}, store.ErrNotFound }}
	r.respawn(func(*TaskHost) {
		r.deps.Outbox, r.deps.Remote, r.deps.WorktreeDir = string(ob), "origin", t.TempDir()
		r.deps.Homes, r.deps.HomeFor = homes, func(string) string { return home }
	})
	select {
	case a := <-kept:
		if len(a) == 0 {
			t.Error("an empty agent home was kept")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent home was not kept in the store again after the replay")
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := exec.Command("git", "--git-dir", remote, "rev-parse", "--verify", "-q", "refs/heads/"+r.tk.Branch).Output()
		out := strings.TrimSpace(string(b))
		tk, err := r.st.GetTask(context.Background(), r.tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if out == head && tk.PushSince == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the remote's %s is %q, want the turn's commit %s; push pending since %v (%s)", r.tk.Branch, out, head, tk.PushSince, tk.PushError)
		}
	}
	if got := r.turn(work.ID); got.Status != store.TurnDone {
		t.Errorf("the turn is %s, want done", got.Status)
	}
}

// TestLaunchRecordedAfterAnOutage: a turn's agent starts while the store
// does not answer (its launch, and the delivery of the comments its prompt
// carried, cannot be written then), and ends while it is still down. Once
// the store answers, the turn is recorded done and launched, its comment
// delivered: a turn is never done but never launched.
func TestLaunchRecordedAfterAnOutage(t *testing.T) {
	pg := pgtest.Start(t)
	st, err := store.OpenPostgres(pg.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	g := &gatedAgent{launch: make(chan struct{}), waiting: make(chan struct{}), started: make(chan struct{}), release: make(chan struct{})}
	r := newRigOn(t, st, "", nil, g, "s0")
	cm := r.comment(review.Comment, "rename it")
	res, err := r.ask(&Unblock{Message: "go on"})
	if err != nil {
		t.Fatal(err)
	}
	turnID := res.(*WorkQueued).Turn.ID
	// the store stops once the agent is at its launch: its prompt (which
	// reads the queued comment) was built before the outage. Stopped when
	// the turn was merely recorded running, the prompt could meet the
	// outage: the agent then never launched (a CI run hung 10 minutes here)
	select {
	case <-g.waiting:
	case <-time.After(30 * time.Second):
		t.Fatal("the turn's agent never reached its launch")
	}
	pg.Stop()
	close(g.launch)
	select {
	case <-g.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the agent never started after its launch was let go")
	}
	close(g.release)
	if _, err := r.ask(&GetHealth{}); err != nil { // the launch and the end are the actor's
		t.Fatal(err)
	}
	pg.Restart(t)
	var got store.Turn
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if got = r.turn(turnID); got.Status != store.TurnRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the turn was not recorded after the store came back")
		}
	}
	if got.Status != store.TurnDone || got.StartedAt == nil {
		t.Errorf("the turn after the outage: %s, started %v; want done and launched", got.Status, got.StartedAt)
	}
	if c, err := st.GetReviewComment(context.Background(), cm.ID); err != nil || c.DeliveryState != review.Delivered {
		t.Errorf("the comment its prompt carried: %+v %v, want delivered", c, err)
	}
}
