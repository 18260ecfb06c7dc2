package supervisor

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"

	"lazy/actors"
	"lazy/api"
	"lazy/grain"
	"lazy/grain/grainpb"
)

// ClusterOptions make the supervisor a member of a protoactor cluster:
// task actors become grains of kind "task" (identity = full task id),
// placed over the members etcd lists by their identity (disthash).
type ClusterOptions struct {
	Name string   // the cluster's name: members with the same name and etcd form one
	Etcd []string // etcd client endpoints, host:port (or https://host:port: TLS with the member's certificate)
	Host string   // the address other members reach this one at
	Port int      // 0: any free port
	// Secret signs every call to a grain (the shared store keeps it).
	Secret []byte
	// Now is the member's clock for the calls' time window (nil:
	// time.Now); a test turns it to see a call age.
	Now func() time.Time
	// Describe fills what the daemon knows of itself into this member's
	// info (base URL, pid, version); the supervisor adds its tasks.
	Describe func(*grainpb.MemberInfo)
	// TLS makes the links between members mutual TLS (nil: plaintext,
	// for members on one host or a network of their own).
	TLS *LinkTLS
}

// validate checks the options before anything starts.
func (o *ClusterOptions) validate() error {
	if o.Name == "" || len(o.Etcd) == 0 || o.Host == "" {
		return errors.New("cluster: the name, etcd endpoints and the advertised host are all needed (cluster.name, cluster.etcd, cluster.advertise)")
	}
	if len(o.Secret) < 16 {
		return errors.New("cluster: the secret is missing or short")
	}
	for _, e := range o.Etcd {
		if strings.HasPrefix(e, "https://") && o.TLS == nil {
			return fmt.Errorf("cluster: etcd at %s needs the member's certificate: set cluster.tls_cert, tls_key and tls_ca", e)
		}
	}
	return nil
}

// startCluster joins the cluster. The member's own tree stays as it is: a
// grain is a relay that hands each call to the task actor of this member's
// tree (so OneForOne supervision, health and shutdown are the member's own),
// and the cluster decides which member that is.
func (s *Supervisor) startCluster(o *ClusterOptions, membersLeft func(addresses []string)) error {
	etcdCfg := clientv3.Config{Endpoints: o.Etcd, DialTimeout: 5 * time.Second,
		// reconnect within a second of etcd's return, however long it was
		// away (gRPC's own backoff grows to two minutes): a member out of
		// the cluster joins again as soon as etcd answers
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 2 * time.Second,
		})}}
	for _, e := range o.Etcd {
		if strings.HasPrefix(e, "https://") {
			etcdCfg.TLS = o.TLS.Client.Clone() // validate: TLS is set
		}
	}
	if o.TLS != nil {
		if err := ProbeEtcdTLS(o.Etcd, o.TLS.Client, 5*time.Second); err != nil {
			return err
		}
	}
	prov := &etcdProvider{base: "/lazy/" + o.Name, cfg: etcdCfg, log: s.log}
	s.members = prov
	s.link = grain.NewLink(o.Secret, o.Now)
	s.describe = o.Describe
	if _, err := s.root.SpawnNamed(actor.PropsFromFunc(s.memberInfo), memberActor); err != nil {
		return fmt.Errorf("cluster: spawn the member info actor: %w", err)
	}
	kind := cluster.NewKind(grain.Kind, actor.PropsFromProducer(func() actor.Actor { return &taskGrain{s: s} }))
	var links []remote.ConfigOption
	if o.TLS != nil {
		links = append(links, remote.WithServerOptions(grpc.Creds(credentials.NewTLS(o.TLS.Server))),
			remote.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(o.TLS.Client))))
	}
	cfg := cluster.Configure(o.Name, prov, disthash.New(), remote.Configure(o.Host, o.Port, links...),
		cluster.WithKinds(kind), cluster.WithRequestTimeout(s.timeout),
		// etcd alone says who is a member. protoactor's gossip would block,
		// for good, a member whose heartbeat it missed for 20 s (its links
		// refused), as it does while a member is out of the others' view
		// during an etcd outage: one that joins again must be reachable.
		cluster.WithHeartbeatExpiration(time.Duration(math.MaxInt64)))
	s.cluster = cluster.New(s.sys, cfg)
	s.sys.EventStream.Subscribe(func(evt any) {
		if top, ok := evt.(*cluster.ClusterTopology); ok && len(top.Left) > 0 {
			var left []string
			for _, m := range top.Left {
				left = append(left, m.Address())
				s.leaves.left(m.Address())
			}
			s.log.Warn("cluster members left; their tasks move to the members left", "left", left)
			if membersLeft != nil {
				go membersLeft(left)
			}
		}
	})
	started := make(chan error, 1)
	go func() {
		// protoactor panics when it cannot listen or reach etcd: that is an
		// error to report, not a crash
		defer func() {
			if r := recover(); r != nil {
				started <- fmt.Errorf("%v", r)
			}
		}()
		s.cluster.StartMember()
		started <- nil
	}()
	select {
	case err := <-started:
		if err != nil {
			return fmt.Errorf("cluster: join %q (listening on %s:%d, etcd at %v): %w (check cluster.advertise and cluster.etcd, and that etcd runs)", o.Name, o.Host, o.Port, o.Etcd, err)
		}
	case <-time.After(30 * time.Second):
		return fmt.Errorf("cluster: joining %q through etcd at %v took over 30 s (is etcd running?)", o.Name, o.Etcd)
	}
	return nil
}

