package store

// Task leases: in a cluster, the member hosting a task holds a lease row on
// it in the shared store (task id, holder, epoch, expiry). Taking a lease
// that is free or expired raises its epoch; the holder renews it before it
// expires; every write of the task's state through a fenced view (Fenced)
// checks, in the write's own transaction, that the lease still has the
// view's holder and epoch, and is refused (LeaseError) once another member
// has taken it. Times are the database's (PostgreSQL's now()), so the
// members' clocks do not decide when a lease ran out.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"lazy/errkind"
)

// Lease is a member's hold on one task.
type Lease struct {
	TaskID  string
	Holder  string
	Epoch   int64
	Expires time.Time // by the database's clock
}

// LeaseError refuses a lease operation or a fenced write: Held, the task's
// lease is another member's until Until; else the lease the caller had was
// taken (or released) since, and its write or renewal is stale.
type LeaseError struct {
	TaskID string
	Holder string // the lease's holder now ("": none)
	Epoch  int64  // the lease's epoch now
	Until  time.Time
	Held   bool
	Mine   int64 // the caller's epoch (stale errors)
}

func (e *LeaseError) Error() string {
	if e.Held {
		return fmt.Sprintf("task %s is hosted by cluster member %s (lease epoch %d) until %s; wait for its lease to run out",
			e.TaskID, e.Holder, e.Epoch, e.Until.UTC().Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("task %s: this member's lease (epoch %d) is stale: the task is now member %q's (epoch %d); the write was refused and this member stops the task's jobs",
		e.TaskID, e.Mine, e.Holder, e.Epoch)
}

// ErrorKind: a lease held elsewhere is busy; a stale one a conflict.
func (e *LeaseError) ErrorKind() errkind.Kind {
	if e.Held {
		return errkind.Busy
	}
	return errkind.Conflict
}

// IsStaleLease reports whether err is a write or renewal refused because
// the lease it was made under was taken since.
func IsStaleLease(err error) bool {
	var le *LeaseError
	return errors.As(err, &le) && !le.Held
}

// Leases are the task leases of a shared store (SQL implements it).
type Leases interface {
	// AcquireLease takes the task's lease for holder for ttl when it is
	// free or expired (its epoch one more than the last), or refuses with a
	// LeaseError (Held) naming the holder and when its lease runs out.
	AcquireLease(ctx context.Context, taskID, holder string, ttl time.Duration) (Lease, error)
	// RenewLease extends l by ttl from now, only while it is l's holder's
	// with l's epoch and not expired; else a stale LeaseError.
	RenewLease(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)
	// ReleaseLease ends l now (the next member need not wait for it to
	// run out); a lease taken since is left alone.
	ReleaseLease(ctx context.Context, l Lease) error
	// GetLease is the task's lease (ErrNotFound: never taken).
	GetLease(ctx context.Context, taskID string) (Lease, error)
	// Fenced is a view of the store whose every write runs only while l
	// is still the task's lease (same holder and epoch), checked in the
	// write's own transaction; a stale write is refused with a LeaseError.
	// Reads are the store's. Closing the view closes nothing.
	Fenced(l Lease) Store
}

var _ Leases = (*SQL)(nil)

type leaseRow struct {
	TaskID     string
	Holder     string
	Epoch      int64
	ExpiresAt  time.Time
	AcquiredAt time.Time
}

func (r leaseRow) lease() Lease {
	return Lease{TaskID: r.TaskID, Holder: r.Holder, Epoch: r.Epoch, Expires: r.ExpiresAt.UTC()}
}

// pg: the store is PostgreSQL (SQLite has its checkpointer).
func (s *SQL) pg() bool { return s.ck == nil }

// dbNow is the database's time: PostgreSQL's transaction time, the
// process's own for SQLite (one machine).
func (s *SQL) dbNow(tx *gorm.DB) (time.Time, error) {
	if !s.pg() {
		return time.Now().UTC(), nil
	}
	var now time.Time
	if err := tx.Raw(`SELECT now()`).Scan(&now).Error; err != nil {
		return time.Time{}, err
	}
	return now.UTC(), nil
}

func getLease(tx *gorm.DB, taskID, lock string) (leaseRow, bool, error) {
	var r leaseRow
	res := tx.Raw(`SELECT task_id, holder, epoch, expires_at, acquired_at FROM task_leases WHERE task_id = ?`+lock, taskID).Scan(&r)
	return r, res.RowsAffected > 0, res.Error
}

// AcquireLease takes the task's lease when it is free or expired.
func (s *SQL) AcquireLease(ctx context.Context, taskID, holder string, ttl time.Duration) (Lease, error) {
	var got Lease
	err := s.w.do(ctx, func(tx *gorm.DB) error {
		now, err := s.dbNow(tx)
		if err != nil {
			return err
		}
		res := tx.Exec(`INSERT INTO task_leases(task_id, holder, epoch, expires_at, acquired_at) VALUES (?, ?, 1, ?, ?)
			ON CONFLICT (task_id) DO UPDATE SET holder = excluded.holder, epoch = task_leases.epoch + 1,
				expires_at = excluded.expires_at, acquired_at = excluded.acquired_at
			WHERE task_leases.expires_at <= ?`, taskID, holder, now.Add(ttl), now, now)
		if res.Error != nil {
			return res.Error
		}
		r, _, err := getLease(tx, taskID, "")
		if err != nil {
			return err
		}
		if res.RowsAffected == 0 {
			return &LeaseError{TaskID: taskID, Holder: r.Holder, Epoch: r.Epoch, Until: r.ExpiresAt.UTC(), Held: true}
		}
		got = r.lease()
		return nil
	})
	return got, mapLeaseErr("take the lease of task "+taskID, err)
}

// RenewLease extends l while it is still its holder's and not expired.
func (s *SQL) RenewLease(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	got := l
	err := s.w.do(ctx, func(tx *gorm.DB) error {
		now, err := s.dbNow(tx)
		if err != nil {
			return err
		}
		res := tx.Exec(`UPDATE task_leases SET expires_at = ? WHERE task_id = ? AND holder = ? AND epoch = ? AND expires_at > ?`,
			now.Add(ttl), l.TaskID, l.Holder, l.Epoch, now)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			r, _, err := getLease(tx, l.TaskID, "")
			if err != nil {
				return err
			}
			return &LeaseError{TaskID: l.TaskID, Holder: r.Holder, Epoch: r.Epoch, Until: r.ExpiresAt.UTC(), Mine: l.Epoch}
		}
		got.Expires = now.Add(ttl)
		return nil
	})
	return got, mapLeaseErr("renew the lease of task "+l.TaskID, err)
}

// ReleaseLease ends l now, when it is still l.
func (s *SQL) ReleaseLease(ctx context.Context, l Lease) error {
	return mapLeaseErr("release the lease of task "+l.TaskID, s.w.do(ctx, func(tx *gorm.DB) error {
		now, err := s.dbNow(tx)
		if err != nil {
			return err
		}
		return tx.Exec(`UPDATE task_leases SET expires_at = ? WHERE task_id = ? AND holder = ? AND epoch = ? AND expires_at > ?`,
			now, l.TaskID, l.Holder, l.Epoch, now).Error
	}))
}

// GetLease reads the task's lease.
func (s *SQL) GetLease(ctx context.Context, taskID string) (Lease, error) {
	var r leaseRow
	var found bool
	err := s.read(ctx, func(db *gorm.DB) error {
		var err error
		r, found, err = getLease(db, taskID, "")
		return err
	})
	if err == nil && !found {
		err = gorm.ErrRecordNotFound
	}
	return r.lease(), mapErr("get the lease of task "+taskID, err)
}

// mapLeaseErr keeps a LeaseError as it is and maps the rest.
func mapLeaseErr(op string, err error) error {
	var le *LeaseError
	if errors.As(err, &le) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return mapErr(op, err)
}

// Fenced is a view of s whose writes are fenced by l.
func (s *SQL) Fenced(l Lease) Store {
	v := *s
	v.w = fencedWriter{inner: s.w, l: l, pg: s.pg()}
	return &fencedSQL{SQL: &v}
}

// fencedSQL is a fenced view: the store's methods, its writes checked.
type fencedSQL struct{ *SQL }

// Close closes nothing: the store is its owner's.
func (*fencedSQL) Close() error { return nil }

// fencedWriter checks the lease before each write, in its transaction.
// On PostgreSQL the lease row is read FOR SHARE: a member taking the lease
// meanwhile waits for this write to commit, so no write lands after a
// takeover; SQLite has one writer, which orders them.
type fencedWriter struct {
	inner writeRunner
	l     Lease
	pg    bool
}

func (f fencedWriter) do(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return f.inner.do(ctx, func(tx *gorm.DB) error {
		lock := ""
		if f.pg {
			lock = " FOR SHARE"
		}
		r, found, err := getLease(tx, f.l.TaskID, lock)
		if err != nil {
			return err
		}
		if !found || r.Holder != f.l.Holder || r.Epoch != f.l.Epoch {
			return &LeaseError{TaskID: f.l.TaskID, Holder: r.Holder, Epoch: r.Epoch, Until: r.ExpiresAt.UTC(), Mine: f.l.Epoch}
		}
		return fn(tx)
	})
}

func (f fencedWriter) close() {}
