// Package supervisor is the root of the actor tree. It spawns one task actor
// per live task on its first message (get-or-create by task id), restarts a
// panicking one with its state reloaded from the store (OneForOne, explicit),
// stops it when the task ends. It is built on a Core (core.go), built before
// it: the actor system, the grants actor and the event hub, which the proxy
// and the agent launcher are built on before the task actors exist. The
// core measures what protoactor does not export: mailbox depth, restarts,
// the last failure of every actor.
package supervisor

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"lazy/actors"
	"lazy/api"
	"lazy/grain"
	"lazy/grain/grainpb"
	"lazy/task"
)

// Config is everything a Supervisor needs, given whole to New (nothing is
// set on it, or on what it points to, afterwards).
type Config struct {
	// Core is required: the actor system, grants and event hub the tree
	// is built in (NewCore), one core per tree.
	Core *Core
	Task *actors.TaskDeps // required, valid (actors.TaskDeps.Validate); New never changes it
	Log  *slog.Logger     // nil: discarded
	// Timeout bounds every request to an actor (default 30s).
	Timeout time.Duration
	// Cluster, when set, makes this tree a member of a cluster once Join
	// is called: messages to task actors go through task grains
	// (cluster.go). New checks it.
	Cluster *ClusterOptions
}

// validate names what is missing or wrong.
func (c *Config) validate() error {
	if c.Core == nil {
		return errors.New("supervisor: Core (the grants and the event hub: NewCore, built before the proxy and the launcher) is missing")
	}
	if c.Cluster != nil {
		if err := c.Cluster.validate(); err != nil {
			return err
		}
	}
	if c.Task == nil {
		return errors.New("supervisor: Task (the task actors' deps) is missing")
	}
	return c.Task.Validate()
}

// Supervisor is the handle the daemon, the handlers and the proxy use.
type Supervisor struct {
	*Core       // the system, the grants and the hub: Publish, Subscribe, Mint, Grants...
	pid         *actor.PID
	log         *slog.Logger
	timeout     time.Duration
	deps        *actors.TaskDeps
	host        actors.TaskHost // what the tree gives each task actor
	clusterOpts *ClusterOptions // nil: a single daemon

	// pids caches live task actors by task id so that a message to a running
	// actor does not pass through the root actor; the root actor fills it on
	// spawn and clears it on termination.
	pids sync.Map
	// waiting is the requests waiting on each task actor (requests.go)
	waiting waiting

	cluster  *cluster.Cluster // nil: a single daemon
	link     *grain.Link      // signs and checks the calls between members
	leaves   leaveWatch       // members that left, for the calls waiting on them
	members  *etcdProvider    // this member's place in the cluster (nil: a single daemon)
	describe func(*grainpb.MemberInfo)
	// stopping: Shutdown has begun (a grain that stops now is not a move)
	stopping atomic.Bool
}

// ErrUnresponsive is an actor that did not answer in time.
var ErrUnresponsive = errors.New("actor did not answer in time")

