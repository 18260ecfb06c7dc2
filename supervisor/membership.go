package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
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
// leaves its own view only when etcd has really dropped it (its lease lost:
// then the others have dropped it too, and it says so: restart it).
type etcdProvider struct {
	base string
	cfg  clientv3.Config
	ttl  time.Duration
	log  *slog.Logger

	cli     *clientv3.Client
	c       *cluster.Cluster
	prefix  string
	key     string
	lease   clientv3.LeaseID
	cancel  context.CancelFunc
	stopped chan struct{}

	pub     sync.Mutex // one publish at a time, of the members as they are then
	mu      sync.Mutex
	members map[string]*etcd.Node // by key
	lost    bool                  // etcd dropped this member
	closing bool
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
	name := c.Config.Name + "@" + c.ActorSystem.ID
	self := etcd.NewNode(name, host, port, c.GetClusterKinds())
	data, err := self.Serialize()
	if err != nil {
		return err
	}
	e.prefix = e.base + "/" + c.Config.Name + "/"
	e.key = e.prefix + name
	ttl := e.ttl
	if ttl <= 0 {
		ttl = memberLease
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	call, done := context.WithTimeout(ctx, 30*time.Second)
	defer done()
	lease, err := cli.Grant(call, int64(ttl/time.Second))
	if err != nil {
		return fmt.Errorf("etcd: grant this member's lease: %w", err)
	}
	e.lease = lease.ID
	if _, err := cli.Put(call, e.key, string(data), clientv3.WithLease(lease.ID)); err != nil {
		return fmt.Errorf("etcd: register this member: %w", err)
	}
	alive, err := cli.KeepAlive(ctx, lease.ID)
	if err != nil {
		return fmt.Errorf("etcd: keep this member's lease: %w", err)
	}
	rev, err := e.list(call)
	if err != nil {
		return err
	}
	e.publish()
	e.stopped = make(chan struct{})
	go e.keep(ctx, alive)
	go e.watch(ctx, rev)
	return nil
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

// keep consumes the lease's renewals. The channel closes when the member
// stops, or when etcd no longer has the lease: it did not hear from this
// member for the lease's whole length, deleted its key, and every other
// member has dropped it for good.
func (e *etcdProvider) keep(ctx context.Context, alive <-chan *clientv3.LeaseKeepAliveResponse) {
	for range alive {
	}
	if ctx.Err() != nil {
		return
	}
	e.dropped("its lease ran out")
}

// dropped takes this member out of its own view once etcd has dropped it:
// the others have, and a member that still placed tasks on itself would
// host them twice.
func (e *etcdProvider) dropped(why string) {
	e.mu.Lock()
	first := !e.lost && !e.closing
	e.lost = true
	e.mu.Unlock()
	if first {
		e.log.Error("etcd dropped this cluster member ("+why+"): the other members will not take it back, and it hosts no task now; restart the daemon to rejoin (check that etcd answers, and the machine's load)",
			"member", e.key)
	}
	e.publish()
}

// watch follows the members' keys from rev on; a watch that breaks
// (compaction, a lost connection) lists them again and goes on from there.
func (e *etcdProvider) watch(ctx context.Context, rev int64) {
	defer close(e.stopped)
	for ctx.Err() == nil {
		for resp := range e.cli.Watch(clientv3.WithRequireLeader(ctx), e.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
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
				e.dropped("its key was deleted")
				continue
			}
			e.publish()
		}
		if ctx.Err() != nil {
			return
		}
		time.Sleep(time.Second)
		call, done := context.WithTimeout(ctx, 10*time.Second)
		r, err := e.list(call)
		done()
		if err != nil {
			e.log.Warn("etcd: list the cluster's members", "err", err)
			continue
		}
		rev = r
		e.publish()
	}
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
	ctx, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	// the others see it leave at once, not when the lease runs out
	var err error
	if _, rerr := e.cli.Revoke(ctx, e.lease); rerr != nil {
		_, err = e.cli.Delete(ctx, e.key)
	}
	if e.cancel != nil {
		e.cancel()
	}
	if e.stopped != nil {
		select {
		case <-e.stopped:
		case <-time.After(5 * time.Second):
		}
	}
	if cerr := e.cli.Close(); err == nil {
		err = cerr
	}
	return err
}
