package store

import (
	"fmt"
	"time"

	"gorm.io/gorm"
)

// migration is one versioned schema step. Version 12 is the baseline that
// brings a fresh store to the first released schema in one step; the steps
// after it are the ones older stores walk through.
type migration struct {
	version int
	name    string
	stmts   []string
}

var migrations = []migration{
	{12, "baseline: tasks, turns, comments", []string{
		`CREATE TABLE tasks (
			id TEXT PRIMARY KEY,
			code TEXT UNIQUE,
			title TEXT NOT NULL DEFAULT '',
			prompt TEXT NOT NULL DEFAULT '',
			status TEXT NOT NULL,
			role TEXT NOT NULL DEFAULT '',
			branch TEXT NOT NULL DEFAULT '',
			parent TEXT NOT NULL DEFAULT '',
			worktree TEXT NOT NULL DEFAULT '',
			scope TEXT NOT NULL DEFAULT '',
			session_id TEXT NOT NULL DEFAULT '',
			turns INTEGER NOT NULL DEFAULT 0,
			fail_reason TEXT NOT NULL DEFAULT '',
			created_at DATETIME NOT NULL,
			updated_at DATETIME NOT NULL,
			last_activity DATETIME NOT NULL,
			ended_at DATETIME
		)`,
		`CREATE INDEX idx_tasks_status ON tasks(status)`,
		`CREATE TABLE turns (
			id TEXT PRIMARY KEY,
			task_id TEXT NOT NULL REFERENCES tasks(id),
			number INTEGER NOT NULL,
			kind TEXT NOT NULL,
			trigger TEXT NOT NULL DEFAULT '',
			prompt TEXT NOT NULL DEFAULT '',
			status TEXT NOT NULL,
			output TEXT NOT NULL DEFAULT '',
			result TEXT NOT NULL DEFAULT '',
			error TEXT NOT NULL DEFAULT '',
			session_id TEXT NOT NULL DEFAULT '',
			exit_code INTEGER NOT NULL DEFAULT 0,
			queued_at DATETIME NOT NULL,
			started_at DATETIME,
			ended_at DATETIME,
			UNIQUE(task_id, number)
		)`,
		`CREATE INDEX idx_turns_status ON turns(status)`,
		`CREATE TABLE comments (
			id TEXT PRIMARY KEY,
			task_id TEXT NOT NULL REFERENCES tasks(id),
			body TEXT NOT NULL,
			created_at DATETIME NOT NULL
		)`,
		`CREATE INDEX idx_comments_task ON comments(task_id)`,
	}},
	{13, "review_comments", []string{
		`CREATE TABLE review_comments (
			id TEXT PRIMARY KEY,
			task_id TEXT NOT NULL REFERENCES tasks(id),
			thread_id TEXT NOT NULL,
			file TEXT NOT NULL,
			line INTEGER NOT NULL,
			side TEXT NOT NULL,
			line_text TEXT NOT NULL DEFAULT '',
			intent TEXT NOT NULL,
			body TEXT NOT NULL,
			actor TEXT NOT NULL,
			ask_state TEXT NOT NULL DEFAULT '',
			ask_error TEXT NOT NULL DEFAULT '',
			delivery_state TEXT NOT NULL DEFAULT '',
			delivered_turn INTEGER NOT NULL DEFAULT 0,
			created_at DATETIME NOT NULL
		)`,
		`CREATE INDEX idx_review_comments_task ON review_comments(task_id, created_at)`,
		`CREATE INDEX idx_review_comments_thread ON review_comments(thread_id)`,
	}},
	{14, "approvals of protected paths", []string{
		`CREATE TABLE approvals (
			task_id TEXT NOT NULL REFERENCES tasks(id),
			path TEXT NOT NULL,
			approved_at DATETIME NOT NULL,
			PRIMARY KEY (task_id, path)
		)`,
	}},
	{15, "review_comments.withdrawn_at", []string{
		`ALTER TABLE review_comments ADD COLUMN withdrawn_at DATETIME`,
	}},
	{16, "approvals.kind: protected-path approvals and out-of-scope allowances", []string{
		`CREATE TABLE approvals_v16 (
			task_id TEXT NOT NULL REFERENCES tasks(id),
			path TEXT NOT NULL,
			kind TEXT NOT NULL DEFAULT 'protected',
			approved_at DATETIME NOT NULL,
			PRIMARY KEY (task_id, path, kind)
		)`,
		`INSERT INTO approvals_v16(task_id, path, kind, approved_at) SELECT task_id, path, 'protected', approved_at FROM approvals`,
		`DROP TABLE approvals`,
		`ALTER TABLE approvals_v16 RENAME TO approvals`,
	}},
	{17, "tasks.tripwire", []string{
		`ALTER TABLE tasks ADD COLUMN tripwire TEXT NOT NULL DEFAULT ''`,
	}},
	{18, "usage: usage_calls and tasks.budget_tokens", []string{
		`ALTER TABLE tasks ADD COLUMN budget_tokens INTEGER NOT NULL DEFAULT 0`,
		`CREATE TABLE usage_calls (
			id TEXT PRIMARY KEY,
			task_id TEXT NOT NULL REFERENCES tasks(id),
			turn INTEGER NOT NULL DEFAULT 0,
			role TEXT NOT NULL DEFAULT '',
			status INTEGER NOT NULL DEFAULT 0,
			refused TEXT NOT NULL DEFAULT '',
			input_tokens INTEGER NOT NULL DEFAULT 0,
			output_tokens INTEGER NOT NULL DEFAULT 0,
			cache_read_input_tokens INTEGER NOT NULL DEFAULT 0,
			cache_creation_input_tokens INTEGER NOT NULL DEFAULT 0,
			at DATETIME NOT NULL
		)`,
		`CREATE INDEX idx_usage_calls_task_id ON usage_calls(task_id)`,
	}},
	{19, "review_comments.start_line: comments on a range of lines", []string{
		`ALTER TABLE review_comments ADD COLUMN start_line INTEGER NOT NULL DEFAULT 0`,
	}},
	{20, "cluster_secrets: what signs the calls between the members of a cluster", []string{
		`CREATE TABLE cluster_secrets (
			name TEXT PRIMARY KEY,
			secret TEXT NOT NULL,
			created_at DATETIME NOT NULL
		)`,
	}},
	{21, "agent_homes: a task's agent home (its sessions), for the member it moves to", []string{
		`CREATE TABLE agent_homes (
			task_id TEXT PRIMARY KEY REFERENCES tasks(id),
			archive BLOB NOT NULL,
			updated_at DATETIME NOT NULL
		)`,
	}},
	{22, "tasks.end_base, tasks.end_head: what an ended task's diff runs between", []string{
		`ALTER TABLE tasks ADD COLUMN end_base TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE tasks ADD COLUMN end_head TEXT NOT NULL DEFAULT ''`,
	}},
	{23, "approvals.blob: an approval pins the content it approved", []string{
		`ALTER TABLE approvals ADD COLUMN blob TEXT NOT NULL DEFAULT ''`,
	}},
	{24, "passphrase_tries: wrong approval passphrases, per project, for every member and the next start", []string{
		`CREATE TABLE passphrase_tries (
			name TEXT PRIMARY KEY,
			wrong INTEGER NOT NULL DEFAULT 0,
			wait_until DATETIME NOT NULL,
			updated_at DATETIME NOT NULL
		)`,
	}},
	{25, "egress_calls: each task's connections through the proxy to the network", []string{
		`CREATE TABLE egress_calls (
			id TEXT PRIMARY KEY,
			task_id TEXT NOT NULL REFERENCES tasks(id),
			turn INTEGER NOT NULL DEFAULT 0,
			method TEXT NOT NULL DEFAULT '',
			dest TEXT NOT NULL DEFAULT '',
			path TEXT NOT NULL DEFAULT '',
			status INTEGER NOT NULL DEFAULT 0,
			refused TEXT NOT NULL DEFAULT '',
			bytes_up INTEGER NOT NULL DEFAULT 0,
			bytes_down INTEGER NOT NULL DEFAULT 0,
			millis INTEGER NOT NULL DEFAULT 0,
			at DATETIME NOT NULL
		)`,
		`CREATE INDEX idx_egress_calls_task_id ON egress_calls(task_id)`,
	}},
	{26, "usage_calls.charged_tokens: a call cut before its reply ended counts what was held for it", []string{
		`ALTER TABLE usage_calls ADD COLUMN charged_tokens INTEGER NOT NULL DEFAULT 0`,
	}},
	{27, "the agent of a task's session (tasks.driver, agent_command), turns by kind (turns.seq, tasks.asks, setups), delivered_turn as a work turn number", []string{
		`ALTER TABLE tasks ADD COLUMN driver TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE tasks ADD COLUMN agent_command TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE tasks ADD COLUMN asks INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE tasks ADD COLUMN setups INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE turns ADD COLUMN seq INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE turns ADD COLUMN driver TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE turns ADD COLUMN notice TEXT NOT NULL DEFAULT ''`,
		`UPDATE turns SET seq = (SELECT COUNT(*) FROM turns t2 WHERE t2.task_id = turns.task_id AND t2.kind = turns.kind AND t2.number <= turns.number)`,
		`UPDATE tasks SET
			asks = (SELECT COUNT(*) FROM turns WHERE turns.task_id = tasks.id AND turns.kind = 'ask'),
			setups = (SELECT COUNT(*) FROM turns WHERE turns.task_id = tasks.id AND turns.kind = 'setup')`,
		`UPDATE review_comments SET delivered_turn = COALESCE((SELECT turns.seq FROM turns
			WHERE turns.task_id = review_comments.task_id AND turns.number = review_comments.delivered_turn), delivered_turn)
			WHERE delivered_turn > 0`,
	}},
	{29, "turn_transcripts: what the model said in each turn, as the proxy read it", []string{
		`CREATE TABLE turn_transcripts (
			task_id TEXT NOT NULL REFERENCES tasks(id),
			turn INTEGER NOT NULL,
			body TEXT NOT NULL DEFAULT '',
			at DATETIME NOT NULL,
			PRIMARY KEY (task_id, turn)
		)`,
	}},
	{31, "tasks.agent: the driver a task was created with (lazy task new --driver)", []string{
		`ALTER TABLE tasks ADD COLUMN agent TEXT NOT NULL DEFAULT ''`,
	}},
	{32, "usage_calls.requests: a row counts the calls of one task, turn, role, status and refusal of a batch", []string{
		`ALTER TABLE usage_calls ADD COLUMN requests INTEGER NOT NULL DEFAULT 1`,
	}},
	{33, "review state on the server: files viewed per reviewer and diff content, threads resolved, the head last reviewed", []string{
		`CREATE TABLE review_viewed (
			reviewer TEXT NOT NULL,
			task_id TEXT NOT NULL REFERENCES tasks(id),
			path TEXT NOT NULL,
			diff_hash TEXT NOT NULL,
			at DATETIME NOT NULL,
			PRIMARY KEY (reviewer, task_id, path, diff_hash)
		)`,
		`CREATE TABLE review_resolved (
			task_id TEXT NOT NULL REFERENCES tasks(id),
			thread_id TEXT NOT NULL,
			reviewer TEXT NOT NULL,
			messages INTEGER NOT NULL DEFAULT 0,
			at DATETIME NOT NULL,
			PRIMARY KEY (task_id, thread_id)
		)`,
		`CREATE TABLE review_heads (
			reviewer TEXT NOT NULL,
			task_id TEXT NOT NULL REFERENCES tasks(id),
			head TEXT NOT NULL,
			prev TEXT NOT NULL DEFAULT '',
			at DATETIME NOT NULL,
			PRIMARY KEY (reviewer, task_id)
		)`,
	}},
	{34, "task_leases: the member hosting each task in a cluster, with the epoch its writes are fenced by", []string{
		`CREATE TABLE task_leases (
			task_id TEXT PRIMARY KEY,
			holder TEXT NOT NULL,
			epoch INTEGER NOT NULL,
			expires_at DATETIME NOT NULL,
			acquired_at DATETIME NOT NULL
		)`,
	}},
	{35, "tasks.push_*: a push of the task branch the host retries until it lands; usage_calls.writer: the daemon that counted the calls", []string{
		`ALTER TABLE usage_calls ADD COLUMN writer TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE tasks ADD COLUMN push_since DATETIME`,
		`ALTER TABLE tasks ADD COLUMN push_head TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE tasks ADD COLUMN push_error TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE tasks ADD COLUMN push_next DATETIME`,
		`ALTER TABLE tasks ADD COLUMN push_tries INTEGER NOT NULL DEFAULT 0`,
	}},
}

