package daemon

import (
	"context"
	"log/slog"
	"net/http"
	"sort"

	"lazy/api"
	"lazy/store"
	"lazy/task"
)

// egressBook records each egress connection of a task (CONTRACT §15) as a
// row in the store, attributed to the turn running then, so the review
// page's network section survives a restart and reads the same on every
// member of a cluster.
type egressBook struct {
	st    store.Store
	log   *slog.Logger
	turns *usageBook // the turn running now, per task
}

// record takes one egress traffic event of a task.
func (b *egressBook) record(tr api.Traffic) {
	if tr.TaskID == "" {
		return // the TCP listener: no task, refused
	}
	c := store.EgressCall{ID: task.NewID(tr.Time), TaskID: tr.TaskID, Method: tr.Method, Dest: tr.Dest, Path: tr.Path,
		Status: tr.Status, Refused: tr.Refused, BytesUp: tr.BytesUp, BytesDown: tr.BytesDown, Millis: tr.Millis, At: tr.Time}
	if b.turns != nil {
		c.Turn = b.turns.turnOf(tr.TaskID)
	}
	if err := b.st.AddEgress(context.Background(), &c); err != nil {
		b.log.Error("egress: record a connection", "task", tr.TaskRef, "err", err)
	}
}

// turnOf is the number of the task's turn running now (0: none).
func (b *usageBook) turnOf(taskID string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.running[taskID]
}

// network is a task's egress as the review page shows it.
func network(ctx context.Context, st store.Store, taskID string) (*api.Network, error) {
	calls, err := st.ListEgress(ctx, taskID)
	if err != nil {
		return nil, err
	}
	return networkOf(calls), nil
}

// networkOf sums a task's egress calls by destination and lists its
// refusals, the newest api.MaxNetRefusals of them.
func networkOf(calls []store.EgressCall) *api.Network {
	n := &api.Network{Destinations: []api.NetDest{}, Refusals: []api.NetRefusal{}}
	byDest := map[string]*api.NetDest{}
	for _, c := range calls {
		if c.Refused != "" {
			n.Refusals = append(n.Refusals, api.NetRefusal{At: c.At, Method: c.Method, Dest: c.Dest, Path: c.Path, Cause: c.Refused})
			continue
		}
		d := byDest[c.Dest]
		if d == nil {
			d = &api.NetDest{Dest: c.Dest}
			byDest[c.Dest] = d
		}
		d.Connections++
		if (c.Method == http.MethodConnect && c.Status != http.StatusOK) || c.Status == http.StatusBadGateway || c.Status == http.StatusGatewayTimeout {
			d.Failed++ // the proxy's own answer: the destination was not reached
		}
		d.BytesUp += c.BytesUp
		d.BytesDown += c.BytesDown
		if c.At.After(d.Last) {
			d.Last = c.At
		}
	}
	for _, d := range byDest {
		n.Destinations = append(n.Destinations, *d)
	}
	sort.Slice(n.Destinations, func(i, j int) bool {
		a, b := n.Destinations[i], n.Destinations[j]
		if a.BytesUp+a.BytesDown != b.BytesUp+b.BytesDown {
			return a.BytesUp+a.BytesDown > b.BytesUp+b.BytesDown
		}
		return a.Dest < b.Dest
	})
	if over := len(n.Refusals) - api.MaxNetRefusals; over > 0 {
		n.Refusals, n.RefusalsOmitted = n.Refusals[over:], over
	}
	return n
}