// New builds the tree in its core's system: the supervisor actor, which
// spawns the task actors. With Config.Cluster it is a member-to-be: Join
// joins, once the daemon is ready to run the jobs the cluster hands it at
// once. A core is given to one tree only.
func New(o Config) (*Supervisor, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if !o.Core.given.CompareAndSwap(false, true) {
		return nil, errors.New("supervisor: Config.Core is another supervisor's already; build one core (NewCore) per tree")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	s := &Supervisor{Core: o.Core, log: o.Log, timeout: o.Timeout, deps: o.Task, clusterOpts: o.Cluster}
	s.host = actors.TaskHost{Publish: s.Publish, Revoke: s.Revoke}
	if o.Cluster != nil {
		// a task moved here while its job ran elsewhere waits for that job
		s.host.RunningElsewhere, s.host.Handoff = s.runningElsewhere, s.handoff
	}
	strategy := actor.NewOneForOneStrategy(10, time.Minute, func(reason any) actor.Directive {
		return actor.RestartDirective
	})
	props := actor.PropsFromProducer(func() actor.Actor { return &rootActor{s: s} },
		actor.WithSupervisor(strategy), s.mailbox("supervisor"))
	pid, err := s.root.SpawnNamed(props, "supervisor")
	if err != nil {
		return nil, fmt.Errorf("spawn supervisor: %w", err)
	}
	s.pid = pid
	return s, nil
}

// Join makes a supervisor built with Config.Cluster a member now. A member
// that joins is handed tasks (and their jobs) at once, so the daemon joins
// once it is ready to run them. membersLeft (nil: none) is called when
// members have left the cluster (stopped or died): their tasks are placed
// anew on the next message, and the daemon sends one to every task with
// work waiting; it is given here, not to New, because it calls the tree
// itself. On an error the caller shuts the supervisor down.
func (s *Supervisor) Join(membersLeft func(addresses []string)) error {
	if s.clusterOpts == nil {
		return errors.New("cluster: this supervisor was built without Config.Cluster")
	}
	if s.cluster != nil {
		return errors.New("cluster: this supervisor is a member already")
	}
	if err := s.startCluster(s.clusterOpts, membersLeft); err != nil {
		s.cluster = nil // never joined: Shutdown leaves nothing
		return err
	}
	// the hub's events reach the other members' watchers from now on
	s.Core.members.Store(&members{cluster: s.cluster, link: s.link})
	return nil
}

type getTask struct{ id string }

type rootActor struct {
	s *Supervisor
	// live task actors by task id. protoactor makes a mailbox before it finds
	// a name taken, so get-or-create is decided here, not by SpawnNamed.
	live map[string]*actor.PID
}

func (r *rootActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *getTask:
		if pid, ok := r.live[m.id]; ok {
			if r.s.alive(pid) {
				ctx.Respond(pid)
				return
			}
			delete(r.live, m.id) // stopped; its Terminated is still on the way
		}
		name := "task/" + m.id
		pid, err := ctx.SpawnNamed(actor.PropsFromProducer(actors.NewTaskActor(m.id, r.s.deps, r.s.host), r.s.mailbox("supervisor/"+name)), name)
		if err != nil && !errors.Is(err, actor.ErrNameExists) {
			ctx.Respond(fmt.Errorf("spawn task actor %s: %w", m.id, err))
			return
		}
		if r.live == nil {
			r.live = map[string]*actor.PID{}
		}
		r.live[m.id] = pid
		r.s.pids.Store(m.id, pid)
		ctx.Respond(pid)
	case *actor.Terminated:
		id := strings.TrimPrefix(m.Who.Id, "supervisor/task/")
		delete(r.live, id)
		r.s.pids.Delete(id)
		r.s.waiting.stopped(m.Who)
		r.s.mu.Lock()
		delete(r.s.mailboxes, m.Who.Id)
		r.s.mu.Unlock()
	}
}

// Task returns the task actor of id, spawning it if it is not running.
func (s *Supervisor) Task(id string) (*actor.PID, error) {
	if !task.IsFullID(id) {
		return nil, fmt.Errorf("task actor: %q is not a full task id", id)
	}
	if pid, ok := s.pids.Load(id); ok {
		if s.alive(pid.(*actor.PID)) {
			return pid.(*actor.PID), nil
		}
		s.pids.Delete(id)
	}
	pid, err := requestAs[*actor.PID](s, s.pid, &getTask{id: id}, s.timeout)
	if err != nil {
		return nil, fmt.Errorf("reach the task actor: %w", err)
	}
	return pid, nil
}

// alive reports whether pid's actor is still registered.
func (s *Supervisor) alive(pid *actor.PID) bool {
	_, ok := s.sys.ProcessRegistry.GetLocal(pid.Id)
	return ok
}

// ask sends msg to the task actor of id and waits for its reply; a reply
// that is an error is returned as the error. It is untyped: callers outside
// this package use Ask[T].
func (s *Supervisor) ask(id string, msg any) (any, error) {
	return s.askWithin(id, msg, s.timeout)
}

// askWithin is ask with its own timeout, for replies that come when a job
// is done (sync, accept).
func (s *Supervisor) askWithin(id string, msg any, timeout time.Duration) (any, error) {
	if s.cluster != nil {
		return s.askGrain(id, msg, timeout)
	}
	for attempt := 0; ; attempt++ {
		pid, err := s.Task(id)
		if err != nil {
			return nil, err
		}
		res, err := s.requestTask(pid, msg, timeout)
		// the actor stopped between lookup and send, or before it took the
		// message from its mailbox: a fresh one takes it
		if errors.Is(err, actor.ErrDeadLetter) && attempt == 0 {
			s.pids.Delete(id)
			continue
		}
		return res, err
	}
}

// ReplyError is a reply of another type than the asker waits for: a bug
// between a message and its handler, reported rather than panicking.
type ReplyError struct {
	Msg, Want, Got string
}

func (e *ReplyError) Error() string {
	return fmt.Sprintf("%s answered %s where %s was expected", e.Msg, e.Got, e.Want)
}

// Ask sends msg to the task actor of id and waits for a reply of type T
// (the supervisor's timeout). An error the actor answers is returned as the
// error; a reply of another type is a *ReplyError.
func Ask[T any](s *Supervisor, id string, msg any) (T, error) {
	return AskWithin[T](s, id, msg, s.timeout)
}

