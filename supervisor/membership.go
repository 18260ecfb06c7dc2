package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// memberLease is how long etcd keeps a member listed without hearing from
// it: a member killed outright is seen to leave after at most this long,
// and a member alive must not go unheard for this long. The client renews
// every third of it, so a stall (of etcd's disk, of the member's process)
// shorter than about two thirds of it costs nothing.
const memberLease = 6 * time.Second

// etcdProvider keeps the cluster's membership in etcd: each member one key
// (base/<cluster>/<cluster>@<actor system id>, the layout and JSON of
// protoactor's own etcd provider, so the two can share a cluster) under a
// lease of its own, renewed while it runs.
//
// It replaces protoactor's provider, which lost members that were alive: it
// granted a 3 s lease and put the member's key under it, then granted a
// second lease and put the key again from a goroutine, keeping only the
// second alive; when that took over 3 s, or a renewal was late by 2 s
// (a loaded machine, a slow etcd disk), etcd deleted the key. Every member,
// the one dropped included (it removed itself from its own view), then
// saw it leave, and protoactor blocks a member that left for good: it ran
// on outside the cluster, hosting nothing, and never came back. It also
// watched from after its first listing, so a member that joined between the
// two was never seen.
//
// Here the key is put once, under one lease, before the member lists the
// others; the watch starts at the revision of that listing; and a member
// leaves its own view only when its lease is lost: etcd did not hear from it
// for the lease's whole length (etcd down, or out of this member's reach),
// or deleted its key. It is then out: it hosts nothing and refuses calls
// (Membership says since when and why), and it joins again by itself as
// soon as etcd answers: a new lease, its key put again under a new member id
// (protoactor blocks the ids that left, for good), and the member list read
// anew from a fresh listing, watched from there.
type etcdProvider struct {
	base string
	cfg  clientv3.Config
	ttl  time.Duration
	log  *slog.Logger
	// retry is the pause between two tries to join again (0: 500 ms)
	retry time.Duration

	cli     *clientv3.Client
	c       *cluster.Cluster
	prefix  string
	self    *etcd.Node // this member, its ID that of the life it is in
	name    string     // <cluster>@<actor system id>: the first life's id
	life    int        // 1 for the first registration, then one more per rejoin
	key     string
	lease   clientv3.LeaseID
	cancel  context.CancelFunc
	stopped chan struct{}

	pub     sync.Mutex // one publish at a time, of the members as they are then
	mu      sync.Mutex
	members map[string]*etcd.Node // by key
	lost    bool                  // etcd dropped this member (or may have): it is out
	since   time.Time             // when it last came in or went out
	why     string                // why it is out
	closing bool
}

// MembershipState is this member's place in its cluster.
type MembershipState struct {
	In    bool      `json:"in"`
	Since time.Time `json:"since"` // when it came in or went out
	Why   string    `json:"why,omitempty"`
	Life  int       `json:"life"` // 1, then one more each time it joined again
	ID    string    `json:"id"`   // its member id in this life
}

func (e *etcdProvider) StartMember(c *cluster.Cluster) error {
	// made now, after the member's remote is up: the remote sets gRPC's
	// process-wide logger as it starts, and an etcd client made before
	// would read it from its own goroutines meanwhile (a data race in the
	// libraries)
	cli, err := clientv3.New(e.cfg)
	if err != nil {
		return err
	}
	e.cli, e.c = cli, c
	host, portText, err := net.SplitHostPort(c.ActorSystem.Address())
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return err
	}
	e.name = c.Config.Name + "@" + c.ActorSystem.ID
	e.self = etcd.NewNode(e.name, host, port, c.GetClusterKinds())
	e.prefix = e.base + "/" + c.Config.Name + "/"
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	call, done := context.WithTimeout(ctx, 30*time.Second)
	defer done()
	life, end := context.WithCancel(ctx)
	alive, rev, err := e.register(call, life)
	if err != nil {
		end()
		return err
	}
	e.stopped = make(chan struct{})
	go e.run(ctx, life, end, alive, rev)
	return nil
}

