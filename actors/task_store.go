package actors

// A store that does not answer (PostgreSQL stopped, a network cut). A job
// that ends then has its end held in the actor — the turn's record, an
// ask's answer, the task's status — until the store answers again; the
// job stays the running one meanwhile (nothing else starts, an accept is
// refused as busy, other members see it running), and its health says
// what it waits for. A job waiting to start waits the same way, so an ask
// or an unblock queued in the store is neither dropped nor failed for the
// outage. Should the member die meanwhile, the store still says the turn
// runs and the ask is pending: the next host records the turn cut off (a
// work turn fails the task, saying to unblock it) and asks again.

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"lazy/store"
)

// storeProbe bounds the look that tells whether the store answers.
const storeProbe = 3 * time.Second

// storeWait is what waits for the store.
type storeWait struct {
	// ended: the running job's result, held until the store answers
	ended   *jobResult
	lastErr string
	tries   int
	gen     int
}

// storeRetry asks the actor to look at the store again (gen: only the
// latest counts).
type storeRetry struct{ gen int }

// storeUp reads the task's row, bounded: false when the store does not
// answer (the outage is logged once per wait).
func (a *TaskActor) storeUp() bool {
	ctx, cancel := context.WithTimeout(a.bg(), storeProbe)
	defer cancel()
	_, err := a.deps.Store.GetTask(ctx, a.id)
	if err == nil || errors.Is(err, store.ErrNotFound) {
		if a.outage.tries > 0 {
			a.log.Info("the store answers again", "waited_tries", a.outage.tries)
		}
		a.outage.tries, a.outage.lastErr = 0, ""
		return true
	}
	if a.outage.tries == 0 {
		a.log.Error("the store does not answer: the task's jobs wait for it", "err", err)
	}
	a.outage.lastErr = err.Error()
	return false
}

// holdEnd keeps the running job's result until the store answers.
func (a *TaskActor) holdEnd(ctx actor.Context, r jobResult) {
	a.outage.ended = &r
	a.waitStore(ctx)
}

// waitStore schedules the next look at the store, backing off from 1 s to
// 10 s.
func (a *TaskActor) waitStore(ctx actor.Context) {
	a.outage.tries++
	a.outage.gen++
	wait := min(time.Second<<min(a.outage.tries-1, 4), 10*time.Second)
	self, root, gen := ctx.Self(), ctx.ActorSystem().Root, a.outage.gen
	time.AfterFunc(wait, func() { root.Send(self, &storeRetry{gen: gen}) })
}

// onStoreRetry: the store answering, the held end is recorded and the
// next job starts; else another look later.
func (a *TaskActor) onStoreRetry(ctx actor.Context, m *storeRetry) {
	if m.gen != a.outage.gen {
		return
	}
	if !a.storeUp() {
		a.waitStore(ctx)
		return
	}
	if r := a.outage.ended; r != nil && a.running != nil {
		a.outage.ended = nil
		a.completeJob(ctx, *r)
		return
	}
	a.next(ctx)
}
