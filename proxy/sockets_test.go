package proxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"lazy/config"
)

// taskA and taskB are two tasks' full ids.
var (
	taskA = strings.Repeat("a", 32)
	taskB = strings.Repeat("b", 32)
)

// grantTo grants a fresh model placeholder to a task and returns it.
func (f *fixture) grantTo(taskID, ref string) string {
	ph := NewPlaceholder("api_key", "")
	g := Grants{}
	for k, v := range *f.grants.Load() {
		g[k] = v
	}
	g[ph] = Grant{Placeholder: ph, TaskRef: ref, TaskID: taskID, EnvVar: "ANTHROPIC_API_KEY", CreatedAt: time.Now()}
	f.grants.Store(&g)
	return ph
}

// sockets opens the proxy's socket dir under the test's temp dir.
func (f *fixture) sockets() *Sockets {
	f.t.Helper()
	s, err := NewSockets(f.p, filepath.Join(f.t.TempDir(), "s"))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = s.Close() })
	return s
}

// open opens a task's socket and returns a client that calls through it.
func openSocket(t *testing.T, s *Sockets, taskID, ref string) (*http.Client, string) {
	t.Helper()
	path, release, err := s.Open(taskID, ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return dialSocket(ctx, path)
	}}}, path
}

// dialSocket dials a socket by a path short enough for connect(2): through
// an open descriptor of its directory when the path itself is too long.
func dialSocket(ctx context.Context, path string) (net.Conn, error) {
	if len(path) < 104 {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return (&net.Dialer{}).DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(int(d.Fd()))+"/"+filepath.Base(path))
}

func post(t *testing.T, c *http.Client, ph string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://127.0.0.1/v1/messages", strings.NewReader(msgBody))
	req.Header.Set("x-api-key", ph)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// TestSocketForeignPlaceholderTrips: a task's socket passes only its own
// placeholders; another task's, presented there, trips the wire on the
// socket's task, whose grants die at once, while the other task goes on.
func TestSocketForeignPlaceholderTrips(t *testing.T) {
	up := newUpstream(t)
	cfg := cfgFor(up.srv.URL, "provider")
	cfg.Agent.Runner = config.RunnerBwrap
	f := newFixture(t, cfg)
	f.writeCred("provider", realKey)
	var mu sync.Mutex
	var trips []string
	f.p.o.Tripwire = func(taskID, ref, what string) { mu.Lock(); trips = append(trips, taskID+":"+ref+":"+what); mu.Unlock() }
	mine, theirs := f.grantTo(taskA, "mine"), f.grantTo(taskB, "theirs")
	s := f.sockets()
	ca, _ := openSocket(t, s, taskA, "mine")
	cb, _ := openSocket(t, s, taskB, "theirs")

	if resp, body := post(t, ca, mine); resp.StatusCode != 200 || f.lastTraffic().TaskRef != "mine" {
		t.Fatalf("own placeholder through own socket: %d %s", resp.StatusCode, body)
	}
	resp, body := post(t, ca, theirs)
	tr := f.lastTraffic()
	if resp.StatusCode != 403 || !strings.HasSuffix(tr.Line(), " tripwire: "+TripForeignPlaceholder) || tr.TaskRef != "mine" {
		t.Fatalf("another task's placeholder through my socket: %d %s\nline: %s", resp.StatusCode, body, tr.Line())
	}
	mu.Lock()
	got := strings.Join(trips, ",")
	mu.Unlock()
	if got != taskA+":mine:"+TripForeignPlaceholder {
		t.Fatalf("tripwire calls: got %q, want the socket's task", got)
	}
	if resp, _ := post(t, ca, mine); resp.StatusCode != 401 || f.lastTraffic().Refused != CauseUnknownPlaceholder {
		t.Fatalf("the tripped task's placeholder still works: %d", resp.StatusCode)
	}
	if resp, body := post(t, cb, theirs); resp.StatusCode != 200 {
		t.Fatalf("the other task through its own socket: %d %s", resp.StatusCode, body)
	}
	if n := len(up.Requests()); n != 2 {
		t.Fatalf("upstream saw %d requests, want the 2 allowed", n)
	}
}

// TestTCPPlaceholderOnlyUnderProcess: a placeholder on the TCP listener
// (a process in no sandbox) is refused while agents run sandboxed, and is
// the agents' way in under agent.runner = "process".
func TestTCPPlaceholderOnlyUnderProcess(t *testing.T) {
	for _, tc := range []struct {
		runner string
		want   int
	}{
		{config.RunnerAuto, 403},
		{config.RunnerBwrap, 403},
		{config.RunnerDocker, 403},
		{config.RunnerProcess, 200},
	} {
		t.Run(tc.runner, func(t *testing.T) {
			up := newUpstream(t)
			cfg := cfgFor(up.srv.URL, "provider")
			cfg.Agent.Runner = tc.runner
			f := newFixture(t, cfg)
			f.writeCred("provider", realKey)
			ph := f.grantTo(taskA, "t")
			resp := f.do("POST", "/v1/messages", map[string]string{"x-api-key": ph}, msgBody)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			tr := f.lastTraffic()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.want, body)
			}
			if tc.want == 403 {
				if tr.Refused != CauseNotFromSandbox || !strings.Contains(tr.Line(), "refused: "+CauseNotFromSandbox) || !strings.Contains(string(body), `agent.runner = \"process\"`) {
					t.Fatalf("refusal must name %s and the way out: %s / %s", CauseNotFromSandbox, tr.Line(), body)
				}
				if len(up.Requests()) != 0 {
					t.Fatal("a refused request reached the upstream")
				}
				// the same placeholder through its task's socket passes
				c, _ := openSocket(t, f.sockets(), taskA, "t")
				if resp, body := post(t, c, ph); resp.StatusCode != 200 {
					t.Fatalf("through the task's socket: %d %s", resp.StatusCode, body)
				}
			}
		})
	}
}