// askGrain sends msg to the grain of task id, wherever the cluster places
// it, and decodes its reply.
func (s *Supervisor) askGrain(id string, msg any, timeout time.Duration) (any, error) {
	// a member that died is still in the topology for a few seconds (until
	// its etcd lease runs out): calls to its tasks fail fast as dead letters
	// and are tried again until the task is placed on a member alive, or
	// the time is up. Each try is a call of its own (its nonce and time): a
	// try that failed was not taken, and a long wait outlasts the window.
	deadline := time.Now().Add(timeout)
	var (
		res  any
		call *grainpb.Call
		err  error
	)
	for {
		if out := s.outOfCluster(); out != nil {
			return nil, out
		}
		left := time.Until(deadline)
		if call, err = s.link.Encode(msg, id, left); err != nil {
			return nil, err
		}
		res, err = s.requestWhileHostLives(id, call, left)
		if r, ok := res.(*grainpb.Reply); ok && err == nil && r.GetError().GetKind() == hostOutKind {
			// its host is out of the cluster (etcd dropped it, or it lost
			// etcd): the others place the task anew once they see it leave
			res, err = nil, errors.New(r.GetError().GetMessage())
		}
		if err == nil || time.Until(deadline) < time.Second {
			break
		}
		s.log.Warn("task grain unreachable; trying again", "task", id, "err", err)
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		if out := s.outOfCluster(); out != nil {
			return nil, out
		}
		return nil, fmt.Errorf("task %s: %w (%v)", id, ErrUnresponsive, err)
	}
	reply, err := replyAs[*grainpb.Reply](call, res)
	if err != nil {
		return nil, err
	}
	return grain.DecodeReply(reply)
}

// errHostLeft is a call whose task's member left the cluster (it died, or
// lost its place) before it answered: the task is placed anew and the call
// tried again there.
var errHostLeft = errors.New("the member hosting the task left the cluster before it answered")