// register grants this life's lease, puts the member's key under it, keeps
// the lease alive (until life ends), lists the members afresh and hands them
// to protoactor. It returns the lease's renewals and the listing's revision.
func (e *etcdProvider) register(call, life context.Context) (<-chan *clientv3.LeaseKeepAliveResponse, int64, error) {
	ttl := e.ttl
	if ttl <= 0 {
		ttl = memberLease
	}
	id := e.name
	if e.life > 0 {
		id = fmt.Sprintf("%s#%d", e.name, e.life+1)
	}
	node := *e.self
	node.ID, node.Name = id, id
	data, err := node.Serialize()
	if err != nil {
		return nil, 0, err
	}
	lease, err := e.cli.Grant(call, int64(ttl/time.Second))
	if err != nil {
		return nil, 0, fmt.Errorf("etcd: grant this member's lease: %w", err)
	}
	key := e.prefix + id
	if _, err := e.cli.Put(call, key, string(data), clientv3.WithLease(lease.ID)); err != nil {
		_, _ = e.revoke(lease.ID)
		return nil, 0, fmt.Errorf("etcd: register this member: %w", err)
	}
	alive, err := e.cli.KeepAlive(life, lease.ID)
	if err != nil {
		_, _ = e.revoke(lease.ID)
		return nil, 0, fmt.Errorf("etcd: keep this member's lease: %w", err)
	}
	e.mu.Lock()
	e.key, e.lease = key, lease.ID
	e.life++
	e.mu.Unlock()
	rev, err := e.list(call)
	if err != nil {
		_, _ = e.revoke(lease.ID)
		return nil, 0, err
	}
	e.mu.Lock()
	e.lost, e.why, e.since = false, "", time.Now()
	e.mu.Unlock()
	e.publish()
	return alive, rev, nil
}

// revoke ends a lease this member holds no longer (its key goes with it),
// as far as etcd answers within a second: whether etcd has it no more.
func (e *etcdProvider) revoke(id clientv3.LeaseID) (bool, error) {
	ctx, done := context.WithTimeout(context.Background(), time.Second)
	defer done()
	_, err := e.cli.Revoke(ctx, id)
	if err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return true, nil
	}
	return false, fmt.Errorf("etcd: revoke this member's last lease: %w", err)
}

// Membership is this member's place in the cluster now.
func (e *etcdProvider) Membership() MembershipState {
	e.mu.Lock()
	defer e.mu.Unlock()
	id := e.name
	if e.key != "" {
		id = strings.TrimPrefix(e.key, e.prefix)
	}
	return MembershipState{In: !e.lost, Since: e.since, Why: e.why, Life: e.life, ID: id}
}

// run keeps this member in the cluster: it serves a life (renewals and the
// watch) until the lease is lost, then joins again as soon as etcd lets it,
// for as long as the member runs.
func (e *etcdProvider) run(ctx, life context.Context, end context.CancelFunc, alive <-chan *clientv3.LeaseKeepAliveResponse, rev int64) {
	defer close(e.stopped)
	for {
		why := e.serve(life, end, alive, rev)
		end()
		if ctx.Err() != nil {
			return
		}
		e.dropped(why)
		var ok bool
		if life, end, alive, rev, ok = e.rejoin(ctx); !ok {
			return
		}
	}
}

