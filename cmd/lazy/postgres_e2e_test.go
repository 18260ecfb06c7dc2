package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"slices"
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

	if rows := pgLeaks(t, dsn, p.real, "REALSECRET"); rows < 10 {
		t.Errorf("only %d rows in the database: the daemon did not write there", rows)
	}
}

// pgLeaks searches every table of the database at dsn for the secrets: each
// row as JSON, and each agent home archive (gzip, tar) unpacked. It
// returns how many rows it searched.
func pgLeaks(t *testing.T, dsn string, secrets ...string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	trows, err := conn.Query(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(trows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	found := func(where, text string) {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("a secret is in %s", where)
			}
		}
	}
	rows := 0
	for _, table := range tables {
		var dump string
		var n int
		if err := conn.QueryRow(ctx, "SELECT COALESCE(string_agg(row_to_json(t)::text, E'\\n'), ''), count(*) FROM "+pgx.Identifier{table}.Sanitize()+" t").Scan(&dump, &n); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		rows += n
		found("table "+table, dump)
	}
	if slices.Contains(tables, "agent_homes") {
		hrows, err := conn.Query(ctx, "SELECT task_id, archive FROM agent_homes")
		if err != nil {
			t.Fatal(err)
		}
		for hrows.Next() {
			var id string
			var archive []byte
			if err := hrows.Scan(&id, &archive); err != nil {
				t.Fatal(err)
			}
			zr, err := gzip.NewReader(bytes.NewReader(archive))
			if err != nil {
				t.Fatalf("the agent home of %s: %v", id, err)
			}
			tr := tar.NewReader(zr)
			for {
				h, err := tr.Next()
				if err != nil {
					break
				}
				b, _ := io.ReadAll(tr)
				found("the agent home of "+id+": "+h.Name, string(b))
			}
		}
		hrows.Close()
	}
	return rows
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
