package supervisor

import (
	"sync"
	"sync/atomic"
)

// watchCount counts watchers by the tasks they watch ("" for a watcher of
// every task), read on the proxy's path: while it is zero a read is one
// atomic load.
type watchCount struct {
	total atomic.Int64
	mu    sync.RWMutex
	by    map[string]int
}

// add counts a watcher of ids (none: every task) in or, with n = -1, out.
func (w *watchCount) add(ids map[string]bool, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.by == nil {
		w.by = map[string]int{}
	}
	keys := []string{""}
	if len(ids) > 0 {
		keys = keys[:0]
		for id := range ids {
			keys = append(keys, id)
		}
	}
	for _, k := range keys {
		if w.by[k] += n; w.by[k] <= 0 {
			delete(w.by, k)
		}
	}
	w.total.Add(int64(n))
}

// wants reports a watcher of the task or of every task.
func (w *watchCount) wants(taskID string) bool {
	if w.total.Load() <= 0 {
		return false
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.by[""] > 0 || w.by[taskID] > 0
}
