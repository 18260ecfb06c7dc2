// Without the race detector, like cluster_test.go (two members in one
// process race inside protoactor-go and gRPC).

//go:build !race

package supervisor

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"

	"lazy/actors"
	"lazy/grain"
	"lazy/grain/etcdtest"
	"lazy/grain/grainpb"
	"lazy/store"
	"lazy/store/pgtest"
	"lazy/task"
)

// turnedClock is the clock of the members of a test cluster: now, moved on
// by what the test adds.
type turnedClock struct{ ahead atomic.Int64 }

func (c *turnedClock) now() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }

// clockedMember is member with clock as its clock.
func clockedMember(t *testing.T, dsn, etcd string, secret []byte, clock *turnedClock) (*Supervisor, store.Store) {
	t.Helper()
	st, err := store.OpenPostgres(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	dir := t.TempDir()
	deps := &actors.TaskDeps{Store: st, Launcher: newScripted(), LockDir: filepath.Join(dir, "locks"), Root: dir,
		RecoveryDir: filepath.Join(dir, "recovery"), AskTimeout: time.Minute, Log: testLog(), CheckPassphrase: noPassphrase}
	s, err := New(Config{Core: testCore(t, filepath.Join(dir, "proxy-tokens.json")), Task: deps, Timeout: 20 * time.Second,
		Cluster: &ClusterOptions{Name: "lazy-test", Etcd: []string{etcd}, Host: "127.0.0.1", Secret: secret, Now: clock.now}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	if err := s.Join(nil); err != nil {
		t.Fatal(err)
	}
	return s, st
}

// TestReplayedCallsAreRefused: calls captured between two members (encoded
// through the members' own link, as askGrain does, then sent again from a
// process of the attacker's that reaches the members' port) are refused
// when replayed to the task that took them, aimed at another task (as they
// are, or with the task rewritten), or sent after the window; the task is
// left as it was, and a fresh call from a member still works.
func TestReplayedCallsAreRefused(t *testing.T) {
	etcd := etcdtest.Start(t)
	pg := pgtest.Start(t)
	dsn := pg.NewDatabase(t)
	secret := []byte("a secret of this test cluster")
	clock := &turnedClock{}
	a, st := clockedMember(t, dsn, etcd.Endpoint, secret, clock)
	b, _ := clockedMember(t, dsn, etcd.Endpoint, secret, clock)
	for deadline := time.Now().Add(30 * time.Second); len(a.Members()) != 2 || len(b.Members()) != 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("members: a sees %v, b sees %v", a.Members(), b.Members())
		}
	}
	ctx := context.Background()
	ids := blockedTasks(t, st, 2)
	victim, other := ids[0], ids[1]

	attacker := actor.NewActorSystem()
	rem := remote.NewRemote(attacker, remote.Configure("127.0.0.1", 0))
	rem.Start()
	defer rem.Shutdown(false)
	// replay sends call to the grain of task id over the network and
	// returns what it answered
	replay := func(id string, call *grainpb.Call) (any, error) {
		t.Helper()
		found := a.cluster.Get(id, grain.Kind)
		if found == nil {
			t.Fatalf("no grain for task %s", id)
		}
		// a new PID: the one a resolved caches a's own process
		res, err := attacker.Root.RequestFuture(actor.NewPID(found.Address, found.Id), call, 10*time.Second).Result()
		if err != nil {
			t.Fatalf("the replayed call was not answered: %v", err)
		}
		reply, ok := res.(*grainpb.Reply)
		if !ok {
			t.Fatalf("reply %T", res)
		}
		return grain.DecodeReply(reply)
	}
	title := func(id string) string {
		t.Helper()
		tk, err := st.GetTask(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return tk.Title
	}
	refused := func(what string, err error, why string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: got %v, want a refusal saying %q", what, err, why)
		}
	}

	// a call captured on its way to the victim's grain: it is delivered once
	captured, err := a.link.Encode(&actors.Rename{Title: "captured"}, victim, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay(victim, captured); err != nil || title(victim) != "captured" {
		t.Fatalf("the call's first delivery: %v (title %q)", err, title(victim))
	}
	if _, err := Ask[*actors.Done](b, victim, &actors.Rename{Title: "the reviewer's"}); err != nil {
		t.Fatal(err)
	}
	// (a) the same call again, to the same task: refused
	_, err = replay(victim, captured)
	refused("the call replayed to its task", err, "same nonce")
	if got := title(victim); got != "the reviewer's" {
		t.Errorf("after the replay the title is %q", got)
	}

	// (b) a captured accept, passphrase and all, aimed at another task:
	// refused as it is, and refused with its task rewritten
	accept, err := b.link.Encode(&actors.Accept{Reason: "looks fine", Passphrase: "correct horse battery"}, victim, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = replay(other, accept)
	refused("an accept for one task sent to another", err, "signed for another task")
	accept.Task = other
	_, err = replay(other, accept)
	refused("an accept with its task rewritten", err, "not signed")
	rename, _ := a.link.Encode(&actors.Rename{Title: "re-aimed"}, victim, 10*time.Second)
	_, err = replay(other, rename)
	refused("a rename for one task sent to another", err, "signed for another task")
	if tk, _ := st.GetTask(ctx, other); tk.Status != task.Blocked || tk.Title == "re-aimed" {
		t.Errorf("the other task after the re-aimed calls: %s %q", tk.Status, tk.Title)
	}

	// (c) a cancel captured, replayed after the window: refused
	cancel, err := a.link.Encode(&actors.CancelTask{}, other, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	clock.ahead.Store(int64(grain.Window + time.Second))
	_, err = replay(other, cancel)
	refused("a cancel replayed after the window", err, "outside the time window")
	if tk, _ := st.GetTask(ctx, other); tk.Status != task.Blocked {
		t.Fatalf("the late cancel ended the task: %s", tk.Status)
	}

	// a fresh call from either member still works
	if _, err := Ask[*actors.Done](a, other, &actors.Rename{Title: "fresh"}); err != nil || title(other) != "fresh" {
		t.Fatalf("a fresh rename: %v (title %q)", err, title(other))
	}
	if _, err := Ask[*actors.Done](b, other, &actors.CancelTask{}); err != nil {
		t.Fatalf("a fresh cancel: %v", err)
	}
	if tk, _ := st.GetTask(ctx, other); tk.Status != task.Cancelled {
		t.Errorf("after a fresh cancel the task is %s", tk.Status)
	}
}