// rejoin registers this member again, trying every e.retry until etcd lets
// it or ctx ends (then ok is false).
func (e *etcdProvider) rejoin(ctx context.Context) (life context.Context, end context.CancelFunc, alive <-chan *clientv3.LeaseKeepAliveResponse, rev int64, ok bool) {
	wait := e.retry
	if wait <= 0 {
		wait = 500 * time.Millisecond
	}
	old, revoked := e.lease, false
	for tries := 1; ; tries++ {
		var err error
		if !revoked {
			// the old lease may still be alive in etcd (an etcd that
			// restarted grants its leases their time again): its key goes
			// now, not when it runs out. Until etcd answers that, it is
			// asked again every try, and nothing else (a short call: the
			// member joins within a second or so of etcd's return)
			revoked, err = e.revoke(old)
		}
		if revoked {
			call, done := context.WithTimeout(ctx, 3*time.Second)
			life, end = context.WithCancel(ctx)
			alive, rev, err = e.register(call, life)
			done()
			if err == nil {
				e.log.Warn("this cluster member is back in the cluster: etcd answers again", "member", e.key, "life", e.life, "tries", tries)
				return life, end, alive, rev, true
			}
			end()
			if e.lease != old {
				// registered, then failed to list: that lease goes too
				old, revoked = e.lease, false
			}
		}
		if ctx.Err() != nil {
			return nil, nil, nil, 0, false
		}
		if tries == 1 || tries%30 == 0 {
			e.log.Warn("this cluster member is out of the cluster and cannot join again yet; it keeps trying", "etcd", e.cfg.Endpoints, "tries", tries, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, nil, nil, 0, false
		case <-time.After(wait):
		}
	}
}

// serve follows one life (until lifeCtx ends; end ends it): the lease's renewals, and the members' keys from
// rev on (a watch that breaks, on compaction or a lost connection, lists
// them again and goes on from there). It returns why the life ended: the
// renewals stopped (etcd no longer has the lease, or did not answer for
// the lease's whole length, after which the others may have dropped this
// member) or etcd deleted this member's key.
func (e *etcdProvider) serve(lifeCtx context.Context, end context.CancelFunc, alive <-chan *clientv3.LeaseKeepAliveResponse, rev int64) string {
	var (
		whyMu sync.Mutex
		why   string
	)
	lose := func(w string) {
		whyMu.Lock()
		if why == "" {
			why = w
		}
		whyMu.Unlock()
		end()
	}
	go func() {
		for range alive {
		}
		lose("etcd did not renew its lease: etcd did not answer for the lease's whole length, or dropped it")
	}()
	for lifeCtx.Err() == nil {
		for resp := range e.cli.Watch(clientv3.WithRequireLeader(lifeCtx), e.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
			if err := resp.Err(); err != nil {
				e.log.Warn("etcd: the watch of the cluster's members broke; listing them again", "err", err)
				break
			}
			e.mu.Lock()
			for _, ev := range resp.Events {
				key := string(ev.Kv.Key)
				switch ev.Type {
				case clientv3.EventTypePut:
					if n, err := etcd.NewNodeFromBytes(ev.Kv.Value); err == nil {
						e.members[key] = n
					}
				case clientv3.EventTypeDelete:
					delete(e.members, key)
				}
			}
			e.mu.Unlock()
			rev = resp.Header.Revision
			if _, listed := e.snapshot(); !listed {
				lose("etcd deleted its key")
				break
			}
			e.publish()
		}
		if lifeCtx.Err() != nil {
			break
		}
		select {
		case <-lifeCtx.Done():
		case <-time.After(time.Second):
		}
		call, done := context.WithTimeout(lifeCtx, 10*time.Second)
		r, err := e.list(call)
		done()
		if err != nil {
			if lifeCtx.Err() == nil {
				e.log.Warn("etcd: list the cluster's members", "err", err)
			}
			continue
		}
		rev = r
		if _, listed := e.snapshot(); !listed {
			lose("etcd no longer lists it")
			break
		}
		e.publish()
	}
	whyMu.Lock()
	defer whyMu.Unlock()
	return why
}

// StartClient: a daemon is always a member.
func (e *etcdProvider) StartClient(*cluster.Cluster) error {
	return errors.New("etcd: a lazy daemon joins as a member, never as a client")
}

// list reads every member's key and returns the revision it read at.
func (e *etcdProvider) list(ctx context.Context) (int64, error) {
	resp, err := e.cli.Get(ctx, e.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("etcd: list the cluster's members: %w", err)
	}
	members := map[string]*etcd.Node{}
	for _, kv := range resp.Kvs {
		if n, err := etcd.NewNodeFromBytes(kv.Value); err == nil {
			members[string(kv.Key)] = n
		} else {
			e.log.Warn("a cluster member's key in etcd is not a member", "key", string(kv.Key), "err", err)
		}
	}
	e.mu.Lock()
	e.members = members
	e.mu.Unlock()
	return resp.Header.Revision, nil
}

// dropped takes this member out of its own view once its lease is lost:
// the others have dropped it, or will once etcd answers them, and a member
// that still placed tasks on itself would host them twice. It hosts
// nothing and refuses calls until it has joined again.
func (e *etcdProvider) dropped(why string) {
	e.mu.Lock()
	first := !e.lost && !e.closing
	e.lost, e.why, e.since = true, why, time.Now()
	e.mu.Unlock()
	if first {
		e.log.Error("this cluster member is out of the cluster ("+why+"): it hosts no task and refuses calls until it has joined again, which it does by itself as soon as etcd answers (check that etcd runs and this host reaches it)",
			"member", e.key, "etcd", e.cfg.Endpoints)
	}
	e.publish()
}

// snapshot is the members as this member sees them, in key order, and
// whether etcd lists this member.
func (e *etcdProvider) snapshot() ([]*cluster.Member, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	keys := make([]string, 0, len(e.members))
	for k := range e.members {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []*cluster.Member
	listed := false
	for _, k := range keys {
		if k == e.key {
			listed = true
			if e.lost {
				continue
			}
		}
		out = append(out, e.members[k].MemberStatus())
	}
	return out, listed
}

// publish hands the members to protoactor (one at a time: the watch and
// the lease's end both publish).
func (e *etcdProvider) publish() {
	e.mu.Lock()
	closing := e.closing
	e.mu.Unlock()
	if closing {
		return
	}
	e.pub.Lock()
	defer e.pub.Unlock()
	members, _ := e.snapshot()
	e.c.MemberList.UpdateClusterTopology(members)
}

func (e *etcdProvider) Shutdown(bool) error {
	if e.cli == nil {
		return nil
	}
	e.mu.Lock()
	e.closing = true
	e.mu.Unlock()
	// stop first: a rejoin under way ends, and its lease is the one revoked
	if e.cancel != nil {
		e.cancel()
	}
	if e.stopped != nil {
		select {
		case <-e.stopped:
		case <-time.After(5 * time.Second):
		}
	}
	ctx, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	// the others see it leave at once, not when the lease runs out
	e.mu.Lock()
	lease, key := e.lease, e.key
	e.mu.Unlock()
	var err error
	if _, rerr := e.cli.Revoke(ctx, lease); rerr != nil {
		_, err = e.cli.Delete(ctx, key)
	}
	if cerr := e.cli.Close(); err == nil {
		err = cerr
	}
	return err
}
