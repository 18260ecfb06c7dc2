package daemon

import (
	"container/list"
	"sync"

	"lazy/api"
	"lazy/gitx"
)

// diffCacheBytes bounds what the review's diff cache holds (an estimate of
// the parsed diffs' size): a few large diffs, or many small ones.
const diffCacheBytes = 64 << 20

// diffKey is what a cached diff is a pure function of: the commits it runs
// between (ids, never names), how, and — for one file of it — the path.
type diffKey struct {
	from, to  string
	mergeBase bool
	path      string // "": the whole diff
}

// cachedDiff is a whole diff, or one file of one with its place in it.
type cachedDiff struct {
	diff  *gitx.Diff
	file  gitx.File
	index int
}

// diffCache is a least-recently-used cache of diffs bounded in bytes.
type diffCache struct {
	mu    sync.Mutex
	order list.List // of *diffEntry, most recent first
	byKey map[diffKey]*list.Element
	bytes int
	// making: the diffs being made, by key
	making map[diffKey]*making
}

// making is one diff being made; done closes when d and err are set.
type making struct {
	done chan struct{}
	d    *gitx.Diff
	err  error
}

// once is the whole diff of k: cached, or made by make — once, when
// several callers miss together — and cached.
func (c *diffCache) once(k diffKey, build func() (*gitx.Diff, error)) (*gitx.Diff, error) {
	if v, ok := c.get(k); ok {
		return v.diff, nil
	}
	c.mu.Lock()
	if m, ok := c.making[k]; ok {
		c.mu.Unlock()
		<-m.done
		return m.d, m.err
	}
	if c.making == nil {
		c.making = map[diffKey]*making{}
	}
	m := &making{done: make(chan struct{})}
	c.making[k] = m
	c.mu.Unlock()
	m.d, m.err = build()
	if m.err == nil {
		c.put(k, cachedDiff{diff: m.d}, diffSize(m.d.Files))
	}
	c.mu.Lock()
	delete(c.making, k)
	c.mu.Unlock()
	close(m.done)
	return m.d, m.err
}

type diffEntry struct {
	key  diffKey
	val  cachedDiff
	size int
}

func (c *diffCache) get(k diffKey) (cachedDiff, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[k]
	if !ok {
		return cachedDiff{}, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*diffEntry).val, true
}

func (c *diffCache) put(k diffKey, v cachedDiff, size int) {
	if size > diffCacheBytes/2 {
		return // one diff never takes the whole cache
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil {
		c.byKey = map[diffKey]*list.Element{}
	}
	if el, ok := c.byKey[k]; ok {
		c.bytes -= el.Value.(*diffEntry).size
		c.order.Remove(el)
	}
	c.byKey[k] = c.order.PushFront(&diffEntry{key: k, val: v, size: size})
	c.bytes += size
	for c.bytes > diffCacheBytes {
		el := c.order.Back()
		e := el.Value.(*diffEntry)
		c.order.Remove(el)
		delete(c.byKey, e.key)
		c.bytes -= e.size
	}
}

// diffSize estimates the memory of parsed files: their lines' text and a
// line's own fields.
func diffSize(files []gitx.File) int {
	n := 256
	for _, f := range files {
		n += 256 + len(f.NewPath) + len(f.OldPath)
		for _, h := range f.Hunks {
			n += 128 + len(h.Section)
			for _, l := range h.Lines {
				n += 64 + len(l.Text)
			}
		}
	}
	return n
}

// logCacheEntries bounds the commit lists kept (each a branch's commits
// its parent lacks: short).
const logCacheEntries = 512

// logCache keeps commit lists by "<from id>..<to id>": what a range of two
// commit ids holds never changes. Full, it starts over.
type logCache struct {
	mu sync.Mutex
	m  map[string][]api.CommitInfo
}

func (c *logCache) get(k string) ([]api.CommitInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return append([]api.CommitInfo{}, v...), ok
}

func (c *logCache) put(k string, v []api.CommitInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= logCacheEntries {
		c.m = map[string][]api.CommitInfo{}
	}
	c.m[k] = append([]api.CommitInfo{}, v...)
}
