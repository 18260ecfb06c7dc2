package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"lazy/review"
	"lazy/task"
)

// TestFileTornTail: a crash mid-append leaves half a line; the store opens
// with every complete record and cuts the torn one off.
func TestFileTornTail(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tk := newTask("")
	if err := s.CreateTask(ctx, tk); err != nil {
		t.Fatal(err)
	}
	c := &review.ReviewComment{ID: task.NewID(time.Now()), TaskID: tk.ID, ThreadID: "t", File: "f", Line: 1, Side: review.New, Intent: review.Comment,
		Body: "kept", Actor: review.Human, DeliveryState: review.PendingDelivery, CreatedAt: time.Now().UTC()}
	if err := s.AddReviewComment(ctx, c); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, tk.ID+".jsonl")
	fh, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o600)
	_, _ = fh.WriteString(`{"k":"review","v":{"id":"half`)
	fh.Close()
	s2, err := OpenFile(dir)
	if err != nil {
		t.Fatalf("open after a torn append: %v", err)
	}
	got, _ := s2.ListReviewComments(ctx, tk.ID)
	if len(got) != 1 || got[0].Body != "kept" {
		t.Fatalf("records: %+v", got)
	}
	b, _ := os.ReadFile(path)
	if b[len(b)-1] != '\n' {
		t.Error("the torn tail was not cut off")
	}
	// appends after recovery land on a clean line
	c2 := *c
	c2.ID = task.NewID(time.Now())
	if err := s2.AddReviewComment(ctx, &c2); err != nil {
		t.Fatal(err)
	}
	s3, _ := OpenFile(dir)
	if got, _ := s3.ListReviewComments(ctx, tk.ID); len(got) != 2 {
		t.Errorf("after recovery and a new append: %d records", len(got))
	}
}

// TestUpgradeApprovalsKeepsRows upgrades a store written at version 14 (with
// an approval row) to 16: the row survives as a protected-path approval.
func TestUpgradeApprovalsKeepsRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lazy.db")
	old, err := openSQL(path, 14)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tk := newTask("")
	// the row as a version-14 binary wrote it (today's struct has newer columns)
	now := time.Now()
	if err := old.db.Exec(`INSERT INTO tasks(id, status, created_at, updated_at, last_activity) VALUES (?, ?, ?, ?, ?)`, tk.ID, "blocked", now, now, now).Error; err != nil {
		t.Fatal(err)
	}
	if err := old.db.Exec(`INSERT INTO approvals(task_id, path, approved_at) VALUES (?, ?, ?)`, tk.ID, ".github/ci.yml", time.Now()).Error; err != nil {
		t.Fatal(err)
	}
	_ = old.Close()
	s, err := OpenSQL(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	as, err := s.ListApprovals(ctx, tk.ID)
	if err != nil || len(as) != 1 || as[0].Kind != ApprovalProtected || as[0].Path != ".github/ci.yml" {
		t.Fatalf("approvals after upgrade: %+v %v", as, err)
	}
}

// FuzzFileStoreLoad opens a task file of arbitrary bytes: the store opens
// (keeping the complete records) or refuses with an error; never a panic.
func FuzzFileStoreLoad(f *testing.F) {
	f.Add([]byte(`{"k":"task","v":{"id":"0190aaaa000070008000000000000001","status":"blocked"}}` + "\n" + `{"k":"review","v":{"id":"x","task_id":"0190aaaa000070008000000000000001"}}` + "\n"))
	f.Add([]byte(`{"k":"turn","v":{}}` + "\n"))
	f.Add([]byte(`{"k":"task","v":{"id":"a"}}` + "\n" + `{"k":"launch","v":{"turn_id":"q","delivered":["x"]}}` + "\n" + `{"k":"nope"`))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "t.jsonl"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		if s, err := OpenFile(dir); err == nil {
			if _, err := s.ListTasks(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	})
}
