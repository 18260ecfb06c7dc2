package daemon

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"sync"
	"sync/atomic"

	"lazy/canary"
	"lazy/store"
)

// canaries is the daemon's memory of every sandbox home's decoys: the key
// they are derived from (the state dir's canary-key, 0600, or in a cluster
// the cluster's secret, so every member writes and looks for the same
// decoys) and the set the proxy scans requests with. Nothing is stored per
// task: a task's decoys are derived again from its id, so after a restart
// the set holds the decoys of every task not ended before the first
// request is served, and a decoy read before the restart is still caught.
type canaries struct {
	maker *canary.Maker
	mu    sync.Mutex // serialises additions
	set   atomic.Pointer[canary.Set]
}

// newCanaries loads (or makes) the key and the decoys of every live task.
// secret is the cluster's (nil outside a cluster).
func newCanaries(ctx context.Context, keyPath string, secret []byte, st store.Store) (*canaries, error) {
	var key []byte
	if secret != nil {
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte("lazy canary key"))
		key = mac.Sum(nil)
	} else {
		tok, err := ensureToken(keyPath)
		if err != nil {
			return nil, fmt.Errorf("canary key: %w", err)
		}
		key = []byte(tok)
	}
	c := &canaries{maker: canary.NewMaker(key)}
	tasks, err := st.ListTasks(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tasks for their decoys: %w", err)
	}
	marks := map[canary.Owner][]string{}
	for _, t := range tasks {
		if !t.Status.Ended() {
			marks[canary.Owner{TaskID: t.ID, Ref: t.Ref()}] = c.maker.For(t.ID).Marks
		}
	}
	c.set.Store(canary.NewSet(marks))
	return c, nil
}

// Set is the decoys the proxy looks for now.
func (c *canaries) Set() *canary.Set { return c.set.Load() }

// Decoys are the task's decoy files, its marks added to the set first: a
// decoy is looked for from before it is written.
func (c *canaries) Decoys(taskID, ref string) []canary.File {
	d := c.maker.For(taskID)
	c.mu.Lock()
	c.set.Store(c.set.Load().With(canary.Owner{TaskID: taskID, Ref: ref}, d.Marks))
	c.mu.Unlock()
	return d.Files
}
