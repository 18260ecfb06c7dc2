package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"lazy/review"
)

// SQL is the relational store through GORM: SQLite (pure-Go driver, WAL)
// or PostgreSQL (OpenPostgres). On SQLite, writes go through one connection
// (SQLite has one writer) and reads use a small pool of their own, which WAL
// lets run beside the writer; on PostgreSQL every write is its own
// transaction on the server's pool.
type SQL struct {
	db *gorm.DB    // the writing connection(s), used by w alone after migration
	w  writeRunner // every write goes through it
	rd *gorm.DB    // reads, through read
	ck *gorm.DB    // SQLite's checkpointer connection (nil on PostgreSQL)
	// gate lets reads at the read pool in arrival order: database/sql hands
	// a freed connection to a random waiter, which under load leaves some
	// requests waiting many times longer than the rest.
	gate chan struct{}
}

const readConns = 4

// read runs fn on the read pool once it is this caller's turn.
func (s *SQL) read(ctx context.Context, fn func(db *gorm.DB) error) error {
	select {
	case s.gate <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.gate }()
	return fn(s.rd.WithContext(ctx))
}

var _ Store = (*SQL)(nil)

// OpenSQL opens (creating if needed) the SQLite file at path and migrates it.
func OpenSQL(path string, opts ...Option) (*SQL, error) { return openSQL(path, 0, opts...) }

func openSQL(path string, upTo int, opts ...Option) (*SQL, error) {
	o := options(opts)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create store dir: %w", err)
	}
	// synchronous(FULL): a commit is on disk (the WAL is synced) before the
	// caller hears of it, so a 201 survives a power cut, not just a crash;
	// NORMAL (WithSync(false)) leaves the sync to checkpoints. The writing
	// connection never checkpoints (a checkpoint copies and syncs the
	// database file, which would stall every queued write); the
	// checkpointer does it beside the writer.
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_pragma=synchronous(" + o.synchronous() + ")"
	db, err := gorm.Open(sqlite.Open(dsn+"&_pragma=wal_autocheckpoint(0)"), &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	sqlDB.SetMaxOpenConns(1) // one writer; SQLite serialises writes anyway
	if err := migrate(db, upTo, nil); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	rd, err := gorm.Open(sqlite.Open(dsn+"&_pragma=query_only(1)"), &gorm.Config{
		Logger: logger.Discard, SkipDefaultTransaction: true, NowFunc: func() time.Time { return time.Now().UTC() },
	})
	if err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("open %s for reading: %w", path, err)
	}
	if rdDB, err := rd.DB(); err == nil {
		rdDB.SetMaxOpenConns(readConns)
		rdDB.SetMaxIdleConns(readConns)
	}
	ck, err := gorm.Open(sqlite.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		if rdDB, err := rd.DB(); err == nil {
			_ = rdDB.Close()
		}
		_ = sqlDB.Close()
		return nil, fmt.Errorf("open %s for checkpoints: %w", path, err)
	}
	if ckDB, err := ck.DB(); err == nil {
		ckDB.SetMaxOpenConns(1)
	}
	return &SQL{db: db, w: newWriter(db, ck), rd: rd, ck: ck, gate: make(chan struct{}, readConns)}, nil
}

