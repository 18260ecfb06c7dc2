package store_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lazy/client"
	"lazy/httpapi"
	"lazy/review"
	"lazy/store"
	"lazy/store/pgtest"
	"lazy/store/storetest"
)

func TestSQLContract(t *testing.T) {
	for _, sync := range []bool{true, false} {
		t.Run(fmt.Sprint("sync=", sync), func(t *testing.T) {
			storetest.Run(t, func(t *testing.T, dir string) store.Store {
				s, err := store.OpenSQL(filepath.Join(dir, "lazy.db"), store.WithSync(sync))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				return s
			})
		})
	}
}

// TestPostgresContract runs the contract against a real PostgreSQL server
// (Debian's, started by the test): one database per store directory the
// suite asks for, so a reopen finds what was written.
func TestPostgresContract(t *testing.T) {
	srv := pgtest.Start(t)
	for _, durable := range []bool{true, false} {
		t.Run(fmt.Sprint("sync=", durable), func(t *testing.T) {
			var mu sync.Mutex
			dbs := map[string]string{}
			storetest.Run(t, func(t *testing.T, dir string) store.Store {
				mu.Lock()
				dsn, ok := dbs[dir]
				if !ok {
					dsn = srv.NewDatabase(t)
					dbs[dir] = dsn
				}
				mu.Unlock()
				s, err := store.OpenPostgres(dsn, store.WithSync(durable))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				return s
			})
		})
	}
}

func TestFileContract(t *testing.T) {
	for _, sync := range []bool{true, false} {
		t.Run(fmt.Sprint("sync=", sync), func(t *testing.T) {
			storetest.Run(t, func(t *testing.T, dir string) store.Store {
				s, err := store.OpenFile(filepath.Join(dir, "store"), store.WithSync(sync))
				if err != nil {
					t.Fatal(err)
				}
				return s
			})
		})
	}
}

// TestRemoteContract runs the contract's reads through the real storage RPC
// (the daemon's echo handler over an SQL store, called by the RPC client);
// its writes go to the backing store as the daemon's own would, because the
// storage RPC is read-only (TestRemoteRefusesWrites).
func TestRemoteContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, dir string) store.Store {
		backing, err := store.OpenSQL(filepath.Join(dir, "lazy.db"))
		if err != nil {
			t.Fatal(err)
		}
		e, err := httpapi.New(httpapi.Deps{Token: "tok", Storage: store.Served(backing)})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(e)
		t.Cleanup(func() { srv.Close(); _ = backing.Close() })
		return readsRemote{Remote: store.NewRemote(&client.Client{Base: srv.URL, Token: "tok", HTTP: http.DefaultClient}), w: backing}
	})
}

// readsRemote reads through the remote store and writes to the daemon's.
type readsRemote struct {
	*store.Remote
	w store.Store
}

func (r readsRemote) CreateTask(ctx context.Context, t *store.Task) error {
	return r.w.CreateTask(ctx, t)
}
func (r readsRemote) SaveTask(ctx context.Context, t *store.Task) error { return r.w.SaveTask(ctx, t) }
func (r readsRemote) CreateTurn(ctx context.Context, t *store.Turn) error {
	return r.w.CreateTurn(ctx, t)
}
func (r readsRemote) SaveTurn(ctx context.Context, t *store.Turn) error { return r.w.SaveTurn(ctx, t) }
func (r readsRemote) MarkLaunched(ctx context.Context, id string, at time.Time, ids []string) error {
	return r.w.MarkLaunched(ctx, id, at, ids)
}
func (r readsRemote) AddComment(ctx context.Context, c *store.Comment) error {
	return r.w.AddComment(ctx, c)
}
func (r readsRemote) AddReviewComment(ctx context.Context, c *review.ReviewComment) error {
	return r.w.AddReviewComment(ctx, c)
}
func (r readsRemote) SaveReviewComment(ctx context.Context, c *review.ReviewComment) error {
	return r.w.SaveReviewComment(ctx, c)
}
func (r readsRemote) AnswerAsk(ctx context.Context, id string, c *review.ReviewComment) error {
	return r.w.AnswerAsk(ctx, id, c)
}
func (r readsRemote) AddApproval(ctx context.Context, a *store.Approval) error {
	return r.w.AddApproval(ctx, a)
}
func (r readsRemote) AddUsage(ctx context.Context, u ...*store.UsageCall) error {
	return r.w.AddUsage(ctx, u...)
}
func (r readsRemote) UpdatePassphraseTries(ctx context.Context, name string, fn func(int, time.Time) (int, time.Time)) error {
	return r.w.UpdatePassphraseTries(ctx, name, fn)
}

