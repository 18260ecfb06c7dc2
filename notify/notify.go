// Package notify tells the user when a task needs them (CONTRACT §17): it
// follows the daemon's event hub, turns a task that became blocked or
// conflicted, failed, or tripped a wire into a Notice, and hands it to the
// configured webhook (an HTTP POST of the Notice's JSON) and command (run
// with the same JSON on its standard input), retrying with backoff.
//
// It never blocks what it follows: notices wait in a bounded queue drained
// by their own goroutine (full: the oldest goes, with a log line), and the
// hub drops what a slow watcher does not take. A Notice holds only what
// the daemon made — the event, the task's ref, its status and the review
// page's address on the dashboard (no token) — never text an agent wrote,
// a credential, a placeholder or the event's detail. It must not import the
// actors or the store: the daemon wires it.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"lazy/api"
)

// Event is what a notice says happened.
type Event string

// The events a notice is sent for.
const (
	// NeedsReview: the task became blocked or conflicted and waits for the reviewer.
	NeedsReview Event = "needs_review"
	// Failed: a work turn could not run or crashed.
	Failed Event = "failed"
	// Tripwire: the task tripped a wire; its grant was revoked.
	Tripwire Event = "tripwire"
)

// Notice is the JSON every webhook and command gets: exactly these fields.
type Notice struct {
	Event  Event  `json:"event"`
	Task   string `json:"task"`   // the task's ref (its code, else its short id)
	Status string `json:"status"` // the task's status
	URL    string `json:"url"`    // the task's review page on the dashboard (log in to open it)
}

// Of is the notice event a hub event calls for, if any: a status event
// to blocked or conflict, to failed, and a tripwire.
func Of(e api.Event) (Event, bool) {
	switch e.Kind {
	case api.EventStatus:
		switch e.Status {
		case "blocked", "conflict":
			return NeedsReview, true
		case "failed":
			return Failed, true
		}
	case api.EventTripwire:
		return Tripwire, true
	}
	return "", false
}

// Targets are who is told, as the config in force says now.
type Targets struct {
	Webhook string   // an http(s) URL; "" none
	Command []string // argv; nil none
}

// Options build a Notifier. Targets and ReviewURL are required.
type Options struct {
	// Targets is read at each notice, so a config change applies to the next.
	Targets func() Targets
	// ReviewURL is the review page of a task (by full id) on the dashboard.
	ReviewURL func(taskID string) string
	// Status is a task's status now (a tripwire event carries none).
	Status func(ctx context.Context, taskID string) (string, error)
	// Dir and Env are where the command runs and its whole environment.
	Dir string
	Env []string
	Log *slog.Logger

	Queue    int           // notices waiting at most (0: 64)
	Attempts int           // tries per target, the first included (0: 5)
	Backoff  time.Duration // wait after the first failed try, doubled after each (0: 500 ms)
	Timeout  time.Duration // one try's bound, the webhook's answer or the command's run (0: 10 s)
	// Settle is how long a blocked, conflict or failed notice waits for a
	// later status of its task, which drops it (0: 250 ms): a task
	// cancelled while it runs records its turn failed, then cancelled; a
	// turn that ends blocked with another queued starts it at once.
	Settle time.Duration
}

// Notifier delivers notices. Build it with New, feed it with Run.
type Notifier struct {
	o      Options
	client *http.Client

	mu    sync.Mutex
	queue []pending
	wake  chan struct{}
}

type pending struct {
	n      Notice
	taskID string
	due    time.Time
}