// askWithin is ask with its own timeout, for replies that come when a job
// is done (sync, accept).
func AskWithin[T any](s *Supervisor, id string, msg any, timeout time.Duration) (T, error) {
	res, err := s.askWithin(id, msg, timeout)
	if err != nil {
		var zero T
		return zero, err
	}
	return replyAs[T](msg, res)
}

// replyAs checks a reply against the type the asker waits for.
func replyAs[T any](msg, res any) (T, error) {
	v, ok := res.(T)
	if !ok {
		return v, &ReplyError{Msg: fmt.Sprintf("%T", msg), Want: fmt.Sprintf("%T", v), Got: fmt.Sprintf("%T", res)}
	}
	return v, nil
}

// requestAs sends msg to an actor that is not a task actor (the grants,
// the hub, another member's info actor) and waits for a reply of type T.
func requestAs[T any](s *Supervisor, pid *actor.PID, msg any, timeout time.Duration) (T, error) {
	return request[T](s.Core, pid, msg, timeout)
}

// Send delivers msg to the task actor of id without waiting.
func (s *Supervisor) Send(id string, msg any) error {
	if s.cluster != nil {
		return s.sendGrain(id, msg)
	}
	pid, err := s.Task(id)
	if err != nil {
		return err
	}
	s.root.Send(pid, msg)
	return nil
}

// InjectPanic makes a named child (grants, traffic) or a task actor panic.
func (s *Supervisor) InjectPanic(target, reason string) error {
	switch target {
	case "grants":
		s.root.Send(s.grants, &actors.InjectPanic{Reason: reason})
	case "traffic":
		s.root.Send(s.traffic, &actors.InjectPanic{Reason: reason})
	default:
		return s.Send(target, &actors.InjectPanic{Reason: reason})
	}
	return nil
}

// Health asks every actor for its row, with a short timeout each, and adds
// what the supervisor measures itself.
func (s *Supervisor) Health() []api.ActorHealth {
	s.mu.Lock()
	names := make([]string, 0, len(s.mailboxes))
	for n := range s.mailboxes {
		names = append(names, n)
	}
	s.mu.Unlock()
	sort.Strings(names)
	out := make([]api.ActorHealth, 0, len(names))
	for _, n := range names {
		var h api.ActorHealth
		if n == "supervisor" {
			h = api.ActorHealth{Name: "supervisor", Kind: "supervisor", Queued: []string{}, Responsive: true}
		} else {
			pid := actor.NewPID(s.sys.Address(), n)
			if hh, err := requestAs[api.ActorHealth](s, pid, &actors.GetHealth{}, 2*time.Second); err == nil {
				h = hh
			} else {
				short := strings.TrimPrefix(n, "supervisor/")
				h = api.ActorHealth{Name: short, Kind: kindOf(short), Queued: []string{}, Responsive: false}
				if strings.HasPrefix(short, "task/") {
					h.TaskID = strings.TrimPrefix(short, "task/")
				}
			}
		}
		s.mu.Lock()
		if m, ok := s.mailboxes[n]; ok {
			h.Mailbox = m.UserMessageCount()
		}
		h.Restarts = s.restarts[n]
		if h.LastFailure == "" {
			h.LastFailure = s.lastFailure[n]
		}
		s.mu.Unlock()
		out = append(out, h)
	}
	return out
}

func kindOf(name string) string {
	switch {
	case strings.HasPrefix(name, "task/"):
		return "task"
	case name == "grants", name == "traffic":
		return name
	}
	return "other"
}

// StopTask stops the task actor of id after its queue drains (Poison).
func (s *Supervisor) StopTask(id string) {
	pid := actor.NewPID(s.sys.Address(), "supervisor/task/"+id)
	_ = s.root.PoisonFuture(pid).Wait()
	s.pids.Delete(id)
}

// Shutdown stops every task actor (their running turns are killed and
// recorded as interrupted), then the tree.
func (s *Supervisor) Shutdown() {
	s.stopping.Store(true)
	s.mu.Lock()
	var tasks []string
	for n := range s.mailboxes {
		if strings.HasPrefix(n, "supervisor/task/") {
			tasks = append(tasks, n)
		}
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range tasks {
		wg.Add(1)
		go func(n string) {
			defer wg.Done()
			_ = s.root.StopFuture(actor.NewPID(s.sys.Address(), n)).Wait()
		}(n)
	}
	wg.Wait()
	_ = s.root.StopFuture(s.pid).Wait()
	if s.cluster != nil {
		// leaves etcd (the others place its tasks anew) and stops the system
		s.Core.shutdown(func() { s.cluster.Shutdown(true) })
		return
	}
	s.Core.Shutdown()
}