// Close closes the database.
func (s *SQL) Close() error {
	s.w.close()
	var errs []error
	for _, g := range []*gorm.DB{s.rd, s.ck, s.db} {
		if g == nil || (g == s.db && s.rd == s.db) {
			continue // none, or the same pool as the reads (PostgreSQL)
		}
		if sqlDB, err := g.DB(); err != nil {
			errs = append(errs, err)
		} else if err := sqlDB.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func mapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	if strings.Contains(err.Error(), "UNIQUE constraint failed") || isUniqueViolation(err) {
		return fmt.Errorf("%s: %w", op, ErrConflict)
	}
	return fmt.Errorf("%s: %w", op, unavailable(err))
}

// CreateTask inserts a task; a taken code or id is ErrConflict.
func (s *SQL) CreateTask(ctx context.Context, t *Task) error {
	return mapErr("create task", s.w.do(ctx, func(tx *gorm.DB) error { return tx.Create(t).Error }))
}

// GetTask loads one task by full id.
func (s *SQL) GetTask(ctx context.Context, id string) (*Task, error) {
	var t Task
	if err := s.read(ctx, func(db *gorm.DB) error { return db.First(&t, "id = ?", id).Error }); err != nil {
		return nil, mapErr("get task "+id, err)
	}
	return &t, nil
}

// ListTasks lists every task, oldest first.
func (s *SQL) ListTasks(ctx context.Context) ([]Task, error) {
	var ts []Task
	err := s.read(ctx, func(db *gorm.DB) error { return db.Order("created_at, id").Find(&ts).Error })
	return ts, mapErr("list tasks", err)
}

// SaveTask writes every field of t.
func (s *SQL) SaveTask(ctx context.Context, t *Task) error {
	return mapErr("save task "+t.ID, s.w.do(ctx, func(tx *gorm.DB) error { return tx.Save(t).Error }))
}

// CreateTurn numbers the turn after the task's last one and inserts it.
func (s *SQL) CreateTurn(ctx context.Context, t *Turn) error {
	return mapErr("create turn", s.w.do(ctx, func(tx *gorm.DB) error {
		var n int
		if err := tx.Raw(`SELECT COALESCE(MAX(number), 0) FROM turns WHERE task_id = ?`, t.TaskID).Scan(&n).Error; err != nil {
			return err
		}
		t.Number = n + 1
		var seq int
		if err := tx.Raw(`SELECT COUNT(*) FROM turns WHERE task_id = ? AND kind = ?`, t.TaskID, t.Kind).Scan(&seq).Error; err != nil {
			return err
		}
		t.Seq = seq + 1
		return tx.Create(t).Error
	}))
}

// SaveTurn writes every field of t.
func (s *SQL) SaveTurn(ctx context.Context, t *Turn) error {
	return mapErr("save turn "+t.ID, s.w.do(ctx, func(tx *gorm.DB) error { return tx.Save(t).Error }))
}

// ListTurns lists a task's turns in order.
func (s *SQL) ListTurns(ctx context.Context, taskID string) ([]Turn, error) {
	var ts []Turn
	err := s.read(ctx, func(db *gorm.DB) error { return db.Where("task_id = ?", taskID).Order("number").Find(&ts).Error })
	return ts, mapErr("list turns", err)
}

// TurnsInState lists turns in one state, oldest first.
func (s *SQL) TurnsInState(ctx context.Context, state string) ([]Turn, error) {
	var ts []Turn
	err := s.read(ctx, func(db *gorm.DB) error {
		return db.Where("status = ?", state).Order("queued_at, number").Find(&ts).Error
	})
	return ts, mapErr("list turns "+state, err)
}

// MarkLaunched sets the turn's started_at and delivers its comments in one
// transaction.
func (s *SQL) MarkLaunched(ctx context.Context, turnID string, at time.Time, delivered []string) error {
	return mapErr("mark turn launched", s.w.do(ctx, func(tx *gorm.DB) error {
		var tu Turn
		if err := tx.First(&tu, "id = ?", turnID).Error; err != nil {
			return err
		}
		if err := tx.Model(&Turn{}).Where("id = ?", turnID).Update("started_at", at).Error; err != nil {
			return err
		}
		if len(delivered) == 0 {
			return nil
		}
		return tx.Model(&reviewRow{}).Where("id IN ? AND task_id = ?", delivered, tu.TaskID).
			Updates(map[string]any{"delivery_state": review.Delivered, "delivered_turn": tu.WorkNumber()}).Error
	}))
}

// AddComment inserts an ordinary comment.
func (s *SQL) AddComment(ctx context.Context, c *Comment) error {
	return mapErr("add comment", s.w.do(ctx, func(tx *gorm.DB) error { return tx.Create(c).Error }))
}

// ListComments lists a task's ordinary comments, oldest first.
func (s *SQL) ListComments(ctx context.Context, taskID string) ([]Comment, error) {
	var cs []Comment
	err := s.read(ctx, func(db *gorm.DB) error {
		return db.Where("task_id = ?", taskID).Order("created_at, id").Find(&cs).Error
	})
	return cs, mapErr("list comments", err)
}

// reviewRow is a review comment as the review_comments table holds it: the
// store maps its own rows, so review knows nothing of gorm.
type reviewRow review.ReviewComment

// TableName is the relational table of review comments.
func (reviewRow) TableName() string { return "review_comments" }

func reviewComments(rows []reviewRow) []review.ReviewComment {
	out := make([]review.ReviewComment, len(rows))
	for i := range rows {
		out[i] = review.ReviewComment(rows[i])
	}
	return out
}

// AddReviewComment inserts a review comment; it is durable when this returns.
func (s *SQL) AddReviewComment(ctx context.Context, c *review.ReviewComment) error {
	return mapErr("add review comment", s.w.do(ctx, func(tx *gorm.DB) error { return tx.Create((*reviewRow)(c)).Error }))
}

// SaveReviewComment writes the state fields of c.
func (s *SQL) SaveReviewComment(ctx context.Context, c *review.ReviewComment) error {
	return mapErr("save review comment "+c.ID, s.w.do(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&reviewRow{}).Where("id = ?", c.ID).
			Select("ask_state", "ask_error", "delivery_state", "delivered_turn", "withdrawn_at").
			Updates((*reviewRow)(c))
		if res.Error == nil && res.RowsAffected == 0 {
			return gorm.ErrRecordNotFound
		}
		return res.Error
	}))
}

