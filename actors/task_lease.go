package actors

// A task's lease in a cluster (fenced ownership, as Kubernetes leader
// election and Temporal do it). The actor hosting a task holds the task's
// lease row in the shared store: it takes it when it starts (waiting, while
// another member holds it, until that lease is released or runs out), renews
// it every TTL/4, and writes the task's state only through a view of the
// store fenced by the lease's epoch, so a write made under a lease another
// member has taken since is refused, never applied. A member that has not
// renewed for 7/10 of the TTL (a store outage, a pause) stops the task's
// jobs and their agent processes, and sends no more of their work to the
// remote, while its lease still runs: the next host starts its jobs only
// after it took the lease, that is after the old one ran out. Outside a
// cluster (TaskDeps.Leases nil) there is no lease and nothing here runs.
//
// Timing (DefaultLeaseTTL 10 s): renewals every 2.5 s (a failed one tried
// again every 0.5 s); a job starts only with 3.5 s of the 7 s below left
// (after a store outage, once the lease is renewed); no renewal for 7 s
// stops the jobs; another member takes the lease 10 s after the last
// renewal (by the database's clock). The member's etcd lease is 6 s, so a
// member that stops answering leaves the cluster before its task leases run
// out, and its tasks are placed anew meanwhile: their new actors wait at
// most the rest of the 10 s.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"lazy/store"
)

// DefaultLeaseTTL is how long a task's lease lasts unrenewed.
const DefaultLeaseTTL = 10 * time.Second

// leasing is the actor's hold on its task's lease.
type leasing struct {
	on bool // leases are in force (a cluster)
	// st is the store fenced by the lease, set once when it is taken:
	// every write of the task goes through it from then on
	st    store.Store
	held  store.Lease
	since time.Time // waiting for the lease since
	// jobs is the parent context of every job; the lease's keeper cancels
	// it when the lease is lost, which stops the agent process
	jobs context.Context
	// until is when the jobs stop unless the lease is renewed (Unix
	// nanoseconds; 0: stopped); a job checks it before it sends work to the
	// remote, so a member resuming from a pause sends nothing
	until *atomic.Int64
	quit  chan struct{} // ends the keeper, which then releases the lease
	done  chan struct{} // closed when the keeper has ended
	lost  bool
}

// leaseTaken: the keeper took the task's lease.
type leaseTaken struct {
	lease store.Lease
	jobs  context.Context
	until *atomic.Int64
}

// leaseLost: the lease ran out unrenewed or another member took it; the
// keeper stopped the jobs already.
type leaseLost struct{ err error }

// store is where the actor reads and writes its task: the fenced view once
// it holds the lease, the daemon's store until then (or with no leases).
func (a *TaskActor) store() store.Store {
	if a.lease.st != nil {
		return a.lease.st
	}
	return a.deps.Store
}

// leasePending: leases are in force and this actor holds none yet (or lost
// it): no job may start.
func (a *TaskActor) leasePending() bool { return a.lease.on && (a.lease.st == nil || a.lease.lost) }

// jobParent is the context every job derives from.
func (a *TaskActor) jobParent() context.Context {
	if a.lease.jobs != nil {
		return a.lease.jobs
	}
	return context.Background()
}

// leaseRecent: outside leases, or the lease was renewed lately (at least
// half of the 7/10 of the TTL left before the jobs would stop). A job starts
// only then: after a store outage, not before the lease is renewed, so the
// job is not stopped by the renewals the outage missed.
func (a *TaskActor) leaseRecent() bool {
	if a.lease.until == nil {
		return true
	}
	keep := a.deps.leaseTTL() * 7 / 10
	return time.Until(time.Unix(0, a.lease.until.Load())) >= keep/2
}

// leaseFresh is nil outside leases, else what a job checks before it sends
// its work to the remote: an error once the lease may have run out.
func (a *TaskActor) leaseFresh() func() error {
	if a.lease.until == nil {
		return nil
	}
	until, id := a.lease.until, a.id
	return func() error {
		if time.Now().UnixNano() >= until.Load() {
			return fmt.Errorf("task %s: this member's lease was not renewed in time; another member may host the task now", id)
		}
		return nil
	}
}