// New checks the options and fills the defaults.
func New(o Options) (*Notifier, error) {
	if o.Targets == nil || o.ReviewURL == nil {
		return nil, errors.New("notify: Targets and ReviewURL are required")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Queue <= 0 {
		o.Queue = 64
	}
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	if o.Backoff <= 0 {
		o.Backoff = 500 * time.Millisecond
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Settle <= 0 {
		o.Settle = 250 * time.Millisecond
	}
	tr := &http.Transport{
		Proxy:                 nil, // the daemon's environment does not route notices
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: o.Timeout,
		MaxIdleConns:          2,
		IdleConnTimeout:       time.Minute,
	}
	client := &http.Client{Transport: tr, Timeout: o.Timeout,
		// a redirect is not followed: the notice goes where the config says, or nowhere
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &Notifier{o: o, client: client, wake: make(chan struct{}, 1)}, nil
}

// Run follows events until ctx ends or the channel closes, delivering on
// a goroutine of its own. It returns when both have stopped.
func (n *Notifier) Run(ctx context.Context, events <-chan api.Event) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.deliverLoop(ctx)
	}()
	defer func() {
		cancel()
		<-done
		n.mu.Lock()
		if left := len(n.queue); left > 0 {
			n.o.Log.Warn("notices not sent: the daemon stopped", "count", left)
		}
		n.queue = nil
		n.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-events:
			if !ok {
				return
			}
			n.take(e)
		}
	}
}

// take queues the notice e calls for; a status event first drops the
// status notices of its task still waiting to settle.
func (n *Notifier) take(e api.Event) {
	ev, ok := Of(e)
	if e.Kind != api.EventStatus && !ok {
		return
	}
	if e.TaskID == "" || e.TaskRef == "" {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if e.Kind == api.EventStatus {
		now := time.Now()
		kept := n.queue[:0]
		for _, p := range n.queue {
			if p.taskID == e.TaskID && p.n.Event != Tripwire && now.Before(p.due) {
				n.o.Log.Debug("notice dropped: the task moved on", "task", p.n.Task, "event", p.n.Event, "now", e.Status)
				continue
			}
			kept = append(kept, p)
		}
		n.queue = kept
	}
	if !ok {
		return
	}
	p := pending{n: Notice{Event: ev, Task: e.TaskRef, Status: e.Status, URL: n.o.ReviewURL(e.TaskID)}, taskID: e.TaskID, due: time.Now()}
	if ev != Tripwire {
		p.due = p.due.Add(n.o.Settle)
	}
	if len(n.queue) >= n.o.Queue {
		old := n.queue[0]
		n.queue = n.queue[1:]
		n.o.Log.Warn("notice dropped: the queue is full (the webhook or command is slow or failing)", "task", old.n.Task, "event", old.n.Event, "queue", n.o.Queue)
	}
	n.queue = append(n.queue, p)
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// next waits for the queue's first notice to be due and takes it.
func (n *Notifier) next(ctx context.Context) (pending, bool) {
	for {
		n.mu.Lock()
		var wait time.Duration = -1
		if len(n.queue) > 0 {
			if wait = time.Until(n.queue[0].due); wait <= 0 {
				p := n.queue[0]
				n.queue = n.queue[1:]
				n.mu.Unlock()
				return p, true
			}
		}
		n.mu.Unlock()
		var timer <-chan time.Time
		var t *time.Timer
		if wait > 0 {
			t = time.NewTimer(wait)
			timer = t.C
		}
		select {
		case <-ctx.Done():
			return pending{}, false
		case <-n.wake:
		case <-timer:
		}
		if t != nil {
			t.Stop()
		}
	}
}

func (n *Notifier) deliverLoop(ctx context.Context) {
	for {
		p, ok := n.next(ctx)
		if !ok {
			return
		}
		n.deliver(ctx, p)
	}
}

// deliver sends one notice to every target at once and waits for them.
func (n *Notifier) deliver(ctx context.Context, p pending) {
	t := n.o.Targets()
	if t.Webhook == "" && len(t.Command) == 0 {
		return
	}
	if p.n.Event == Tripwire && n.o.Status != nil {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		s, err := n.o.Status(sctx, p.taskID)
		cancel()
		if err != nil {
			n.o.Log.Warn("read the tripped task's status for its notice", "task", p.n.Task, "err", err)
		}
		p.n.Status = s
	}
	body, err := json.Marshal(p.n)
	if err != nil {
		n.o.Log.Error("encode a notice", "err", err)
		return
	}
	log := n.o.Log.With("task", p.n.Task, "event", string(p.n.Event))
	var wg sync.WaitGroup
	if t.Webhook != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.retry(ctx, log.With("webhook", hostOf(t.Webhook)), func(ctx context.Context) error { return n.post(ctx, t.Webhook, body) })
		}()
	}
	if len(t.Command) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.retry(ctx, log.With("command", t.Command[0]), func(ctx context.Context) error { return n.run(ctx, t.Command, body) })
		}()
	}
	wg.Wait()
}