// requestWhileHostLives sends call to the grain of task id and waits for
// its answer, or until the member that hosts the grain leaves the cluster:
// a call in flight to a member that died would otherwise wait out its whole
// timeout (a sync's is half an hour), as protoactor fails no future of a
// dead endpoint.
func (s *Supervisor) requestWhileHostLives(id string, call *grainpb.Call, timeout time.Duration) (any, error) {
	type result struct {
		res any
		err error
	}
	// the host from the cluster's cache of activations (Request reads the
	// same cache); a miss is looked up once and cached, so Request does
	// not look it up again
	var gone <-chan struct{}
	pid, ok := s.cluster.PidCache.Get(id, grain.Kind)
	if !ok {
		if pid = s.cluster.Get(id, grain.Kind); pid != nil {
			s.cluster.PidCache.Set(id, grain.Kind, pid)
		}
	}
	if pid != nil && pid.Address != s.sys.Address() {
		gone = s.leaves.watch(pid.Address, s.memberAt)
	}
	done := make(chan result, 1)
	go func() {
		res, err := s.cluster.Request(id, grain.Kind, call, cluster.WithTimeout(timeout))
		done <- result{res, err}
	}()
	select {
	case r := <-done:
		return r.res, r.err
	case <-gone:
		return nil, errHostLeft
	}
}

// memberAt reports whether a member at address is in the cluster now.
func (s *Supervisor) memberAt(address string) bool {
	for _, m := range s.cluster.MemberList.Members().Members() {
		if m.Address() == address {
			return true
		}
	}
	return false
}

// leaveWatch closes a channel per member address when that member leaves
// the cluster (a member that comes back has another address).
type leaveWatch struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

// watch is closed when the member at address leaves; at once when it is
// not a member now.
func (w *leaveWatch) watch(address string, isMember func(string) bool) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.ch[address]; ok {
		return c
	}
	c := make(chan struct{})
	if !isMember(address) {
		close(c)
		return c
	}
	if w.ch == nil {
		w.ch = map[string]chan struct{}{}
	}
	w.ch[address] = c
	return c
}

func (w *leaveWatch) left(address string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.ch[address]; ok {
		close(c)
		delete(w.ch, address)
	}
}

// runningElsewhere reports whether another member's actor of task id is
// running a job now. A member that is listed but does not answer may be: it
// counts as running until it answers or leaves the cluster.
func (s *Supervisor) runningElsewhere(id string) bool {
	for _, m := range s.Members() {
		if m.Self {
			continue
		}
		info, err := requestAs[*grainpb.MemberInfo](s, actor.NewPID(m.Address, memberActor), &grainpb.MemberInfoRequest{}, 3*time.Second)
		if err != nil || slices.Contains(info.GetRunningTasks(), id) {
			return true
		}
	}
	return false
}

// handoff wakes task id wherever the cluster places it now.
func (s *Supervisor) handoff(id string) {
	if err := s.sendGrain(id, &actors.Wake{}); err != nil {
		s.log.Warn("hand the task over to its new member", "task", id, "err", err)
	}
}

// sendGrain delivers msg to the grain of task id without a reply.
func (s *Supervisor) sendGrain(id string, msg any) error {
	if out := s.outOfCluster(); out != nil {
		return out
	}
	call, err := s.link.Encode(msg, id, s.timeout)
	if err != nil {
		return err
	}
	pid := s.cluster.Get(id, grain.Kind)
	if pid == nil {
		return fmt.Errorf("task %s: no member hosts it now: %w", id, ErrUnresponsive)
	}
	s.root.Send(pid, call)
	return nil
}

// Member is one member of the cluster, as this member sees it.
type Member struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Self    bool   `json:"self"`
}