// TestSocketConnectionCap: a task holding sandbox.max_connections gets its
// next connection refused with a 503 that names the key, on the traffic
// stream too; another task's socket answers meanwhile; a closed connection
// frees a slot.
func TestSocketConnectionCap(t *testing.T) {
	up := newUpstream(t)
	cfg := cfgFor(up.srv.URL, "provider")
	cfg.Agent.Runner = config.RunnerBwrap
	cfg.Sandbox.MaxConnections = 4
	f := newFixture(t, cfg)
	f.writeCred("provider", realKey)
	s := f.sockets()
	_, pathA := openSocket(t, s, taskA, "flood")
	cb, _ := openSocket(t, s, taskB, "calm")
	phB := f.grantTo(taskB, "calm")

	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for len(held) < 4 {
		c, err := dialSocket(context.Background(), pathA)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	waitConns(t, s, taskA, 4)
	start := time.Now()
	over, err := dialSocket(context.Background(), pathA)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(over), nil)
	over.Close()
	if err != nil {
		t.Fatalf("the connection over the cap got no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || resp.Header.Get("x-lazy-refused") != CauseTooManyConnections || !strings.Contains(string(body), "sandbox.max_connections = 4") {
		t.Fatalf("over the cap: %d %s", resp.StatusCode, body)
	}
	if waited := time.Since(start); waited < ConnWait/2 {
		t.Fatalf("the first connection over the cap was refused after %s; it waits %s for a slot", waited, ConnWait)
	}
	tr := f.lastTraffic()
	if tr.TaskRef != "flood" || tr.Refused != CauseTooManyConnections || !strings.Contains(tr.Line(), "raise sandbox.max_connections") {
		t.Fatalf("traffic line: %s", tr.Line())
	}
	// the next one is refused at once: no queue behind a flood
	start = time.Now()
	if c, err := dialSocket(context.Background(), pathA); err == nil {
		_, _ = http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
	}
	if waited := time.Since(start); waited > ConnWait/2 {
		t.Fatalf("a flood's next connection waited %s", waited)
	}
	if resp, body := post(t, cb, phB); resp.StatusCode != 200 {
		t.Fatalf("the other task's socket while one is at its cap: %d %s", resp.StatusCode, body)
	}
	if n := s.Conns(taskA); n != 4 {
		t.Fatalf("task holds %d connections, want the cap 4", n)
	}
	// one closes: a slot is free again, and the task's calls go through
	held[0].Close()
	held = held[1:]
	waitConns(t, s, taskA, 3)
	phA := f.grantTo(taskA, "flood")
	ca := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return dialSocket(ctx, pathA)
	}}}
	if resp, body := post(t, ca, phA); resp.StatusCode != 200 {
		t.Fatalf("after a connection closed: %d %s", resp.StatusCode, body)
	}
}

// waitConns polls until the task holds n connections (accepts are async).
func waitConns(t *testing.T, s *Sockets, taskID string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.Conns(taskID) != n {
		if time.Now().After(deadline) {
			t.Fatalf("task holds %d connections, want %d", s.Conns(taskID), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSocketLifecycle: a socket lives while a turn holds it, is shared by
// two holders, and is gone (file and connections) after the last release;
// a state dir too long for a socket path still works.
func TestSocketLifecycle(t *testing.T) {
	up := newUpstream(t)
	cfg := cfgFor(up.srv.URL, "provider")
	cfg.Agent.Runner = config.RunnerBwrap
	f := newFixture(t, cfg)
	f.writeCred("provider", realKey)
	dir := filepath.Join(t.TempDir(), strings.Repeat("long-state-dir-", 7))
	s, err := NewSockets(f.p, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Open("../../etc", "x"); err == nil {
		t.Fatal("a task id that is not 32 hex opened a socket")
	}
	p1, r1, err := s.Open(taskA, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(p1) < 108 {
		t.Fatalf("the test wants a socket path over the limit, got %d bytes", len(p1))
	}
	p2, r2, err := s.Open(taskA, "t")
	if err != nil || p2 != p1 {
		t.Fatalf("second holder: %s %v", p2, err)
	}
	if st, err := os.Stat(p1); err != nil || st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket file: %v %v", st, err)
	}
	c, err := dialSocket(context.Background(), p1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitConns(t, s, taskA, 1)
	r1()
	r1() // a release is once
	if _, err := os.Stat(p1); err != nil {
		t.Fatal("the socket went while a holder remains")
	}
	r2()
	if _, err := os.Stat(p1); !os.IsNotExist(err) {
		t.Fatalf("the socket outlived its last holder: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection outlived its task's socket")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the socket dir outlived Close: %v", err)
	}
}