// AnswerAsk saves an ask's reply and marks it answered in one transaction.
func (s *SQL) AnswerAsk(ctx context.Context, askID string, reply *review.ReviewComment) error {
	return mapErr("answer ask "+askID, s.w.do(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&reviewRow{}).Where("id = ? AND ask_state = ?", askID, review.AskPending).
			Updates(map[string]any{"ask_state": review.AskAnswered, "ask_error": ""})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("ask %s is not pending: %w", askID, ErrConflict)
		}
		return tx.Create((*reviewRow)(reply)).Error
	}))
}

// ListReviewComments lists a task's review comments, oldest first.
func (s *SQL) ListReviewComments(ctx context.Context, taskID string) ([]review.ReviewComment, error) {
	var rows []reviewRow
	err := s.read(ctx, func(db *gorm.DB) error {
		return db.Where("task_id = ?", taskID).Order("created_at, id").Find(&rows).Error
	})
	return reviewComments(rows), mapErr("list review comments", err)
}

// GetReviewComment loads one review comment.
func (s *SQL) GetReviewComment(ctx context.Context, id string) (*review.ReviewComment, error) {
	var row reviewRow
	if err := s.read(ctx, func(db *gorm.DB) error { return db.First(&row, "id = ?", id).Error }); err != nil {
		return nil, mapErr("get review comment "+id, err)
	}
	c := review.ReviewComment(row)
	return &c, nil
}

// AsksInState lists asks in one state, oldest first.
func (s *SQL) AsksInState(ctx context.Context, state review.AskState) ([]review.ReviewComment, error) {
	var rows []reviewRow
	err := s.read(ctx, func(db *gorm.DB) error {
		return db.Where("intent = ? AND actor = ? AND ask_state = ?", review.Ask, review.Human, state).Order("created_at, id").Find(&rows).Error
	})
	return reviewComments(rows), mapErr("list asks", err)
}

// AddApproval records an approval (idempotent).
func (s *SQL) AddApproval(ctx context.Context, a *Approval) error {
	return mapErr("add approval", s.w.do(ctx, func(tx *gorm.DB) error { return tx.Save(a).Error }))
}

// AddUsage records model calls in one write: one statement prepared once
// and run for each row (the daemon writes a batch of calls at a time; a
// statement parsed per row, or one INSERT of many rows, costs more: the
// SQLite driver matches each bound parameter against every argument).
func (s *SQL) AddUsage(ctx context.Context, calls ...*UsageCall) error {
	if len(calls) == 0 {
		return nil
	}
	return mapErr("add usage", s.w.do(ctx, func(tx *gorm.DB) error {
		sqlTx, ok := tx.Statement.ConnPool.(*sql.Tx)
		if !ok {
			return tx.Create(calls).Error
		}
		marks := "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?"
		if tx.Dialector.Name() == "postgres" {
			marks = "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14"
		}
		ctx := tx.Statement.Context // the writer's: it runs to the commit
		st, err := sqlTx.PrepareContext(ctx, "INSERT INTO usage_calls (id, task_id, turn, role, status, refused, input_tokens, output_tokens, "+
			"cache_read_input_tokens, cache_creation_input_tokens, charged_tokens, at, requests, writer) VALUES ("+marks+")")
		if err != nil {
			return err
		}
		defer st.Close()
		for _, u := range calls {
			if _, err := st.ExecContext(ctx, u.ID, u.TaskID, u.Turn, u.Role, u.Status, u.Refused, u.InputTokens, u.OutputTokens,
				u.CacheReadInputTokens, u.CacheCreationInputTokens, u.ChargedTokens, u.At, u.Calls(), u.Writer); err != nil {
				return err
			}
		}
		return nil
	}))
}

