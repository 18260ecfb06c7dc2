package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"lazy/api"
	"lazy/proxy"
	"lazy/store"
	"lazy/task"
)

// usageBook counts what each task's model calls cost: every call is a row
// in the store, and the book keeps each task's totals (and the turn that is
// running) in memory, so the proxy checks a budget without touching disk.
// The rows are written behind the calls, in batches (usageRows): a call's
// reply never waits for its row.
// It also holds the reservations of the calls on their way (reserve): a
// call leaves only while the task's charged and held tokens are under its
// budget, and its traffic event (record) gives its hold back and charges
// what it cost.
type usageBook struct {
	st   store.Store
	log  *slog.Logger
	rows *usageRows

	// tasks: task id → *taskUsage, loaded once (read without mu: every
	// call looks its task up)
	tasks sync.Map

	mu      sync.Mutex     // the counts of every taskUsage, running, byRole
	running map[string]int // task id → number of the turn running now
	byRole  map[string]*api.Usage

	// writer is this process's mark on its rows (store.UsageCall.Writer).
	// ttl, in a cluster, is how long a task's budget and the rows other
	// writers (other members, this member's earlier lives) put in the
	// shared store are taken as read: past it they are read again (0: a
	// single daemon, whose own counts are all there is)
	writer string
	ttl    time.Duration
}

// usageTTL is how long a cluster member takes a task's budget and the
// other members' usage as read: a budget set through another member is
// enforced here within it (at once when its event arrives).
const usageTTL = 2 * time.Second

// usageCount is the calls of a task from one source.
type usageCount struct {
	total, lastTurn api.Usage
	lastTurnNo      int
}

func (c *usageCount) add(call store.UsageCall) {
	addCall(&c.total, call)
	if call.Turn != 0 {
		if call.Turn != c.lastTurnNo {
			c.lastTurn, c.lastTurnNo = api.Usage{}, call.Turn
		}
		addCall(&c.lastTurn, call)
	}
}

type taskUsage struct {
	// mine are the calls this process counted; others the rows other
	// writers put in the store, as last read; total and lastTurn both
	mine, others    usageCount
	total, lastTurn api.Usage
	lastTurnNo      int
	budget          int64
	// readAt is when others and budget were read (unix ns; read without
	// b.mu on the proxy's path); refreshing: a read is on its way
	readAt     atomic.Int64
	refreshing atomic.Bool
	// held: the reservations of the task's calls on their way
	held int64
	// spent (charged + held) and limit (the budget) as they were when
	// b.mu was last let go (mirror), for overBudget's look without it
	spent, limit atomic.Int64
}

// mirror publishes the counts overBudget reads without b.mu; b.mu held.
func (u *taskUsage) mirror() {
	u.spent.Store(u.total.ChargedTokens + u.held)
	u.limit.Store(u.budget)
}

// newUsageBook starts the book and its row writer; close writes the rows
// still waiting. ttl: see usageBook.ttl.
func newUsageBook(st store.Store, log *slog.Logger, ttl time.Duration) *usageBook {
	return &usageBook{st: st, log: log, rows: newUsageRows(st, log), running: map[string]int{}, byRole: map[string]*api.Usage{},
		writer: task.NewID(time.Now()), ttl: ttl}
}

// combine sums mine and others into total and lastTurn; b.mu held.
func (u *taskUsage) combine() {
	u.total = sumUsage(u.mine.total, u.others.total)
	switch {
	case u.mine.lastTurnNo > u.others.lastTurnNo:
		u.lastTurn, u.lastTurnNo = u.mine.lastTurn, u.mine.lastTurnNo
	case u.mine.lastTurnNo < u.others.lastTurnNo:
		u.lastTurn, u.lastTurnNo = u.others.lastTurn, u.others.lastTurnNo
	default:
		u.lastTurn, u.lastTurnNo = sumUsage(u.mine.lastTurn, u.others.lastTurn), u.mine.lastTurnNo
	}
}

func sumUsage(a, b api.Usage) api.Usage {
	return api.Usage{Requests: a.Requests + b.Requests, InputTokens: a.InputTokens + b.InputTokens, OutputTokens: a.OutputTokens + b.OutputTokens,
		CacheReadInputTokens: a.CacheReadInputTokens + b.CacheReadInputTokens, CacheCreationInputTokens: a.CacheCreationInputTokens + b.CacheCreationInputTokens,
		ChargedTokens: a.ChargedTokens + b.ChargedTokens}
}

