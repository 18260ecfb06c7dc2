package supervisor

import (
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// A request to a task actor that stops before it takes the request from its
// mailbox (a task that ended stops its actor: an ask sent as it ends) is
// dropped by protoactor without an answer, and its asker would wait out the
// whole timeout (30 s) to hear "did not answer". So a request to a task
// actor waits in a reply box of its own, registered under the actor until
// it is answered; when the supervisor learns the actor stopped (Terminated)
// it answers every box still waiting as a dead letter, and the asker asks
// a fresh actor, which loads the task from the store and answers (an ended
// task: ErrEnded). A box keeps the first answer it gets: an actor that
// answered and then stopped answered before its Terminated was sent, so
// its answer is the one kept.

// replyBox is a process that takes one reply (protoactor's futures take
// the last one, so a dead letter sent to one already answered could
// replace the answer).
type replyBox struct {
	once sync.Once
	ch   chan any // buffered 1
}

func (b *replyBox) SendUserMessage(_ *actor.PID, m any) {
	_, msg, _ := actor.UnwrapEnvelope(m)
	b.once.Do(func() { b.ch <- msg })
}

func (b *replyBox) SendSystemMessage(*actor.PID, any) {}
func (b *replyBox) Stop(*actor.PID)                   {}

// waiting is the boxes waiting on each task actor, by the actor's id.
type waiting struct {
	mu sync.Mutex
	by map[string]map[*replyBox]struct{}
}

func (w *waiting) add(target string, b *replyBox) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.by == nil {
		w.by = map[string]map[*replyBox]struct{}{}
	}
	if w.by[target] == nil {
		w.by[target] = map[*replyBox]struct{}{}
	}
	w.by[target][b] = struct{}{}
}

func (w *waiting) remove(target string, b *replyBox) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.by[target], b)
	if len(w.by[target]) == 0 {
		delete(w.by, target)
	}
}

// stopped answers every box still waiting on who as a dead letter.
func (w *waiting) stopped(who *actor.PID) {
	w.mu.Lock()
	boxes := w.by[who.Id]
	delete(w.by, who.Id)
	w.mu.Unlock()
	for b := range boxes {
		b.SendUserMessage(nil, &actor.DeadLetterResponse{Target: who})
	}
}

// requestTask sends msg to a local task actor and waits for its reply, or
// for the actor to stop without one (actor.ErrDeadLetter).
func (s *Supervisor) requestTask(pid *actor.PID, msg any, timeout time.Duration) (any, error) {
	b := &replyBox{ch: make(chan any, 1)}
	self, _ := s.sys.ProcessRegistry.Add(b, "ask$"+s.sys.ProcessRegistry.NextId())
	defer s.sys.ProcessRegistry.Remove(self)
	s.waiting.add(pid.Id, b)
	defer s.waiting.remove(pid.Id, b)
	if !s.alive(pid) {
		// stopped already (its Terminated may have come before the box was
		// registered)
		return nil, fmt.Errorf("%s: %w", pid.Id, actor.ErrDeadLetter)
	}
	s.root.RequestWithCustomSender(pid, msg, self)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case res := <-b.ch:
		if _, ok := res.(*actor.DeadLetterResponse); ok {
			return nil, fmt.Errorf("%s: %w", pid.Id, actor.ErrDeadLetter)
		}
		if e, ok := res.(error); ok {
			return nil, e
		}
		return res, nil
	case <-t.C:
		return nil, fmt.Errorf("%s: %w (after %s)", pid.Id, ErrUnresponsive, timeout)
	}
}
