package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"lazy/actors"
	"lazy/api"
	"lazy/config"
	"lazy/gitx"
	"lazy/store"
)

// ClusterStatus is what this member sees of its cluster: every member and
// what it hosts, and whether etcd and the shared store answer.
func (s *Service) ClusterStatus(ctx context.Context) (*api.ClusterStatus, error) {
	cfg := s.live.Get()
	if !cfg.Cluster.Enabled() || !s.sup.Clustered() {
		return nil, usage("this daemon is not in a cluster: set [cluster] name, etcd and advertise, and storage.backend = \"postgres\" (docs/SCALE-OUT.md), then restart it")
	}
	out := &api.ClusterStatus{Name: cfg.Cluster.Name, Links: "plaintext", Members: []api.ClusterMember{}}
	if s.links != nil {
		out.Links = "mutual TLS"
	}
	ms := s.sup.Membership()
	out.Membership = api.ClusterMembership{In: ms.In, Since: ms.Since.UTC().Format(time.RFC3339), Why: ms.Why, ID: ms.ID, Life: ms.Life}
	for _, m := range s.sup.MemberInfos() {
		cm := api.ClusterMember{ID: m.ID, Address: m.Address, Self: m.Self, Error: m.Error, Tasks: []string{}}
		if i := m.Info; i != nil {
			cm.BaseURL, cm.PID, cm.Version = i.GetBaseUrl(), int(i.GetPid()), i.GetVersion()
			cm.Grains, cm.RunningTurns = int(i.GetGrains()), int(i.GetRunningTurns())
			if n := i.GetCertNotAfter(); n != 0 {
				cm.CertExpires = time.Unix(n, 0).UTC().Format(time.RFC3339)
			}
			cm.Tasks = append(cm.Tasks, i.GetTasks()...)
			sort.Strings(cm.Tasks)
		}
		out.Members = append(out.Members, cm)
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	if s.links != nil {
		hc.Transport = &http.Transport{TLSClientConfig: s.links.Client.Clone()}
	}
	for _, ep := range cfg.Cluster.Etcd {
		h := api.Health{Endpoint: ep}
		url := ep + "/health"
		if !strings.HasPrefix(ep, "https://") {
			url = "http://" + url
		}
		resp, err := hc.Get(url)
		switch {
		case err != nil:
			h.Error = err.Error()
		case resp.StatusCode != http.StatusOK:
			h.Error = resp.Status
		default:
			h.OK = true
		}
		if resp != nil {
			resp.Body.Close()
		}
		out.Etcd = append(out.Etcd, h)
	}
	out.Store = api.Health{OK: true}
	if p, ok := s.st.(interface{ Ping(context.Context) error }); ok {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := p.Ping(pctx); err != nil {
			out.Store = api.Health{Error: err.Error()}
		}
	}
	return out, nil
}

// clusterRemote is the git remote task branches travel through ("" when
// not in a cluster).
func clusterRemote(cfg *config.Config) string {
	if !cfg.Cluster.Enabled() {
		return ""
	}
	return cfg.Cluster.Remote
}

// followEvery bounds how often a member fetches a task's branches from the
// cluster's remote for its pages and commands, unless the task changed
// since.
const followEvery = time.Second

// follow brings a task's branch and parent from the cluster's git remote
// before this member reads them (another member may host the task). Outside
// a cluster it does nothing; a fetch that fails is logged and the member
// shows what it has.
func (s *Service) follow(ctx context.Context, t *store.Task) {
	if s.remote == "" {
		return
	}
	for {
		s.fetchMu.Lock()
		f := s.fetched[t.ID]
		if f != nil && f.running != nil {
			// a fetch is under way: wait for it, then look again (it may
			// have begun before the row this caller read was written)
			ch := f.running
			s.fetchMu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return
			}
		}
		// the host pushes before it records the job's end, so a fetch begun
		// after this row was read has the row's commits: due when the row
		// changed since the last fetch began (the row's own time, compared
		// with itself: no two members' clocks are compared), or a while
		// has passed
		if f != nil && f.row.Equal(t.UpdatedAt) && time.Since(f.at) <= followEvery {
			s.fetchMu.Unlock()
			return
		}
		if s.fetched == nil {
			s.fetched = map[string]*following{}
		}
		f = &following{at: time.Now(), row: t.UpdatedAt, running: make(chan struct{})}
		s.fetched[t.ID] = f
		s.fetchMu.Unlock()
		if err := gitx.Fetch(ctx, s.paths.Root, s.remote, t.Parent, t.Branch); err != nil {
			s.log.Warn("fetch from the cluster's git remote", "err", err)
		}
		for _, b := range []string{t.Parent, t.Branch} {
			if err := gitx.Follow(ctx, s.paths.Root, s.remote, b); err != nil {
				s.log.Warn("follow the cluster's git remote", "branch", b, "err", err)
			}
		}
		s.fetchMu.Lock()
		close(f.running)
		f.running = nil
		s.fetchMu.Unlock()
		return
	}
}

// following is a member's last fetch of a task's branches.
type following struct {
	at  time.Time // when it began, by this member's clock
	row time.Time // the task row's UpdatedAt the caller had read
	// running is closed when the fetch ends (nil: ended)
	running chan struct{}
}

// agentHomes is where a cluster keeps its tasks' agent homes (nil for a
// single daemon).
func agentHomes(cfg *config.Config, st store.Store) actors.HomeStore {
	if h, ok := st.(actors.HomeStore); ok && cfg.Cluster.Enabled() {
		return h
	}
	return nil
}

// taskLeases, in a cluster, are the shared store's task leases, which fence
// each task's writes by its host's epoch, and the name this process holds
// them under: its host, pid and a random word, so a member restarted at
// once waits for the leases of its last life to run out like any other
// member would. nil outside a cluster: one daemon takes no lease.
func taskLeases(cfg *config.Config, st store.Store) (store.Leases, string) {
	ls, ok := st.(store.Leases)
	if !ok || !cfg.Cluster.Enabled() {
		return nil, ""
	}
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return ls, fmt.Sprintf("%s (%s pid %d %s)", cfg.Cluster.Advertise, host, os.Getpid(), hex.EncodeToString(b[:]))
}