// read reads a task's budget and the rows of other writers from the store.
func (b *usageBook) read(ctx context.Context, taskID string) (budget int64, others usageCount, err error) {
	t, err := b.st.GetTask(ctx, taskID)
	if err != nil {
		return 0, others, err
	}
	calls, err := b.st.ListUsage(ctx, taskID)
	if err != nil {
		return 0, others, err
	}
	for _, c := range calls {
		if c.Writer != b.writer {
			others.add(c)
		}
	}
	return t.BudgetTokens, others, nil
}

// refresh reads the task's budget and the other writers' rows again.
func (b *usageBook) refresh(ctx context.Context, taskID string, u *taskUsage) {
	if !u.refreshing.CompareAndSwap(false, true) {
		return // one read at a time
	}
	defer u.refreshing.Store(false)
	budget, others, err := b.read(ctx, taskID)
	if err != nil {
		b.log.Warn("usage: read the task's budget and usage from the store", "task", task.ShortID(taskID), "err", err)
		return
	}
	b.mu.Lock()
	u.budget, u.others = budget, others
	u.readAt.Store(time.Now().UnixNano())
	u.combine()
	u.mirror()
	b.mu.Unlock()
}

// stale: in a cluster, u was read from the store longer than ttl ago.
func (b *usageBook) stale(u *taskUsage) bool {
	return b.ttl > 0 && time.Since(time.Unix(0, u.readAt.Load())) > b.ttl
}

// close writes the rows that wait and stops the writer; a call recorded
// after it is written at once.
func (b *usageBook) close() { b.rows.close() }

// load reads a task's calls and budget from the store once.
func (b *usageBook) load(ctx context.Context, taskID string) (*taskUsage, error) {
	if u, ok := b.tasks.Load(taskID); ok {
		return u.(*taskUsage), nil
	}
	budget, others, err := b.read(ctx, taskID)
	if err != nil {
		return nil, err
	}
	u := &taskUsage{budget: budget, others: others}
	u.readAt.Store(time.Now().UnixNano())
	u.combine()
	u.mirror()
	cur, _ := b.tasks.LoadOrStore(taskID, u) // or the one loaded meanwhile
	return cur.(*taskUsage), nil
}

// add counts a call this process made; b.mu held.
func (u *taskUsage) add(c store.UsageCall) {
	u.mine.add(c)
	u.combine()
}

// current is the task's usage for the proxy's checks: as loaded, with a
// read of the store started behind it when that is stale (a cluster).
func (b *usageBook) current(taskID string) (*taskUsage, error) {
	u, err := b.load(context.Background(), taskID)
	if err == nil && b.stale(u) {
		go b.refresh(context.Background(), taskID, u)
	}
	return u, err
}

// addCall adds a row's calls to a count: its requests, and their tokens.
func addCall(x *api.Usage, c store.UsageCall) {
	x.Requests += c.Calls()
	x.ChargedTokens += c.Charged()
	x.InputTokens += c.InputTokens
	x.OutputTokens += c.OutputTokens
	x.CacheReadInputTokens += c.CacheReadInputTokens
	x.CacheCreationInputTokens += c.CacheCreationInputTokens
}

// record takes one proxied call of a task: a row in the store and the
// totals. Refused calls count as requests (a budget refusal too).
func (b *usageBook) record(tr api.Traffic) {
	if tr.TaskID == "" || tr.Refused == proxy.CauseTooManyConnections {
		return // a connection refused at the task's socket is no call
	}
	ctx := context.Background()
	u, err := b.load(ctx, tr.TaskID)
	if err != nil {
		b.log.Warn("usage: task not found", "task", tr.TaskRef, "err", err)
		return
	}
	c := store.UsageCall{TaskID: tr.TaskID, Role: tr.Role, Status: tr.Status, Refused: tr.Refused, At: tr.Time, Requests: 1, Writer: b.writer}
	if tr.Usage != nil {
		c.InputTokens, c.OutputTokens = tr.Usage.InputTokens, tr.Usage.OutputTokens
		c.CacheReadInputTokens, c.CacheCreationInputTokens = tr.Usage.CacheReadInputTokens, tr.Usage.CacheCreationInputTokens
	}
	if tr.Charged > c.InputTokens+c.OutputTokens {
		c.ChargedTokens = tr.Charged // cut before its reply ended: its hold
	}
	b.mu.Lock()
	u.held = max(u.held-tr.Reserved, 0)
	c.Turn = b.running[tr.TaskID]
	u.add(c)
	u.mirror()
	role := tr.Role
	if role == "" {
		role = "default"
	}
	r := b.byRole[role]
	if r == nil {
		r = &api.Usage{}
		b.byRole[role] = r
	}
	addCall(r, c)
	b.mu.Unlock()
	b.rows.add(c)
}

