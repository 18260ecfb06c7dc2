package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"lazy/api"
)

// hook is a webhook of the test: it records what it was sent and answers
// with the statuses given, then 200.
type hook struct {
	mu      sync.Mutex
	bodies  [][]byte
	times   []time.Time
	answers []int
	got     chan []byte
	arrived chan struct{}
	hold    chan struct{} // non-nil: every request waits for it to close
}

func newHook(t *testing.T, answers ...int) (*hook, *httptest.Server) {
	h := &hook{answers: answers, got: make(chan []byte, 64), arrived: make(chan struct{}, 64)}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.arrived <- struct{}{}
	if h.hold != nil {
		select {
		case <-h.hold:
		case <-r.Context().Done():
			return
		}
	}
	b, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.bodies, h.times = append(h.bodies, b), append(h.times, time.Now())
	code := http.StatusOK
	if len(h.answers) > 0 {
		code, h.answers = h.answers[0], h.answers[1:]
	}
	h.mu.Unlock()
	if r.Header.Get("Content-Type") != "application/json" || r.Method != http.MethodPost {
		code = http.StatusBadRequest
	}
	w.WriteHeader(code)
	if code == http.StatusOK {
		h.got <- b
	}
}

// logBuf is a log the test reads.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start runs a Notifier of o on a channel the test feeds.
func start(t *testing.T, o Options) (chan<- api.Event, *logBuf) {
	t.Helper()
	lb := &logBuf{}
	o.Log = slog.New(slog.NewTextHandler(io.MultiWriter(lb, tlog{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	if o.ReviewURL == nil {
		o.ReviewURL = func(id string) string { return "http://127.0.0.1:26010/review/" + id }
	}
	n, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan api.Event, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		n.Run(ctx, ch)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ch, lb
}

type tlog struct{ t *testing.T }

func (l tlog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func status(id, ref, s string) api.Event {
	return api.Event{Kind: "status", TaskID: id, TaskRef: ref, Status: s, Detail: "an agent's words: sk-ant-api03-SECRET"}
}

func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10 s", what)
	}
	var zero T
	return zero
}

func decode(t *testing.T, b []byte) map[string]string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON object of strings: %s: %v", b, err)
	}
	return m
}

// TestNotices: the events that call for a notice reach the webhook and the
// command (on its standard input) as the same JSON of exactly event, task,
// status and url — the detail an event carries never — and the others
// reach nobody.
func TestNotices(t *testing.T) {
	h, srv := newHook(t)
	out := filepath.Join(t.TempDir(), "notices")
	ch, _ := start(t, Options{
		Targets: func() Targets {
			return Targets{Webhook: srv.URL + "/hook", Command: []string{"sh", "-c", "cat >> " + out + "; echo >> " + out}}
		},
		Status: func(_ context.Context, id string) (string, error) { return "running", nil },
		Settle: time.Millisecond,
	})
	ch <- status("id1", "fix-login", "running")
	ch <- status("id1", "fix-login", "blocked")
	ch <- api.Event{Kind: "turn_end", TaskID: "id1", TaskRef: "fix-login", Status: "failed"}
	ch <- api.Event{Kind: "tripwire", TaskID: "id2", TaskRef: "x2", Detail: "tripwire: canary"}
	ch <- status("id3", "c3", "conflict")
	ch <- status("id4", "f4", "failed")
	want := []Notice{
		{NeedsReview, "fix-login", "blocked", "http://127.0.0.1:26010/review/id1"},
		{Tripwire, "x2", "running", "http://127.0.0.1:26010/review/id2"},
		{NeedsReview, "c3", "conflict", "http://127.0.0.1:26010/review/id3"},
		{Failed, "f4", "failed", "http://127.0.0.1:26010/review/id4"},
	}
	for i, w := range want {
		b := wait(t, h.got, "notice "+string(w.Event))
		m := decode(t, b)
		if len(m) != 4 || m["event"] != string(w.Event) || m["task"] != w.Task || m["status"] != w.Status || m["url"] != w.URL {
			t.Errorf("notice %d: got %s, want %+v", i, b, w)
		}
		if bytes.Contains(b, []byte("SECRET")) || bytes.Contains(b, []byte("canary")) {
			t.Errorf("notice %d carries an event's detail: %s", i, b)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(out)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) == len(want) {
			h.mu.Lock()
			for i, l := range lines {
				if l != string(h.bodies[i]) {
					t.Errorf("command line %d: got %s, want the webhook's %s", i, l, h.bodies[i])
				}
			}
			h.mu.Unlock()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command got %d notices, want %d:\n%s", len(lines), len(want), b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case b := <-h.got:
		t.Fatalf("a notice no event called for: %s", b)
	default:
	}
}

// TestRetryBackoff: a webhook that fails twice gets the notice the third
// time, after waits of Backoff and twice it; one that answers 404 is not
// tried again.
func TestRetryBackoff(t *testing.T) {
	h, srv := newHook(t, http.StatusServiceUnavailable, http.StatusBadGateway)
	const backoff = 150 * time.Millisecond
	ch, lb := start(t, Options{Targets: func() Targets { return Targets{Webhook: srv.URL + "/services/s3cret"} }, Backoff: backoff, Settle: time.Millisecond})
	ch <- status("id1", "r1", "blocked")
	wait(t, h.got, "the notice after two failures")
	h.mu.Lock()
	times := append([]time.Time(nil), h.times...)
	h.mu.Unlock()
	if len(times) != 3 {
		t.Fatalf("got %d tries, want 3", len(times))
	}
	if d1, d2 := times[1].Sub(times[0]), times[2].Sub(times[1]); d1 < backoff || d2 < 2*backoff || d2 > 2*backoff+2*time.Second {
		t.Errorf("waits between tries: %v and %v, want ≥ %v and ≥ %v", d1, d2, backoff, 2*backoff)
	}
	waitLog(t, lb, "attempt=3")
	if strings.Contains(lb.String(), "s3cret") {
		t.Errorf("the log must say the third try delivered it, naming the webhook by host only:\n%s", lb)
	}

	h404, srv404 := newHook(t, http.StatusNotFound, http.StatusNotFound)
	ch404, lb404 := start(t, Options{Targets: func() Targets { return Targets{Webhook: srv404.URL} }, Backoff: time.Millisecond, Settle: time.Millisecond})
	ch404 <- status("id1", "r1", "failed")
	waitLog(t, lb404, "notice not delivered")
	h404.mu.Lock()
	defer h404.mu.Unlock()
	if len(h404.times) != 1 {
		t.Errorf("a 404 was tried %d times, want once", len(h404.times))
	}
}

// TestFullQueueDropsOldest: while the webhook hangs, notices past the
// queue's bound push out the oldest, with a log line; what follows the
// hang arrives, the newest last.
func TestFullQueueDropsOldest(t *testing.T) {
	h, srv := newHook(t)
	h.hold = make(chan struct{})
	ch, lb := start(t, Options{Targets: func() Targets { return Targets{Webhook: srv.URL} }, Queue: 2, Settle: time.Millisecond, Timeout: 30 * time.Second})
	ch <- status("a", "a", "blocked")
	wait(t, h.arrived, "the first notice at the webhook") // it hangs there
	for _, id := range []string{"b", "c", "d", "e"} {
		ch <- status(id, id, "blocked")
	}
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(lb.String(), "queue is full") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("want two drops logged:\n%s", lb)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(h.hold)
	var got []string
	for range 3 {
		got = append(got, decode(t, wait(t, h.got, "a notice"))["task"])
	}
	if strings.Join(got, ",") != "a,d,e" {
		t.Errorf("delivered %v, want a then the two newest, d and e", got)
	}
}

// TestSettle: a failed notice followed at once by another status of its
// task (a cancel of a running task) is dropped; the tripwire is not.
func TestSettle(t *testing.T) {
	h, srv := newHook(t)
	ch, _ := start(t, Options{Targets: func() Targets { return Targets{Webhook: srv.URL} }, Settle: 2 * time.Second})
	ch <- status("a", "a", "failed")
	ch <- api.Event{Kind: "tripwire", TaskID: "a", TaskRef: "a"}
	ch <- status("a", "a", "cancelled")
	ch <- status("b", "b", "blocked")
	for _, want := range []string{"tripwire", "needs_review"} {
		if m := decode(t, wait(t, h.got, want)); m["event"] != want {
			t.Fatalf("got %v, want %s (the failed notice dropped)", m, want)
		}
	}
}

// TestCommandTimeout: a command that hangs is killed, its process group
// and all, at the timeout; one that is not there is not tried again.
func TestCommandTimeout(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	ch, lb := start(t, Options{Targets: func() Targets {
		return Targets{Command: []string{"sh", "-c", "sleep 60 & echo $! > " + pidFile + "; wait"}}
	}, Timeout: 300 * time.Millisecond, Attempts: 1, Settle: time.Millisecond})
	began := time.Now()
	ch <- status("a", "a", "blocked")
	waitLog(t, lb, "notice not delivered")
	if took := time.Since(began); took > 5*time.Second || !strings.Contains(lb.String(), "killed after 300ms") {
		t.Fatalf("the hanging command ended after %v:\n%s", took, lb)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || strings.Contains(string(st), ") Z ") {
			break // gone, or a zombie of a parent already dead
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command's child %d outlived it: %s", pid, st)
		}
		time.Sleep(20 * time.Millisecond)
	}

	ch2, lb2 := start(t, Options{Targets: func() Targets { return Targets{Command: []string{"/nonexistent/notifier"}} }, Attempts: 3, Backoff: time.Millisecond, Settle: time.Millisecond})
	ch2 <- status("a", "a", "blocked")
	waitLog(t, lb2, "notice not delivered")
	if !strings.Contains(lb2.String(), "attempts=1") || !strings.Contains(lb2.String(), "check notify.command") {
		t.Errorf("a missing command: want one try and what to check:\n%s", lb2)
	}
}

func waitLog(t *testing.T, lb *logBuf, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(lb.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log:\n%s", want, lb)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
