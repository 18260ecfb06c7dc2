package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// pgConns bounds the daemon's connections to PostgreSQL (several daemons
// share one server: max_connections is 100 by default).
const pgConns = 8

// OpenPostgres opens the PostgreSQL database at dsn (a postgres:// URL or
// key=value string) and migrates it with the same versioned steps as SQLite.
// Several daemons may open one database: migrations run under an advisory
// lock, and every write is its own transaction on the server, which orders
// and makes it durable (the SQLite group commit has no part here).
func OpenPostgres(dsn string, opts ...Option) (*SQL, error) {
	o := options(opts)
	conn := dsn
	if !o.sync {
		// synchronous_commit off is PostgreSQL's counterpart of sync =
		// "normal": a crash of the server may lose the last commits, never
		// corrupt; pgx sends it as a run-time parameter of every connection
		conn = withParam(dsn, "synchronous_commit", "off")
	}
	db, err := gorm.Open(postgres.New(postgres.Config{DSN: conn}), &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	})
	if err != nil {
		return nil, fmt.Errorf("open PostgreSQL %s: %w (check storage.dsn and that the server runs)", RedactDSN(dsn), err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(pgConns)
	sqlDB.SetMaxIdleConns(pgConns)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("reach PostgreSQL at %s: %w (check storage.dsn and that the server runs)", RedactDSN(dsn), err)
	}
	err = db.WithContext(ctx).Connection(func(conn *gorm.DB) error {
		// one daemon migrates at a time; the others wait, then find it done
		if err := conn.Exec(`SELECT pg_advisory_lock(?)`, migrateLock).Error; err != nil {
			return fmt.Errorf("take the migration lock: %w", err)
		}
		defer conn.Exec(`SELECT pg_advisory_unlock(?)`, migrateLock)
		return migrate(conn, o.upTo, postgresDialect)
	})
	if err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("store %s: %w", RedactDSN(dsn), err)
	}
	return &SQL{db: db, w: txWriter{db}, rd: db, gate: make(chan struct{}, pgConns)}, nil
}

// migrateLock is the advisory lock key of lazy's migrations.
const migrateLock = 0x6c617a79 // "lazy"

// txWriter runs each write in its own transaction: PostgreSQL serialises
// and syncs commits itself.
type txWriter struct{ db *gorm.DB }

func (t txWriter) do(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return t.db.WithContext(ctx).Transaction(fn)
}

func (txWriter) close() {}

// postgresDialect rewrites the SQLite column types of the migrations:
// timestamps with their zone, and 64-bit integers (SQLite's INTEGER is
// 64-bit already; token counts and budgets need it).
func postgresDialect(stmt string) string {
	return strings.NewReplacer("DATETIME", "TIMESTAMPTZ", "INTEGER", "BIGINT", "BLOB", "BYTEA").Replace(stmt)
}

// isUniqueViolation reports PostgreSQL's unique_violation.
func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// withParam adds key=value to a DSN in either form.
func withParam(dsn, key, value string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " " + key + "=" + value
}

// RedactDSN hides the password of a PostgreSQL DSN, for messages and logs.
func RedactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		return u.Redacted()
	}
	// key=value form: drop the value of password=
	fields := strings.Fields(dsn)
	for i, f := range fields {
		if k, _, ok := strings.Cut(f, "="); ok && strings.EqualFold(k, "password") {
			fields[i] = k + "=xxxxx"
		}
	}
	return strings.Join(fields, " ")
}

// ClusterSecret returns the secret that signs calls between the members of
// cluster name, making it on first use: the first member to ask writes a
// random one, and every member reads that one.
func (s *SQL) ClusterSecret(ctx context.Context, name string) ([]byte, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	err := s.w.do(ctx, func(tx *gorm.DB) error {
		return tx.Exec(`INSERT INTO cluster_secrets(name, secret, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`,
			name, hex.EncodeToString(b[:]), time.Now().UTC()).Error
	})
	if err != nil {
		return nil, mapErr("make the cluster secret", err)
	}
	var secret string
	if err := s.read(ctx, func(db *gorm.DB) error {
		return db.Raw(`SELECT secret FROM cluster_secrets WHERE name = ?`, name).Scan(&secret).Error
	}); err != nil || secret == "" {
		return nil, mapErr("read the cluster secret", errors.Join(err, errors.New("no secret stored")))
	}
	return hex.DecodeString(secret)
}

// Ping checks that the database answers.
func (s *SQL) Ping(ctx context.Context) error {
	db, err := s.db.DB()
	if err != nil {
		return err
	}
	return db.PingContext(ctx)
}

// SaveAgentHome keeps the archive of a task's agent home (replacing the
// one before), for the member the task moves to next.
func (s *SQL) SaveAgentHome(ctx context.Context, taskID string, archive []byte, at time.Time) error {
	return mapErr("save the agent home of "+taskID, s.w.do(ctx, func(tx *gorm.DB) error {
		return tx.Exec(`INSERT INTO agent_homes(task_id, archive, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (task_id) DO UPDATE SET archive = excluded.archive, updated_at = excluded.updated_at`, taskID, archive, at.UTC()).Error
	}))
}

// AgentHome is the last archive of a task's agent home (ErrNotFound when
// none was kept).
func (s *SQL) AgentHome(ctx context.Context, taskID string) ([]byte, time.Time, error) {
	var row struct {
		Archive   []byte
		UpdatedAt time.Time
	}
	err := s.read(ctx, func(db *gorm.DB) error {
		return db.Raw(`SELECT archive, updated_at FROM agent_homes WHERE task_id = ?`, taskID).Scan(&row).Error
	})
	if err != nil {
		return nil, time.Time{}, mapErr("read the agent home of "+taskID, err)
	}
	if row.Archive == nil {
		return nil, time.Time{}, fmt.Errorf("agent home of %s: %w", taskID, ErrNotFound)
	}
	return row.Archive, row.UpdatedAt, nil
}