// follow tracks the running turn of each task from the actors' events.
func (b *usageBook) follow(ctx context.Context, events <-chan api.Event) {
	eachEvent(ctx, events, func(e api.Event) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e.Kind {
		case api.EventTurnStart:
			b.running[e.TaskID] = e.Turn
		case api.EventTurnEnd:
			if b.running[e.TaskID] == e.Turn {
				delete(b.running, e.TaskID)
			}
		case api.EventBudget:
			// set through whichever member: the store has it now
			if v, ok := b.tasks.Load(e.TaskID); ok {
				go b.refresh(context.Background(), e.TaskID, v.(*taskUsage))
			}
		}
	})
}

// overBudget is the proxy's first check of a task's call, before it reads
// the body: whether the task has used its budget, and the words of the
// refusal.
func (b *usageBook) overBudget(taskID string) (bool, string) {
	u, err := b.current(taskID)
	if err != nil {
		return false, ""
	}
	if limit := u.limit.Load(); limit <= 0 || u.spent.Load() < limit {
		return false, "" // under it as of the last change; no lock
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	why := u.over()
	return why != "", why
}

// over is why the task's next call is refused ("": it is not); b.mu held.
func (u *taskUsage) over() string {
	used := u.total.ChargedTokens
	if u.budget <= 0 || used+u.held < u.budget {
		return ""
	}
	if u.held > 0 {
		return fmt.Sprintf("the task's token budget is used up: %d of %d tokens (input + output) used and %d held by calls on their way; raise it with `lazy task budget <task> --tokens N`", used, u.budget, u.held)
	}
	return fmt.Sprintf("the task's token budget is used up: %d of %d tokens (input + output); raise it with `lazy task budget <task> --tokens N`", used, u.budget)
}

// reserve is the proxy's hold before a task's call leaves: while the task
// has budget left (its charged and held tokens under it), it holds what the
// call may cost (estimate, read outside the lock: it may read the request
// body) and returns it; else it says why the call is refused. A task with
// no budget holds nothing. The call's record gives the hold back.
func (b *usageBook) reserve(taskID string, estimate func() int64) (int64, string) {
	u, err := b.current(taskID)
	if err != nil {
		return 0, ""
	}
	b.mu.Lock()
	budget, why := u.budget, u.over()
	b.mu.Unlock()
	if budget <= 0 || why != "" {
		return 0, why
	}
	n := max(estimate(), 1)
	b.mu.Lock()
	defer b.mu.Unlock()
	if why := u.over(); why != "" {
		return 0, why // calls let through meanwhile took what was left
	}
	u.held += n
	u.mirror()
	return n, ""
}

// setBudget changes a task's budget in the book (the store has it already).
func (b *usageBook) setBudget(ctx context.Context, taskID string, tokens int64) {
	if u, err := b.load(ctx, taskID); err == nil {
		b.mu.Lock()
		u.budget = tokens
		u.mirror()
		b.mu.Unlock()
	}
}

// of is a task's usage for its wire form: totals, the last turn's, and the
// budget left.
func (b *usageBook) of(ctx context.Context, taskID string) (total, lastTurn *api.Usage, turn int) {
	u, err := b.load(ctx, taskID)
	if err != nil {
		return &api.Usage{}, nil, 0
	}
	if b.stale(u) {
		b.refresh(ctx, taskID, u) // what other members counted, as the store has it
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t := u.total
	if u.lastTurnNo != 0 {
		l := u.lastTurn
		return &t, &l, u.lastTurnNo
	}
	return &t, nil, 0
}

// roles is a copy of the counters by role, for /metrics.
func (b *usageBook) roles() map[string]api.Usage {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]api.Usage, len(b.byRole))
	for k, v := range b.byRole {
		out[k] = *v
	}
	return out
}