// Members lists the cluster's members (nil when not in a cluster).
func (s *Supervisor) Members() []Member {
	if s.cluster == nil {
		return nil
	}
	var out []Member
	for _, m := range s.cluster.MemberList.Members().Members() {
		out = append(out, Member{ID: m.Id, Address: m.Address(), Self: m.Address() == s.sys.Address()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	return out
}

// memberActor answers MemberInfoRequest on every member.
const memberActor = "lazy-member"

func (s *Supervisor) memberInfo(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *grainpb.MemberInfoRequest:
		ctx.Respond(s.localInfo())
	case *grainpb.Event:
		e, err := s.link.DecodeEvent(m)
		if err != nil {
			s.log.Warn("refused an event from another member", "err", err)
			return
		}
		s.root.Send(s.traffic, &actors.Publish{Event: e, Remote: true}) // here only: no echo
	}
}

// broadcast sends an event to the other members' watchers.
func (c *Core) broadcast(ms *members, e api.Event) {
	msg, err := ms.link.EncodeEvent(e)
	if err != nil {
		c.log.Error("encode an event for the other members", "err", err)
		return
	}
	for _, m := range ms.cluster.MemberList.Members().Members() {
		if m.Address() != c.sys.Address() {
			c.root.Send(actor.NewPID(m.Address(), memberActor), msg)
		}
	}
}

func (s *Supervisor) localInfo() *grainpb.MemberInfo {
	info := &grainpb.MemberInfo{Address: s.sys.Address()}
	if s.describe != nil {
		s.describe(info)
	}
	for _, h := range s.Health() {
		if h.Kind == "task" {
			info.Tasks = append(info.Tasks, h.TaskID)
			if h.Running != "" || !h.Responsive {
				// an actor too busy to answer may be running: it counts
				info.RunningTasks = append(info.RunningTasks, h.TaskID)
			}
			if h.Running != "" && strings.HasPrefix(h.Running, "work turn") {
				info.RunningTurns++
			}
		}
	}
	info.Grains = int32(len(info.Tasks))
	return info
}

// MemberInfos asks every member about itself; a member that does not
// answer in 3 s is listed with its address and an error.
func (s *Supervisor) MemberInfos() []MemberStatus {
	var out []MemberStatus
	for _, m := range s.Members() {
		st := MemberStatus{Member: m}
		if m.Self {
			st.Info = s.localInfo()
		} else if info, err := requestAs[*grainpb.MemberInfo](s, actor.NewPID(m.Address, memberActor), &grainpb.MemberInfoRequest{}, 3*time.Second); err != nil {
			st.Error = err.Error()
		} else {
			st.Info = info
		}
		out = append(out, st)
	}
	if ms := s.Membership(); s.cluster != nil && !ms.In {
		// out of the cluster it is in no member's list, its own included:
		// it is listed all the same, saying so
		out = append(out, MemberStatus{Member: Member{ID: ms.ID, Address: s.sys.Address(), Self: true},
			Info: s.localInfo(), Error: "out of the cluster: " + ms.Why})
	}
	return out
}

// MemberStatus is one member and what it said of itself.
type MemberStatus struct {
	Member
	Info  *grainpb.MemberInfo
	Error string
}

// Clustered reports whether this supervisor is a cluster member.
func (s *Supervisor) Clustered() bool { return s.cluster != nil }

// taskGrain is the cluster's activation of one task on this member: it
// checks each call (its signature, that it is for this task, its time and
// nonce: grain.Link) and relays it to the member's task actor,
// answering with what that actor answers. Calls are relayed in the order
// they arrive, and the task actor's mailbox keeps that order.
type taskGrain struct {
	s  *Supervisor
	id string
}

func (g *taskGrain) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *cluster.ClusterInit:
		g.id = m.Identity.GetIdentity()
	case *actor.Stopping:
		pid, ok := g.s.pids.Load(g.id)
		if !ok || g.id == "" {
			return
		}
		if g.s.stopping.Load() {
			// this member is stopping: its task actors stop with it, and a
			// job one was running is recorded interrupted
			_ = g.s.root.StopFuture(pid.(*actor.PID)).Wait()
			return
		}
		// the cluster moved the task to another member (one joined): the
		// actor here finishes the job it runs, starts no other, wakes the
		// new host and stops; the new host waits for that job
		// (RunningElsewhere) and takes the queue from the store, so a turn
		// is not cut off and no job runs on two members at once
		g.s.log.Info("task moves to another member", "task", g.id)
		g.s.root.Send(pid.(*actor.PID), &actors.Drain{})
	case *grainpb.Call:
		if out := g.s.outOfCluster(); out != nil {
			// this member lost its place: the task is placed anew once the
			// others see it leave, and the caller tries again there
			if ctx.Sender() != nil {
				ctx.Respond(&grainpb.Reply{Error: &grainpb.Error{Message: out.Error(), Kind: hostOutKind}})
			}
			return
		}
		msg, err := g.s.link.Decode(m, g.id)
		if err != nil {
			from := "a send"
			if ctx.Sender() != nil {
				from = ctx.Sender().GetAddress()
			}
			g.s.log.Warn("task grain refused a call", "task", g.id, "type", m.GetType(), "from", from, "err", err)
			if ctx.Sender() != nil {
				ctx.Respond(grain.EncodeReply(nil, err))
			}
			return
		}
		pid, err := g.s.Task(g.id)
		if err != nil {
			if ctx.Sender() != nil {
				ctx.Respond(grain.EncodeReply(nil, err))
			}
			return
		}
		if ctx.Sender() == nil {
			ctx.Send(pid, msg)
			return
		}
		timeout := time.Duration(m.GetTimeoutMs()) * time.Millisecond
		if timeout <= 0 || timeout > time.Hour {
			timeout = g.s.timeout
		}
		f := ctx.RequestFuture(pid, msg, timeout)
		ctx.ReenterAfter(f, func(res any, err error) {
			if errors.Is(err, actor.ErrTimeout) {
				err = fmt.Errorf("task %s: %w (after %s)", g.id, ErrUnresponsive, timeout)
			}
			ctx.Respond(grain.EncodeReply(res, err))
		})
	}
}

