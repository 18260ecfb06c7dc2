package supervisor

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"lazy/actors"
	"lazy/api"
	"lazy/store"
	"lazy/task"
)

// testCore is a core for one test tree, stopped when the test ends (a
// tree built on it stops it first: Shutdown runs once).
func testCore(tb testing.TB, grantsPath string) *Core {
	tb.Helper()
	c, err := NewCore(CoreConfig{GrantsPath: grantsPath, Log: testLog(), Timeout: 5 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Shutdown)
	return c
}

// TestCoreServesBeforeTheTree: what the proxy and the launcher are built on
// works before any supervisor exists (grants minted and in the proxy's
// snapshot, events published and watched), and keeps working, the same
// grants and watchers, once the tree is built on it: the daemon builds the
// core, then the proxy, its sockets and the launcher, then the tree.
func TestCoreServesBeforeTheTree(t *testing.T) {
	dir := t.TempDir()
	c := testCore(t, filepath.Join(dir, "g.json"))
	events, cancel, err := c.Subscribe(actors.Filter{Tasks: true}, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	now := time.Now().UTC()
	id := task.NewID(now)
	env, err := c.Mint(&actors.MintGrants{TaskID: id, TaskRef: "t1", Vars: map[string]actors.MintVar{"ANTHROPIC_API_KEY": {Kind: "api_key"}}})
	if err != nil {
		t.Fatal(err)
	}
	ph := env["ANTHROPIC_API_KEY"]
	if g, ok := (*c.Grants.Load())[ph]; ph == "" || !ok || g.TaskID != id {
		t.Fatalf("minted %q before the tree: the proxy's snapshot has %+v, %v; want the task's grant", ph, g, ok)
	}
	c.Publish(api.Event{Kind: api.EventStatus, TaskID: id, TaskRef: "t1"})
	select {
	case e := <-events:
		if e.TaskID != id {
			t.Fatalf("got an event of %s, want %s", e.TaskID, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an event published on the core before the tree was built reached no watcher")
	}

	st, err := store.OpenSQL(filepath.Join(dir, "lazy.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sup, err := New(Config{Core: c, Log: testLog(), Task: &actors.TaskDeps{Store: st, Launcher: &fakeLauncher{fn: ok}, LockDir: dir, Log: testLog(), CheckPassphrase: noPassphrase}})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Shutdown()
	if sup.Grants != c.Grants {
		t.Fatal("the tree reads another grants snapshot than the core the proxy was given")
	}
	if err := sup.Revoke(id); err != nil {
		t.Fatal(err)
	}
	if _, ok := (*c.Grants.Load())[ph]; ok {
		t.Fatalf("revoked through the tree, the grant %q is still in the core's snapshot", ph)
	}
	sup.Publish(api.Event{Kind: api.EventStatus, TaskID: id, TaskRef: "t1"})
	select {
	case <-events:
	case <-time.After(5 * time.Second):
		t.Fatal("a watcher of the core hears nothing the tree publishes")
	}
	// the grants and the hub are in the tree's health, restarted by the
	// core's own supervision
	if err := sup.InjectPanic("grants", "test"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var row *api.ActorHealth
		for _, h := range sup.Health() {
			if h.Name == "grants" {
				row = &h
			}
		}
		if row != nil && row.Restarts == 1 && row.Responsive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("grants after a panic: %+v, want it listed, restarted once and responsive", row)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConstructionIsWhole: a core needs its grants file, a tree needs its
// core, and a core is one tree's: a second tree on it is refused rather
// than share its system and watchers.
func TestConstructionIsWhole(t *testing.T) {
	dir := t.TempDir()
	if _, err := NewCore(CoreConfig{}); err == nil || !strings.Contains(err.Error(), "GrantsPath") {
		t.Fatalf("NewCore without a grants path: got %v, want an error naming GrantsPath", err)
	}
	st, err := store.OpenSQL(filepath.Join(dir, "lazy.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	deps := &actors.TaskDeps{Store: st, Launcher: &fakeLauncher{fn: ok}, LockDir: dir, Log: testLog(), CheckPassphrase: noPassphrase}
	if _, err := New(Config{Task: deps}); err == nil || !strings.Contains(err.Error(), "Core") {
		t.Fatalf("New without a core: got %v, want an error naming Core", err)
	}
	c := testCore(t, filepath.Join(dir, "g.json"))
	sup, err := New(Config{Core: c, Task: deps})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Shutdown()
	if other, err := New(Config{Core: c, Task: deps}); err == nil {
		other.Shutdown()
		t.Fatal("a second tree was built on one core")
	} else if !strings.Contains(err.Error(), "another supervisor's") {
		t.Fatalf("a second tree on one core: got %v, want it refused as another supervisor's", err)
	}
}

// TestRegistryShards: an actor system's process registry costs little heap
// (protoactor's default took about 4 MB for its 32,768 maps, held for the
// daemon's life and doubled by the collector's headroom under load).
func TestRegistryShards(t *testing.T) {
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	sys := actor.NewActorSystem()
	after := heap()
	runtime.KeepAlive(sys)
	if grew := int64(after) - int64(before); grew > 1<<20 {
		t.Fatalf("a new actor system holds %d KB of heap; want under 1024 KB (is cmap.SHARD_COUNT set before it is made? see registry.go)", grew>>10)
	}
}

// TestTrafficOnlyForWatchers: the proxy builds a traffic event only while a
// watcher of proxy traffic is subscribed (WantsTraffic); a watcher of the
// tasks alone, or one that left, leaves it building none.
func TestTrafficOnlyForWatchers(t *testing.T) {
	c := testCore(t, filepath.Join(t.TempDir(), "g.json"))
	if c.WantsTraffic() {
		t.Fatal("no watcher: the proxy would build traffic events")
	}
	_, cancelTasks, err := c.Subscribe(actors.Filter{Tasks: true}, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer cancelTasks()
	if c.WantsTraffic() {
		t.Fatal("a watcher of tasks alone: the proxy would build traffic events")
	}
	_, cancelNet, err := c.Subscribe(actors.Filter{Net: true}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !c.WantsTraffic() {
		t.Fatal("a watcher of proxy traffic: the proxy would build no traffic event for it")
	}
	cancelNet()
	cancelNet() // twice: counted once
	if c.WantsTraffic() {
		t.Fatal("the traffic watcher left: the proxy would still build traffic events")
	}
}