// permanent marks a failure another try would not change.
type permanent struct{ error }

// retry makes up to Attempts tries, waiting Backoff, then twice that, ...
// between them; a permanent failure ends it.
func (n *Notifier) retry(ctx context.Context, log *slog.Logger, try func(context.Context) error) {
	wait := n.o.Backoff
	for attempt := 1; ; attempt++ {
		err := try(ctx)
		if err == nil {
			if attempt > 1 {
				log.Info("notice delivered", "attempt", attempt)
			}
			return
		}
		var perm permanent
		if errors.As(err, &perm) || attempt >= n.o.Attempts || ctx.Err() != nil {
			log.Error("notice not delivered", "attempts", attempt, "err", err)
			return
		}
		log.Warn("notice not delivered yet; trying again", "attempt", attempt, "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// post is one try of the webhook: a 2xx delivers it; 408, 429 and 5xx
// are tried again, any other answer is not.
func (n *Notifier) post(ctx context.Context, webhook string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, webhook, bytes.NewReader(body))
	if err != nil {
		return permanent{errors.New("notify.webhook is not a URL a request can be made to")}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "lazy-notify")
	resp, err := n.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error quotes the whole URL, which may hold the receiver's secret
		}
		return fmt.Errorf("POST: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // the connection is reused
	resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return nil
	case c == http.StatusRequestTimeout || c == http.StatusTooManyRequests || c >= 500:
		return fmt.Errorf("the webhook answered %s", resp.Status)
	case c >= 300 && c < 400:
		return permanent{fmt.Errorf("the webhook answered %s (a redirect, not followed): set notify.webhook to where it points", resp.Status)}
	default:
		return permanent{fmt.Errorf("the webhook answered %s: check notify.webhook", resp.Status)}
	}
}

// run is one try of the command: the notice on its standard input, in its
// own process group (killed whole at the timeout), the environment given.
func (n *Notifier) run(ctx context.Context, argv []string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, n.o.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = n.o.Dir, n.o.Env
	if cmd.Env == nil {
		cmd.Env = []string{} // never the daemon's own
	}
	cmd.Stdin = bytes.NewReader(body)
	out := &capped{max: 2 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second // a child left holding its output does not hold the notifier
	err := cmd.Run()
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ctx.Err() != nil {
		err = fmt.Errorf("killed after %s", n.o.Timeout)
	} else if errors.Is(err, exec.ErrNotFound) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EACCES) {
		return permanent{fmt.Errorf("%w: check notify.command", err)}
	}
	if s := strings.TrimSpace(out.String()); s != "" {
		err = fmt.Errorf("%w; it said: %s", err, s)
	}
	return err
}

// capped keeps the first max bytes written to it.
type capped struct {
	buf bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *capped) String() string { return c.buf.String() }

// hostOf is a URL's scheme and host: its path and query may be the
// receiver's secret.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(not a URL)"
	}
	return u.Scheme + "://" + u.Host
}

// CommandEnv is the command's environment out of the daemon's: what a
// program needs to run and reach the user's desktop, nothing of lazy's
// own (no LAZY_ setting, no credential variable).
func CommandEnv(environ []string) []string {
	keep := map[string]bool{"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "LANG": true, "LC_ALL": true, "TZ": true, "TERM": true,
		"DISPLAY": true, "WAYLAND_DISPLAY": true, "DBUS_SESSION_BUS_ADDRESS": true, "XDG_RUNTIME_DIR": true}
	var out []string
	for _, kv := range environ {
		if k, _, ok := strings.Cut(kv, "="); ok && keep[k] {
			out = append(out, kv)
		}
	}
	return out
}
