package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"lazy/errkind"
	"lazy/review"
	"lazy/store/pgtest"
	"lazy/task"
)

// TestPostgresUpgradeInPlace writes a PostgreSQL store at version 14 as a
// binary of that version would (rows of every table it had), then opens it
// with today's migrations: every step is recorded, every row survives, the
// version-16 approvals move keeps its row, and the new tables work.
func TestPostgresUpgradeInPlace(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.NewDatabase(t)
	old, err := OpenPostgres(dsn, migrateUpTo(14))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	tk := newTask("old-one")
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO tasks(id, code, status, created_at, updated_at, last_activity) VALUES (?, ?, ?, ?, ?, ?)`, []any{tk.ID, "old-one", "blocked", now, now, now}},
		{`INSERT INTO turns(id, task_id, number, kind, status, prompt, queued_at) VALUES (?, ?, 1, 'work', 'done', 'hello', ?)`, []any{task.NewID(now), tk.ID, now}},
		{`INSERT INTO comments(id, task_id, body, created_at) VALUES (?, ?, 'an old comment', ?)`, []any{task.NewID(now), tk.ID, now}},
		{`INSERT INTO review_comments(id, task_id, thread_id, file, line, side, intent, body, actor, created_at) VALUES (?, ?, 't', 'a.go', 3, 'new', 'comment', 'rename it', 'human', ?)`, []any{task.NewID(now), tk.ID, now}},
		{`INSERT INTO approvals(task_id, path, approved_at) VALUES (?, '.github/ci.yml', ?)`, []any{tk.ID, now}},
	} {
		if err := old.db.Exec(q.sql, q.args...).Error; err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	_ = old.Close()

	s, err := OpenPostgres(dsn)
	if err != nil {
		t.Fatalf("upgrade from version 14: %v", err)
	}
	defer s.Close()
	var versions []int
	s.db.Raw(`SELECT version FROM schema_migrations ORDER BY version`).Scan(&versions)
	if len(versions) != len(migrations) || versions[0] != 12 || versions[len(versions)-1] != SchemaVersion() {
		t.Fatalf("versions after upgrade: %v, want every step of the migrations from 12 to %d", versions, SchemaVersion())
	}
	ctx := context.Background()
	got, err := s.GetTask(ctx, tk.ID)
	if err != nil || got.Code == nil || *got.Code != "old-one" || got.Tripwire != "" || got.BudgetTokens != 0 {
		t.Fatalf("task after upgrade: %+v %v", got, err)
	}
	turns, _ := s.ListTurns(ctx, tk.ID)
	cs, _ := s.ListComments(ctx, tk.ID)
	rcs, _ := s.ListReviewComments(ctx, tk.ID)
	as, _ := s.ListApprovals(ctx, tk.ID)
	if len(turns) != 1 || turns[0].Prompt != "hello" || len(cs) != 1 || len(rcs) != 1 || rcs[0].Body != "rename it" || rcs[0].StartLine != 0 {
		t.Fatalf("rows after upgrade: turns %+v comments %+v review %+v", turns, cs, rcs)
	}
	if len(as) != 1 || as[0].Kind != ApprovalProtected {
		t.Fatalf("approvals after upgrade: %+v", as)
	}
	// the columns and tables of later versions work
	got.BudgetTokens = 5_000_000_000 // past 32 bits: BIGINT on PostgreSQL
	if err := s.SaveTask(ctx, got); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.GetTask(ctx, tk.ID); again.BudgetTokens != 5_000_000_000 {
		t.Fatalf("budget %d", again.BudgetTokens)
	}
	rc := &review.ReviewComment{ID: task.NewID(now), TaskID: tk.ID, ThreadID: "r", File: "a.go", Line: 4, StartLine: 2, Side: review.New,
		Intent: review.Comment, Body: "range", Actor: review.Human, DeliveryState: review.PendingDelivery, CreatedAt: now}
	if err := s.AddReviewComment(ctx, rc); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	s.db.Raw(`SELECT data_type FROM information_schema.columns WHERE table_name = 'tasks' AND column_name IN ('created_at', 'budget_tokens') ORDER BY column_name`).Scan(&kinds)
	if strings.Join(kinds, ",") != "bigint,timestamp with time zone" {
		t.Errorf("column types: %v", kinds)
	}
}

// TestPostgresDaemonsMigrateTogether: daemons that start at once on one new
// database all open it; the advisory lock lets one migrate and the others
// find it done.
func TestPostgresDaemonsMigrateTogether(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.NewDatabase(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := OpenPostgres(dsn)
			if err == nil {
				_ = s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("daemon %d: %v", i, err)
		}
	}
}

func TestRedactDSN(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://lazy:s3cret@db:5432/lazy?sslmode=disable": "postgres://lazy:xxxxx@db:5432/lazy?sslmode=disable",
		"host=db user=lazy password=s3cret dbname=lazy":       "host=db user=lazy password=xxxxx dbname=lazy",
		"postgres://lazy@db/lazy":                             "postgres://lazy@db/lazy",
	} {
		if got := RedactDSN(in); got != want || strings.Contains(got, "s3cret") {
			t.Errorf("RedactDSN(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPostgresUnreachable: a server that is not there is an error naming
// the key to check, with the password hidden.
func TestPostgresUnreachable(t *testing.T) {
	_, err := OpenPostgres("postgres://lazy:s3cret@127.0.0.1:1/lazy?sslmode=disable&connect_timeout=2")
	if err == nil || !strings.Contains(err.Error(), "storage.dsn") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("got %v", err)
	}
}

// TestClusterSecret: the first member to ask makes the secret, every member
// then reads the same one; another cluster name has its own.
func TestClusterSecret(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	var got [][]byte
	for i := 0; i < 2; i++ {
		s, err := OpenPostgres(dsn)
		if err != nil {
			t.Fatal(err)
		}
		sec, err := s.ClusterSecret(ctx, "c1")
		_ = s.Close()
		if err != nil || len(sec) != 32 {
			t.Fatalf("secret: %x %v", sec, err)
		}
		got = append(got, sec)
	}
	if string(got[0]) != string(got[1]) {
		t.Fatal("two members read different secrets")
	}
	s, _ := OpenPostgres(dsn)
	defer s.Close()
	if other, _ := s.ClusterSecret(ctx, "c2"); string(other) == string(got[0]) {
		t.Fatal("another cluster has the same secret")
	}
}

// TestAgentHomes: a task's agent home archive is kept, replaced and read
// back whole (bytes past 32 bits of length are not needed; a few MiB are).
func TestAgentHomes(t *testing.T) {
	srv := pgtest.Start(t)
	s, err := OpenPostgres(srv.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	tk := newTask("")
	if err := s.CreateTask(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AgentHome(ctx, tk.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("no home yet: %v", err)
	}
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	for i, a := range [][]byte{[]byte("first"), big} {
		if err := s.SaveAgentHome(ctx, tk.ID, a, now.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	got, at, err := s.AgentHome(ctx, tk.ID)
	if err != nil || !bytes.Equal(got, big) || !at.Equal(now.Add(time.Second)) {
		t.Fatalf("home: %d bytes at %v, %v", len(got), at, err)
	}
}

// TestPassphraseTriesAcrossMembers: two daemons on one database (members
// of a cluster) count wrong passphrases under one name at once: no count is
// lost, whichever member updates.
func TestPassphraseTriesAcrossMembers(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.NewDatabase(t)
	var members []*SQL
	for i := 0; i < 2; i++ {
		s, err := OpenPostgres(dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		members = append(members, s)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, s := range members {
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 10; j++ {
					if err := s.UpdatePassphraseTries(ctx, "project", func(w int, u time.Time) (int, time.Time) { return w + 1, u }); err != nil {
						t.Error(err)
					}
				}
			}()
		}
	}
	wg.Wait()
	var got int
	if err := members[1].UpdatePassphraseTries(ctx, "project", func(w int, u time.Time) (int, time.Time) { got = w; return w, u }); err != nil {
		t.Fatal(err)
	}
	if got != 80 {
		t.Fatalf("two members counted 80 wrong passphrases, the store kept %d", got)
	}
}

// TestPostgresStoppedSaysSo: with the PostgreSQL server stopped, a read and
// a write fail as errkind.Unavailable, saying the store does not answer and
// what to check (a 503 on the web and over the RPC), not as an unexpected
// error the web answers "internal error … see the daemon log" (an operator
// saw every command and page do that for a 20 s outage).
func TestPostgresStoppedSaysSo(t *testing.T) {
	srv := pgtest.Start(t)
	s, err := OpenPostgres(srv.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	now := time.Now().UTC()
	tk := &Task{ID: task.NewID(now), Status: task.Blocked, CreatedAt: now, UpdatedAt: now, LastActivity: now}
	if err := s.CreateTask(ctx, tk); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	_, rerr := s.GetTask(ctx, tk.ID)
	tk.Title = "renamed"
	werr := s.SaveTask(ctx, tk)
	for what, err := range map[string]error{"a read": rerr, "a write": werr} {
		if errkind.Of(err) != errkind.Unavailable || !strings.Contains(fmt.Sprint(err), "check that PostgreSQL runs") {
			t.Errorf("%s with the server stopped: %v (kind %q); want errkind.Unavailable saying what to check", what, err, errkind.Of(err))
		}
	}
}