// startLease, with leases in force, starts the keeper that takes the task's
// lease and then renews it; the actor runs no job until leaseTaken.
func (a *TaskActor) startLease(ctx actor.Context) bool {
	if a.deps.Leases == nil {
		return false
	}
	a.lease = leasing{on: true, since: a.now(), quit: make(chan struct{}), done: make(chan struct{})}
	k := &leaseKeeper{
		ls: a.deps.Leases, taskID: a.id, holder: a.deps.LeaseHolder, ttl: a.deps.leaseTTL(), log: a.log,
		self: ctx.Self(), root: ctx.ActorSystem().Root, quit: a.lease.quit, done: a.lease.done,
	}
	go k.run()
	return true
}

// onLeaseTaken: the lease is this actor's. What the store says is loaded
// again (the last host wrote it until its lease ran out), and the queue
// runs from here.
func (a *TaskActor) onLeaseTaken(ctx actor.Context, m *leaseTaken) {
	a.lease.held, a.lease.jobs, a.lease.until = m.lease, m.jobs, m.until
	a.lease.st, a.lease.lost = a.deps.Leases.Fenced(m.lease), false
	if waited := a.now().Sub(a.lease.since); waited > time.Second {
		a.log.Info("took the task's lease", "epoch", m.lease.Epoch, "waited", waited.Round(time.Millisecond))
	}
	kept := a.memoryJobs()
	a.reload(false)
	a.queue = append(a.queue, kept...)
	a.recheckHeld(ctx)
	a.next(ctx)
}

// onLeaseLost: the keeper stopped the jobs already; what they would still
// record is refused by the fence (or lost with the store). The actor keeps
// the stale view, so nothing of the task is written from here, and takes
// the lease again: once the store answers and the lease ran out (at once
// when nobody took it meanwhile), it reads the task anew, and a turn that
// was cut off is recorded so, here or by whichever member took the task.
func (a *TaskActor) onLeaseLost(ctx actor.Context, m *leaseLost) {
	if a.lease.lost {
		return
	}
	a.lease.lost = true
	a.log.Error("lost the task's lease: its jobs here are stopped, and the task is taken up again only once this member holds the lease anew",
		"epoch", a.lease.held.Epoch, "err", m.err)
	a.abort(ctx, "this cluster member lost the task's lease")
	stale := a.lease.st
	a.startLease(ctx)
	a.lease.st, a.lease.lost = stale, true
}

// endLease ends the keeper, which then releases the lease when it still
// holds it (so the task's next host need not wait for it to run out). It
// does not wait: the returned channel closes when the keeper has ended
// (closed at once with no keeper).
func (a *TaskActor) endLease() <-chan struct{} {
	if !a.lease.on || a.lease.quit == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	select {
	case <-a.lease.quit: // ended already
	default:
		close(a.lease.quit)
	}
	return a.lease.done
}

