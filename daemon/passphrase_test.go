package daemon

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"lazy/api"
	"lazy/approval"
	"lazy/gitx/gitxtest"
	"lazy/store"
	"lazy/task"
)

// TestPassphraseTriesPerProject: wrong approval passphrases count for the
// project, not the task: guesses spread over two tasks start the wait, the
// wait holds for either task, and a daemon started anew over the same
// store (SQLite in the state dir) still holds it; once it is over the
// right passphrase approves.
func TestPassphraseTriesPerProject(t *testing.T) {
	root := gitxtest.NewRepo(t, map[string]string{".github/ci.yml": "on: push\n"})
	for _, b := range []string{"lazy/one", "lazy/two"} {
		gitxtest.Git(t, root, "branch", b)
	}
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
	for i, code := range []string{"one", "two"} {
		c := code
		tk := &store.Task{ID: task.NewID(now.Add(time.Duration(i) * time.Minute)), Code: &c, Status: task.Blocked, Branch: "lazy/" + code, Parent: "main",
			CreatedAt: now, UpdatedAt: now, LastActivity: now}
		if err := st.CreateTask(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := approval.Save(paths.Passphrase, "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	var ahead atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	start := func() *Daemon {
		t.Helper()
		d, err := Start(ctx, Options{Root: root, Environ: []string{"LAZY_HOME=" + home, "PATH=" + os.Getenv("PATH")}, SelfExe: "/bin/false", Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	approve := func(d *Daemon, ref, pass string) error {
		return d.review.Approve(ctx, ref, []string{".github/ci.yml"}, pass)
	}

	d := start()
	for i, ref := range []string{"one", "one"} {
		if err := approve(d, ref, "wrong horse battery"); err == nil || !strings.Contains(err.Error(), "wrong approval passphrase") || strings.Contains(err.Error(), "wait") {
			t.Fatalf("wrong passphrase %d on %s: %v", i+1, ref, err)
		}
	}
	// the third, on another task, starts the wait: the count is the project's
	if err := approve(d, "two", "wrong horse battery"); err == nil || !strings.Contains(err.Error(), "wait 1s before the next try") {
		t.Fatalf("the third wrong passphrase, on another task: %v", err)
	}
	ahead.Add(int64(-time.Hour)) // the wait cannot run out while the daemon restarts
	for _, ref := range []string{"one", "two"} {
		err := approve(d, ref, "correct horse battery")
		var w *approval.WaitError
		if !errors.As(err, &w) || !strings.Contains(err.Error(), "too many wrong passphrases for this project") {
			t.Fatalf("the right passphrase within the wait, on %s: %v", ref, err)
		}
	}
	d.Stop()
	<-d.Done()

	d = start()
	defer func() { d.Stop(); <-d.Done() }()
	var w *approval.WaitError
	if err := approve(d, "two", "correct horse battery"); !errors.As(err, &w) {
		t.Fatalf("the right passphrase within the wait, after a restart: %v", err)
	}
	ahead.Store(int64(2 * time.Second))
	if err := approve(d, "two", "correct horse battery"); err != nil {
		t.Fatalf("the right passphrase after the wait: %v", err)
	}
	as, err := d.st.ListApprovals(ctx, mustResolve(t, d, "two"))
	if err != nil || len(as) != 1 {
		t.Fatalf("approvals of two: %+v %v", as, err)
	}
	// the right one cleared the count: a wrong one is the first again
	if err := approve(d, "one", "wrong horse battery"); err == nil || strings.Contains(err.Error(), "wait") {
		t.Fatalf("a wrong passphrase after the right one: %v", err)
	}
}

func mustResolve(t *testing.T, d *Daemon, ref string) string {
	t.Helper()
	tk, err := d.svc.Resolve(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return tk.ID
}