func (r readsRemote) AddEgress(ctx context.Context, e *store.EgressCall) error {
	return r.w.AddEgress(ctx, e)
}
func (r readsRemote) SetViewed(ctx context.Context, v store.ViewedFile, on bool) error {
	return r.w.SetViewed(ctx, v, on)
}
func (r readsRemote) SetResolved(ctx context.Context, rt store.ResolvedThread, on bool) error {
	return r.w.SetResolved(ctx, rt, on)
}
func (r readsRemote) SeeHead(ctx context.Context, reviewer, taskID, head string, at time.Time) (*store.ReviewedHead, error) {
	return r.w.SeeHead(ctx, reviewer, taskID, head, at)
}
func (r readsRemote) SaveTranscript(ctx context.Context, t *store.Transcript) error {
	return r.w.SaveTranscript(ctx, t)
}

// TestRemoteRefusesWrites: no storage.<write> changes the store, whoever
// holds the auth token: the client refuses, and so does the daemon when the
// RPC is called by hand (a forged reply, a rewritten or un-withdrawn
// comment, a self-granted approval).
func TestRemoteRefusesWrites(t *testing.T) {
	dir := t.TempDir()
	backing, err := store.OpenSQL(filepath.Join(dir, "lazy.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer backing.Close()
	e, err := httpapi.New(httpapi.Deps{Token: "tok", Storage: store.Served(backing)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e)
	defer srv.Close()
	ctx := context.Background()
	tk := storetest.NewTask("")
	if err := backing.CreateTask(ctx, tk); err != nil {
		t.Fatal(err)
	}
	c := client.Client{Base: srv.URL, Token: "tok", HTTP: http.DefaultClient}
	rc := &review.ReviewComment{ID: "c1", TaskID: tk.ID, ThreadID: "c1", File: "a", Line: 1, Side: "new", Intent: review.Comment, Body: "hi", Actor: "agent", CreatedAt: time.Now()}
	calls := map[string]store.StorageArgs{
		"createTask": {Task: storetest.NewTask("x")}, "saveTask": {Task: tk}, "createTurn": {Turn: &store.Turn{TaskID: tk.ID}},
		"saveTurn": {Turn: &store.Turn{ID: "t", TaskID: tk.ID}}, "markLaunched": {ID: "t", At: time.Now()},
		"addComment": {Comment: &store.Comment{ID: "m", TaskID: tk.ID, Body: "x"}}, "addReviewComment": {Review: rc},
		"saveReviewComment": {Review: rc}, "addApproval": {Approval: &store.Approval{TaskID: tk.ID, Path: ".github/x", Kind: "protected"}},
		"addUsage": {TaskID: tk.ID}, "answerAsk": {ID: "c1", Review: rc},
		"setViewed": {TaskID: tk.ID}, "setResolved": {TaskID: tk.ID}, "seeHead": {TaskID: tk.ID},
	}
	for op, args := range calls {
		err := c.Call(ctx, "storage."+op, args, nil)
		var se interface{ HTTPStatus() int }
		if err == nil || !errors.As(err, &se) || se.HTTPStatus() != http.StatusForbidden || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("storage.%s: got %v, want 403 read-only", op, err)
		}
	}
	if got, _ := backing.ListReviewComments(ctx, tk.ID); len(got) != 0 {
		t.Errorf("a review comment was written: %+v", got)
	}
	if got, _ := backing.ListApprovals(ctx, tk.ID); len(got) != 0 {
		t.Errorf("an approval was written: %+v", got)
	}
	remote := store.NewRemote(&c)
	if err := remote.AddApproval(ctx, &store.Approval{TaskID: tk.ID, Path: "x"}); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("the remote store's write: %v", err)
	}
	// reads still work
	if got, err := remote.GetTask(ctx, tk.ID); err != nil || got.ID != tk.ID {
		t.Fatalf("read through the RPC: %v", err)
	}
}