// released waits for done (endLease), bounded: a handover's wake goes
// once the lease is free, or after 5 s (the new host then waits for the
// lease to run out).
func released(done <-chan struct{}) {
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

// leaseTTL is the TTL in force.
func (d *TaskDeps) leaseTTL() time.Duration {
	if d.LeaseTTL > 0 {
		return d.LeaseTTL
	}
	return DefaultLeaseTTL
}

// leaseKeeper takes a task's lease, renews it, and stops the task's jobs
// when it cannot: it runs beside the actor, so a busy or stuck actor does
// not delay the stop.
type leaseKeeper struct {
	ls         store.Leases
	taskID     string
	holder     string
	ttl        time.Duration
	log        *slog.Logger
	self       *actor.PID
	root       *actor.RootContext
	quit, done chan struct{}
}

func (k *leaseKeeper) run() {
	defer close(k.done)
	l, sent, ok := k.take()
	if !ok {
		return
	}
	jobs, kill := context.WithCancel(context.Background())
	defer kill()
	until := &atomic.Int64{}
	until.Store(sent.Add(k.keep()).UnixNano())
	k.root.Send(k.self, &leaseTaken{lease: l, jobs: jobs, until: until})
	if err := k.renew(l, until); err != nil {
		// the jobs stop before the lease can run out elsewhere
		until.Store(0)
		kill()
		k.root.Send(k.self, &leaseLost{err: err})
		return
	}
	// the actor ended: the lease goes now
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := k.ls.ReleaseLease(ctx, l); err != nil {
		k.log.Warn("release the task's lease", "err", err)
	}
}

// keep is how long the jobs run on without a renewal: 7/10 of the TTL.
func (k *leaseKeeper) keep() time.Duration { return k.ttl * 7 / 10 }

// take takes the lease, waiting while another member holds it, and says
// when the successful request was sent; false: the actor ended first.
func (k *leaseKeeper) take() (store.Lease, time.Time, bool) {
	told, failed := "", ""
	for {
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), k.ttl)
		l, err := k.ls.AcquireLease(ctx, k.taskID, k.holder, k.ttl)
		cancel()
		if err == nil {
			select {
			case <-k.quit: // ended meanwhile: give it back at once
				rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = k.ls.ReleaseLease(rctx, l)
				rcancel()
				return l, sent, false
			default:
				return l, sent, true
			}
		}
		wait := time.Second
		var le *store.LeaseError
		if errors.As(err, &le) && le.Held {
			if le.Holder != told {
				told = le.Holder
				k.log.Info("waiting for the task's lease: another cluster member holds it until it is released or runs out",
					"holder", le.Holder, "epoch", le.Epoch, "until", le.Until)
			}
			wait = min(max(time.Until(le.Until)+20*time.Millisecond, 20*time.Millisecond), time.Second)
		} else if err.Error() != failed {
			failed = err.Error()
			k.log.Warn("take the task's lease (trying again every second)", "err", err)
		}
		select {
		case <-k.quit:
			return store.Lease{}, sent, false
		case <-time.After(wait):
		}
	}
}

// renew renews l every ttl/4 until quit (nil) or until it cannot: another
// member took it, or no renewal succeeded for 7/10 of the ttl, counted from
// when the last successful one was sent (the lease runs out ttl after the
// database took it, later still). A renewal that fails is tried again after
// ttl/20, not a whole period later: a store outage shorter than what is
// left of the 7/10 does not cost the lease.
func (k *leaseKeeper) renew(l store.Lease, until *atomic.Int64) error {
	period, keep := k.ttl/4, k.keep()
	deadline := time.Unix(0, until.Load())
	wait, failing := period, false
	for {
		next, over := time.NewTimer(wait), time.NewTimer(time.Until(deadline))
		select {
		case <-k.quit:
			next.Stop()
			over.Stop()
			return nil
		case <-over.C:
			next.Stop()
			return fmt.Errorf("the lease was not renewed for %s (store unreachable, or this process was paused)", keep)
		case <-next.C:
			over.Stop()
		}
		if time.Now().After(deadline) { // a pause: both fired, the renewal's won
			return fmt.Errorf("the lease was not renewed for %s (store unreachable, or this process was paused)", keep)
		}
		sent := time.Now()
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		nl, err := k.ls.RenewLease(ctx, l, k.ttl)
		cancel()
		switch {
		case err == nil:
			if failing {
				k.log.Info("renewed the task's lease again")
			}
			l, deadline, wait, failing = nl, sent.Add(keep), period, false
			until.Store(deadline.UnixNano())
		case store.IsStaleLease(err):
			return err
		default:
			if !failing {
				k.log.Warn("renew the task's lease (trying again)", "err", err, "stops_jobs_in", time.Until(deadline).Round(time.Millisecond))
			}
			wait, failing = max(k.ttl/20, time.Millisecond), true
		}
	}
}