// AddEgress records one egress connection.
func (s *SQL) AddEgress(ctx context.Context, e *EgressCall) error {
	return mapErr("add egress", s.w.do(ctx, func(tx *gorm.DB) error { return tx.Create(e).Error }))
}

// ListEgress lists a task's egress connections, oldest first.
func (s *SQL) ListEgress(ctx context.Context, taskID string) ([]EgressCall, error) {
	var es []EgressCall
	err := s.read(ctx, func(db *gorm.DB) error { return db.Where("task_id = ?", taskID).Order("at, id").Find(&es).Error })
	return es, mapErr("list egress", err)
}

// SaveTranscript keeps a turn's transcript, replacing one kept before.
func (s *SQL) SaveTranscript(ctx context.Context, t *Transcript) error {
	return mapErr("save transcript", s.w.do(ctx, func(tx *gorm.DB) error {
		return tx.Exec(`INSERT INTO turn_transcripts(task_id, turn, body, at) VALUES (?, ?, ?, ?) ON CONFLICT (task_id, turn) DO UPDATE SET body = excluded.body, at = excluded.at`,
			t.TaskID, t.Turn, t.Body, t.At.UTC()).Error
	}))
}

// ListTranscripts lists a task's turn transcripts, by turn.
func (s *SQL) ListTranscripts(ctx context.Context, taskID string) ([]Transcript, error) {
	var ts []Transcript
	err := s.read(ctx, func(db *gorm.DB) error { return db.Where("task_id = ?", taskID).Order("turn").Find(&ts).Error })
	return ts, mapErr("list transcripts", err)
}

// ListUsage lists a task's model calls, oldest first.
func (s *SQL) ListUsage(ctx context.Context, taskID string) ([]UsageCall, error) {
	var us []UsageCall
	err := s.read(ctx, func(db *gorm.DB) error { return db.Where("task_id = ?", taskID).Order("at, id").Find(&us).Error })
	return us, mapErr("list usage", err)
}

// ListApprovals lists a task's approvals.
func (s *SQL) ListApprovals(ctx context.Context, taskID string) ([]Approval, error) {
	var as []Approval
	err := s.read(ctx, func(db *gorm.DB) error { return db.Where("task_id = ?", taskID).Order("kind, path").Find(&as).Error })
	return as, mapErr("list approvals", err)
}

// UpdatePassphraseTries updates the wrong passphrases counted under name
// in one transaction. The row is made first (a write), so SQLite takes its
// write lock before the read, and PostgreSQL's FOR UPDATE holds every other
// member's update of name until this one commits.
func (s *SQL) UpdatePassphraseTries(ctx context.Context, name string, fn func(wrong int, until time.Time) (int, time.Time)) error {
	return mapErr("count the passphrase tries", s.w.do(ctx, func(tx *gorm.DB) error {
		now := time.Now().UTC()
		if err := tx.Exec(`INSERT INTO passphrase_tries(name, wrong, wait_until, updated_at) VALUES (?, 0, ?, ?) ON CONFLICT (name) DO NOTHING`,
			name, time.Time{}.UTC(), now).Error; err != nil {
			return err
		}
		lock := ""
		if s.ck == nil { // PostgreSQL
			lock = " FOR UPDATE"
		}
		var row struct {
			Wrong     int
			WaitUntil time.Time
		}
		if err := tx.Raw(`SELECT wrong, wait_until FROM passphrase_tries WHERE name = ?`+lock, name).Scan(&row).Error; err != nil {
			return err
		}
		wrong, until := fn(row.Wrong, row.WaitUntil.UTC())
		if wrong <= 0 {
			return tx.Exec(`DELETE FROM passphrase_tries WHERE name = ?`, name).Error
		}
		return tx.Exec(`UPDATE passphrase_tries SET wrong = ?, wait_until = ?, updated_at = ? WHERE name = ?`, wrong, until.UTC(), now, name).Error
	}))
}