// hostOutKind marks a grain's refusal because its member is out of the
// cluster: the caller tries again, on the member the task is placed on next.
const hostOutKind = "member-out"

// OutOfClusterError is a call refused because this member is out of its
// cluster: etcd dropped it, or it could not reach etcd for its lease's whole
// length. It joins again by itself once etcd answers.
type OutOfClusterError struct {
	Cluster string
	Etcd    []string
	Since   time.Time
	Why     string
}

func (e *OutOfClusterError) Error() string {
	return fmt.Sprintf("this member is out of cluster %q since %s (%s; etcd at %s), so it runs no task's work now: "+
		"it joins again by itself as soon as etcd answers. Check that etcd runs and this host reaches it "+
		"(lazy cluster status), then try again",
		e.Cluster, e.Since.UTC().Format("15:04:05 UTC"), e.Why, strings.Join(e.Etcd, ", "))
}

// HTTPStatus: 503, the service is unavailable for now.
func (e *OutOfClusterError) HTTPStatus() int { return http.StatusServiceUnavailable }

// Membership is this member's place in its cluster now (a zero value
// outside a cluster).
func (s *Supervisor) Membership() MembershipState {
	if s.members == nil || s.cluster == nil {
		return MembershipState{}
	}
	return s.members.Membership()
}

// OutOfCluster is the refusal of work while this member is out of its
// cluster (*OutOfClusterError), nil while it is in or not in a cluster: the
// daemon asks it before work that would reach a task (a new task).
func (s *Supervisor) OutOfCluster() error {
	if out := s.outOfCluster(); out != nil {
		return out
	}
	return nil
}

// outOfCluster is the refusal of a call while this member is out of its
// cluster (nil while it is in).
func (s *Supervisor) outOfCluster() *OutOfClusterError {
	if s.members == nil || s.cluster == nil {
		return nil
	}
	m := s.members.Membership()
	if m.In {
		return nil
	}
	return &OutOfClusterError{Cluster: s.clusterOpts.Name, Etcd: s.clusterOpts.Etcd, Since: m.Since, Why: m.Why}
}