// SchemaVersion is the newest schema this binary knows.
func SchemaVersion() int { return migrations[len(migrations)-1].version }

// TooNewError refuses a store written by a newer lazy.
type TooNewError struct{ Have, Know int }

func (e *TooNewError) Error() string {
	return fmt.Sprintf("store schema is version %d but this lazy knows up to %d: upgrade lazy (a newer lazy wrote this store; it is left untouched)", e.Have, e.Know)
}

// migrate brings db to SchemaVersion, one transaction per step, recording
// each step in schema_migrations. upTo limits it (0 = all), for tests that
// build an older store.
// dialect (nil: none) rewrites each statement for the database at hand.
func migrate(db *gorm.DB, upTo int, dialect func(string) string) error {
	if dialect == nil {
		dialect = func(s string) string { return s }
	}
	if err := db.Exec(dialect(`CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY,
		name TEXT NOT NULL,
		applied_at DATETIME NOT NULL
	)`)).Error; err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var have int
	if err := db.Raw(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&have).Error; err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if have > SchemaVersion() {
		return &TooNewError{Have: have, Know: SchemaVersion()}
	}
	for _, m := range migrations {
		if m.version <= have || (upTo > 0 && m.version > upTo) {
			continue
		}
		err := db.Transaction(func(tx *gorm.DB) error {
			for _, s := range m.stmts {
				if err := tx.Exec(dialect(s)).Error; err != nil {
					return err
				}
			}
			return tx.Exec(`INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, time.Now().UTC()).Error
		})
		if err != nil {
			return fmt.Errorf("migrate to version %d (%s): %w", m.version, m.name, err)
		}
	}
	return nil
}
