package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"lazy/api"
	"lazy/review"
	"lazy/store/pgtest"
)

// TestPostgresBackend: a daemon on storage.backend = "postgres" (a real
// server, started by the test) runs the main job: a task reaches blocked, a
// question is answered, a comment rides the unblock, the task survives a
// daemon restart and is accepted. No SQLite file is made, and the real
// credential is in no row of the database.
func TestPostgresBackend(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.NewDatabase(t)
	p := newProject(t, "process")
	p.env = append(p.env, "LAZY_STORAGE__BACKEND=postgres", "LAZY_STORAGE__DSN="+dsn)
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "--code", "pg", "-m", writeAndCommit)
	p.waitStatus("pg", "blocked")

	ask := p.post("pg", api.PostCommentArgs{Body: "why hello?", File: "hello.txt", Line: 1, Side: "new", Intent: "ask"})
	c := p.post("pg", api.PostCommentArgs{Body: "say hi instead", File: "hello.txt", Line: 1, Side: "new", Intent: "comment"})
	deadline := time.Now().Add(60 * time.Second)
	for !answered(p.threads("pg"), ask.ID) {
		if time.Now().After(deadline) {
			t.Fatalf("the ask was not answered: %+v", p.threads("pg"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.lazy(0, "unblock", "pg", "-m", "@answer done again")
	p.waitStatus("pg", "blocked")
	if got := delivery(p.threads("pg"), c.ID); got != review.Delivered {
		t.Fatalf("the comment is %q after the unblock", got)
	}

	p.lazy(0, "daemon", "stop")
	p.lazy(0, "daemon", "start")
	ti := p.show("pg")
	if ti.Status != "blocked" || ti.Turns < 2 {
		t.Fatalf("after a restart: %+v", ti)
	}
	p.lazy(0, "accept", "pg", "--reason", "fine")
	if ti := p.show("pg"); ti.Status != "accepted" {
		t.Fatalf("after accept: %s", ti.Status)
	}
	if _, err := os.Stat(p.paths.DB); !os.IsNotExist(err) {
		t.Errorf("a SQLite store was made at %s (%v)", p.paths.DB, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows int
	for _, table := range []string{"tasks", "turns", "comments", "review_comments", "approvals", "usage_calls", "schema_migrations"} {
		var dump string
		var n int
		if err := conn.QueryRow(ctx, "SELECT COALESCE(string_agg(row_to_json(t)::text, E'\\n'), ''), count(*) FROM "+table+" t").Scan(&dump, &n); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		rows += n
		if strings.Contains(dump, p.real) || strings.Contains(dump, "REALSECRET") {
			t.Errorf("the real credential is in table %s", table)
		}
	}
	if rows < 10 {
		t.Errorf("only %d rows in the database: the daemon did not write there", rows)
	}
}

func answered(pl review.Payload, id string) bool {
	for _, th := range pl.Threads {
		for _, m := range th.Messages {
			if m.ID == id {
				return m.AskState == review.AskAnswered
			}
		}
	}
	return false
}

func delivery(pl review.Payload, id string) review.DeliveryState {
	for _, th := range pl.Threads {
		for _, m := range th.Messages {
			if m.ID == id {
				return m.DeliveryState
			}
		}
	}
	return ""
}
