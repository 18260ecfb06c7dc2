package supervisor

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"lazy/actors"
	"lazy/api"
	"lazy/grain"
	"lazy/proxy"
)

// CoreConfig is everything a Core needs, given whole to NewCore.
type CoreConfig struct {
	GrantsPath string       // required: the grants' file
	Log        *slog.Logger // nil: discarded
	// Timeout bounds every request to the grants actor and the hub
	// (default 30s).
	Timeout time.Duration
}

// Core is what the proxy and the agent launcher need of the actor system
// before any task actor can exist: the grants (Mint, Revoke, and the
// snapshot the proxy reads per request) and the event hub (Publish,
// Subscribe, WantsTraffic, WantsTranscript). It is built first, from its
// own CoreConfig; the proxy, its sockets and the launcher are built on it;
// the supervisor's tree is built last, given the core (Config.Core), in
// the core's actor system. A core knows no task and no task actor.
type Core struct {
	sys     *actor.ActorSystem
	root    *actor.RootContext
	grants  *actor.PID
	traffic *actor.PID
	log     *slog.Logger
	timeout time.Duration

	// Grants is the snapshot the proxy reads per request.
	Grants *atomic.Pointer[proxy.Grants]
	// Dropped counts watcher events lost to slow watchers.
	Dropped atomic.Int64

	// what protoactor does not export, of every actor of the system (the
	// tree's too): mailbox depth, restarts, the last failure
	mu          sync.Mutex
	mailboxes   map[string]actor.Mailbox // by actor id
	restarts    map[string]int
	lastFailure map[string]string
	restartsAll atomic.Int64

	subSeq      atomic.Int64
	netWatchers atomic.Int64 // subscribers whose filter takes proxy traffic
	transcripts watchCount   // subscribers whose filter takes transcript events

	// members is the cluster once the tree joined it (nil: events stay on
	// this member); the one state the core changes after it is built,
	// when the supervisor joins
	members atomic.Pointer[members]
	given   atomic.Bool // a supervisor was built on this core
	stop    sync.Once
}

// members is what an event needs to reach the other members' hubs.
type members struct {
	cluster *cluster.Cluster
	link    *grain.Link
}

// NewCore builds the actor system with its grants actor (loaded from
// GrantsPath) and its event hub.
func NewCore(o CoreConfig) (*Core, error) {
	if o.GrantsPath == "" {
		return nil, errors.New("supervisor: CoreConfig.GrantsPath (the grants' file) is missing")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	c := &Core{
		log: o.Log, timeout: o.Timeout, Grants: &atomic.Pointer[proxy.Grants]{},
		mailboxes: map[string]actor.Mailbox{}, restarts: map[string]int{}, lastFailure: map[string]string{},
	}
	empty := proxy.Grants{}
	c.Grants.Store(&empty)
	c.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return o.Log.With("lib", "protoactor")
	}))
	c.root = c.sys.Root
	c.sys.EventStream.Subscribe(func(evt any) {
		if se, ok := evt.(*actor.SupervisorEvent); ok {
			c.mu.Lock()
			c.restarts[se.Child.Id]++
			c.lastFailure[se.Child.Id] = fmt.Sprint(se.Reason)
			c.mu.Unlock()
			c.restartsAll.Add(1)
			c.log.Warn("actor failed; supervisor decided", "actor", se.Child.Id, "reason", fmt.Sprint(se.Reason), "directive", se.Directive.String())
		}
	})
	// the grants and the hub restart on a panic (OneForOne, explicit),
	// their state reloaded: the grants from their file, the hub empty
	strategy := actor.NewOneForOneStrategy(10, time.Minute, func(reason any) actor.Directive {
		return actor.RestartDirective
	})
	guarded := c.root.Copy().WithGuardian(strategy)
	var err error
	if c.grants, err = guarded.SpawnNamed(actor.PropsFromProducer(actors.NewGrantsActor(o.GrantsPath, c.Grants, c.log), c.mailbox("supervisor/grants")), "supervisor/grants"); err != nil {
		c.sys.Shutdown()
		return nil, fmt.Errorf("spawn grants: %w", err)
	}
	if c.traffic, err = guarded.SpawnNamed(actor.PropsFromProducer(actors.NewTrafficHub(&c.Dropped), c.mailbox("supervisor/traffic")), "supervisor/traffic"); err != nil {
		c.sys.Shutdown()
		return nil, fmt.Errorf("spawn traffic: %w", err)
	}
	// both answer before NewCore returns: the grants are loaded (their
	// file made) and the hub takes watchers
	for _, pid := range []*actor.PID{c.grants, c.traffic} {
		if _, err := request[api.ActorHealth](c, pid, &actors.GetHealth{}, c.timeout); err != nil {
			c.sys.Shutdown()
			return nil, fmt.Errorf("start the grants and the event hub: %w", err)
		}
	}
	return c, nil
}

