package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"
)

// maxBatch bounds how many writes share one commit.
const maxBatch = 128

// ErrClosed is a write to a store that has been closed.
var ErrClosed = errors.New("store is closed")

// writeRunner runs each write in a transaction and says when it is durable.
type writeRunner interface {
	do(ctx context.Context, fn func(tx *gorm.DB) error) error
	close()
}

// writeOp is one write waiting for the writer: fn runs inside the batch's
// transaction and its error (or the commit's) comes back on done.
type writeOp struct {
	ctx  context.Context
	fn   func(tx *gorm.DB) error
	done chan error
}

// writer is the group commit of the SQL store. SQLite has one writer; rather
// than let every caller wait for the one connection (database/sql hands a
// freed connection to a random waiter, which makes a long tail under load),
// writes queue here in arrival order and the writer runs whatever has queued
// in one transaction, each write in its own savepoint, with one commit (one
// fsync) for the lot. A write that fails is rolled back to its savepoint
// alone; the others still commit. A caller's reply comes after the commit, so
// what it was told is durable is durable.
//
// Checkpoints (copying the WAL into the database file) run on their own
// connection in PASSIVE mode, which never blocks the writer: after every
// checkpointEvery commits, and every checkpointInterval (a no-op when the
// WAL holds nothing new).
type writer struct {
	db   *gorm.DB
	ops  chan *writeOp
	quit chan struct{}
	done chan struct{}
	once sync.Once

	ck      *gorm.DB
	commits int           // since the last checkpoint request; writer goroutine only
	kick    chan struct{} // asks the checkpointer for a checkpoint
	ckDone  chan struct{}
}

const (
	checkpointEvery    = 500
	checkpointInterval = 2 * time.Second
)

func newWriter(db, ck *gorm.DB) *writer {
	w := &writer{db: db, ops: make(chan *writeOp, maxBatch), quit: make(chan struct{}), done: make(chan struct{}),
		ck: ck, kick: make(chan struct{}, 1), ckDone: make(chan struct{})}
	go w.loop()
	go w.checkpointer()
	return w
}

// committed counts a commit and asks for a checkpoint every checkpointEvery.
func (w *writer) committed() {
	w.commits++
	if w.commits >= checkpointEvery {
		w.commits = 0
		select {
		case w.kick <- struct{}{}:
		default: // one is pending already
		}
	}
}

func (w *writer) checkpointer() {
	defer close(w.ckDone)
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-w.kick:
		case <-t.C:
		}
		// PASSIVE copies what no reader still needs and returns; an error
		// (a busy database) only means the next one does more.
		w.ck.Exec("PRAGMA wal_checkpoint(PASSIVE)")
	}
}

// do queues fn and waits for its commit. A ctx that ends while the write is
// still queued skips it; once the write is running, do waits for the outcome,
// so the caller never returns while its write may still land.
func (w *writer) do(ctx context.Context, fn func(tx *gorm.DB) error) error {
	op := &writeOp{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case w.ops <- op:
	case <-ctx.Done():
		return ctx.Err()
	case <-w.quit:
		return ErrClosed
	}
	select {
	case err := <-op.done:
		return err
	case <-w.done: // the writer stopped: it answered op, or never took it
		select {
		case err := <-op.done:
			return err
		default:
			return ErrClosed
		}
	}
}

// close answers what is queued with ErrClosed and stops the writer; a write
// already running finishes first. Closing twice is harmless.
func (w *writer) close() {
	w.once.Do(func() { close(w.quit) })
	<-w.done
	<-w.ckDone
}

func (w *writer) loop() {
	defer close(w.done)
	batch := make([]*writeOp, 0, maxBatch)
	for {
		select {
		case op := <-w.ops:
			batch = append(batch[:0], op)
		case <-w.quit:
			for {
				select {
				case op := <-w.ops:
					op.done <- ErrClosed
				default:
					return
				}
			}
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case op := <-w.ops:
				batch = append(batch, op)
			default:
				break fill
			}
		}
		w.run(batch)
		w.committed()
	}
}

// run commits one batch and answers every write in it.
func (w *writer) run(batch []*writeOp) {
	live := batch[:0]
	for _, op := range batch {
		if err := op.ctx.Err(); err != nil {
			op.done <- err
			continue
		}
		live = append(live, op)
	}
	if len(live) == 0 {
		return
	}
	if len(live) == 1 { // nothing to share the commit with: no savepoint
		op := live[0]
		op.done <- call(func(db *gorm.DB) error { return db.Transaction(op.fn) }, w.db.WithContext(context.WithoutCancel(op.ctx)))
		return
	}
	tx := w.db.Begin()
	if tx.Error != nil {
		for _, op := range live {
			op.done <- fmt.Errorf("begin: %w", tx.Error)
		}
		return
	}
	errs := make([]error, len(live))
	for i, op := range live {
		sp := fmt.Sprintf("w%d", i)
		if err := tx.SavePoint(sp).Error; err != nil {
			errs[i] = fmt.Errorf("savepoint: %w", err)
			continue
		}
		if err := call(op.fn, tx.WithContext(context.WithoutCancel(op.ctx))); err != nil {
			if rb := tx.RollbackTo(sp).Error; rb != nil {
				err = errors.Join(err, fmt.Errorf("roll back: %w", rb))
			}
			errs[i] = err
		}
		tx.Exec("RELEASE SAVEPOINT " + sp)
	}
	cerr := tx.Commit().Error
	if cerr != nil {
		tx.Rollback()
	}
	for i, op := range live {
		if errs[i] == nil && cerr != nil {
			errs[i] = fmt.Errorf("commit: %w", cerr)
		}
		op.done <- errs[i]
	}
}

// call runs fn, turning a panic into an error so one bad write cannot stop
// the writer.
func call(fn func(tx *gorm.DB) error, tx *gorm.DB) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("write panicked: %v", r)
		}
	}()
	return fn(tx)
}