// usageFlushEvery is the longest a call's row waits in memory before the
// write that makes it durable begins. It is what a kill -9 can lose: the
// rows of the calls that ended in the last usageFlushEvery, and of those
// whose batch was being committed (one group commit of the store). Their
// counts, and what they charged of their task's budget, are then missing
// after the restart (the book is read back from the rows). A stop
// (`lazy daemon stop`, SIGTERM) writes every row first.
const usageFlushEvery = 50 * time.Millisecond

// usageBatchMax is the most rows a batch gathers before it is written,
// before usageFlushEvery is up.
const usageBatchMax = 1024

// usageRows writes the book's rows behind the calls: each call is added to
// its row of the batch in memory (a lock, a map lookup and a few sums on
// the proxy's path), and one goroutine writes the batch in one store write
// (one transaction, one commit) usageFlushEvery after its first call came.
// A batch has one row per task, turn, role, status and refusal cause
// (usageKey), counting its calls (store.UsageCall.Requests) and summing
// their tokens: under load a task's hundreds of calls of a batch are one
// row, and the store's work per call is nearly nothing.
type usageRows struct {
	st  store.Store
	log *slog.Logger

	mu     sync.Mutex
	rows   []*store.UsageCall // the batch's rows, in the order they began
	byKey  map[usageKey]*store.UsageCall
	closed bool

	wake chan struct{} // a batch began
	full chan struct{} // a batch reached usageBatchMax rows
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

// usageKey is what the calls of one row share.
type usageKey struct {
	task, role, refused string
	turn, status        int
}

func newUsageRows(st store.Store, log *slog.Logger) *usageRows {
	w := &usageRows{st: st, log: log, byKey: map[usageKey]*store.UsageCall{}, wake: make(chan struct{}, 1), full: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w
}

// add counts one call (c, of Requests 1) in its row of the batch (written
// at once after close).
func (w *usageRows) add(c store.UsageCall) {
	k := usageKey{task: c.TaskID, role: c.Role, refused: c.Refused, turn: c.Turn, status: c.Status}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		c.ID = task.NewID(c.At)
		w.write([]*store.UsageCall{&c})
		return
	}
	if row := w.byKey[k]; row != nil {
		row.Merge(c)
		w.mu.Unlock()
		return
	}
	row := &c
	row.ID = task.NewID(c.At)
	w.byKey[k] = row
	w.rows = append(w.rows, row)
	n := len(w.rows)
	w.mu.Unlock()
	signal := func(ch chan struct{}) {
		select {
		case ch <- struct{}{}:
		default: // one is pending already
		}
	}
	if n == 1 {
		signal(w.wake)
	}
	if n == usageBatchMax {
		signal(w.full)
	}
}

func (w *usageRows) loop() {
	defer close(w.done)
	t := time.NewTimer(usageFlushEvery)
	t.Stop()
	for {
		select {
		case <-w.wake:
		case <-w.quit:
			w.flush()
			return
		}
		t.Reset(usageFlushEvery)
		select {
		case <-t.C:
		case <-w.full:
			t.Stop()
		case <-w.quit:
			t.Stop()
			w.flush()
			return
		}
		w.flush()
	}
}

// flush writes every row waiting now.
func (w *usageRows) flush() {
	w.mu.Lock()
	rows := w.rows
	w.rows = nil
	clear(w.byKey)
	w.mu.Unlock()
	if len(rows) > 0 {
		w.write(rows)
	}
}

func (w *usageRows) write(rows []*store.UsageCall) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.st.AddUsage(ctx, rows...); err != nil {
		var calls int64
		for _, r := range rows {
			calls += r.Calls()
		}
		w.log.Error("usage: record model calls; their counts are in memory until the daemon restarts", "calls", calls, "err", err)
	}
}

// close writes what waits and stops the writer; closing twice is harmless.
func (w *usageRows) close() {
	w.once.Do(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		close(w.quit)
	})
	<-w.done
}