// Shutdown stops a core no supervisor was built on (a start that failed
// in between); a supervisor's Shutdown stops its core itself.
func (c *Core) Shutdown() { c.shutdown(c.sys.Shutdown) }

// shutdown stops the system once, by how.
func (c *Core) shutdown(how func()) { c.stop.Do(how) }

// mailbox returns a props option that remembers the mailbox made for name.
func (c *Core) mailbox(name string) actor.PropsOption {
	return actor.WithMailbox(func() actor.Mailbox {
		m := actor.Unbounded()()
		c.mu.Lock()
		c.mailboxes[name] = m
		c.mu.Unlock()
		return m
	})
}

// Publish hands an event to the traffic hub.
// In a cluster the event goes to every other member's watchers too: a task
// hosted here is watched from any member.
func (c *Core) Publish(e api.Event) {
	c.root.Send(c.traffic, &actors.Publish{Event: e})
	if m := c.members.Load(); m != nil {
		c.broadcast(m, e)
	}
}

// Subscribe registers a watcher and returns its channel and a cancel func.
func (c *Core) Subscribe(f actors.Filter, buffer int) (<-chan api.Event, func(), error) {
	ch := make(chan api.Event, buffer)
	id := fmt.Sprintf("w%d", c.subSeq.Add(1))
	if f.Net {
		c.netWatchers.Add(1) // before the hub has it: no event is skipped
	}
	if f.Transcript {
		c.transcripts.add(f.IDs, 1)
	}
	if _, err := request[*actors.Done](c, c.traffic, &actors.Subscribe{ID: id, Filter: f, Ch: ch}, c.timeout); err != nil {
		if f.Net {
			c.netWatchers.Add(-1)
		}
		if f.Transcript {
			c.transcripts.add(f.IDs, -1)
		}
		return nil, nil, err
	}
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			c.root.Send(c.traffic, &actors.Unsubscribe{ID: id})
			if f.Net {
				c.netWatchers.Add(-1)
			}
			if f.Transcript {
				c.transcripts.add(f.IDs, -1)
			}
		})
	}, nil
}

// WantsTranscript reports whether a transcript event of the task has
// anywhere to go: a watcher of its transcripts (or of every task's) here,
// or (clustered) maybe on another member. One atomic load while nobody
// watches any.
func (c *Core) WantsTranscript(taskID string) bool {
	return c.members.Load() != nil || c.transcripts.wants(taskID)
}

// WantsTraffic reports whether a proxy traffic event has anywhere to go: a
// watcher of proxy traffic here, or (clustered) the other members' own. The
// proxy builds none while it has not; it asks again for every call.
func (c *Core) WantsTraffic() bool {
	return c.members.Load() != nil || c.netWatchers.Load() > 0
}

// Mint asks the grants actor for placeholders.
func (c *Core) Mint(m *actors.MintGrants) (map[string]string, error) {
	minted, err := request[*actors.Minted](c, c.grants, m, c.timeout)
	if err != nil {
		return nil, err
	}
	return minted.Env, nil
}

// Revoke drops every grant of a task.
func (c *Core) Revoke(taskID string) error {
	_, err := request[*actors.Done](c, c.grants, &actors.RevokeTask{TaskID: taskID}, c.timeout)
	return err
}

// Restarts is the number of actor restarts since start.
func (c *Core) Restarts() int64 { return c.restartsAll.Load() }

// request sends msg to one of the system's own actors (not a task actor)
// and waits for a reply of type T.
func request[T any](c *Core, pid *actor.PID, msg any, timeout time.Duration) (T, error) {
	res, err := c.requestWithin(pid, msg, timeout)
	if err != nil {
		var zero T
		return zero, err
	}
	return replyAs[T](msg, res)
}

func (c *Core) requestWithin(pid *actor.PID, msg any, timeout time.Duration) (any, error) {
	res, err := c.root.RequestFuture(pid, msg, timeout).Result()
	if err != nil {
		if errors.Is(err, actor.ErrTimeout) {
			return nil, fmt.Errorf("%s: %w (after %s)", pid.Id, ErrUnresponsive, timeout)
		}
		return nil, fmt.Errorf("%s: %w", pid.Id, err)
	}
	if e, ok := res.(error); ok {
		return nil, e
	}
	return res, nil
}
