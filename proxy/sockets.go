package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"lazy/api"
	"lazy/config"
)

// Each sandbox reaches the proxy through a Unix socket of its own task
// (CONTRACT §13): the proxy knows the task from the socket a connection came
// in on, so a placeholder of another task presented there trips the wire,
// and one task's connections are counted and capped
// (sandbox.max_connections) without touching any other task's, the
// dashboard's or the RPC's. The TCP listener serves processes in no sandbox:
// a placeholder is accepted there only when agent.runner = "process".

// Refusal causes of the sockets and the TCP listener.
const (
	// CauseNotFromSandbox: a placeholder presented on the TCP listener, by
	// a process in no sandbox, while agents run sandboxed (403).
	CauseNotFromSandbox = "not_from_sandbox"
	// CauseTooManyConnections: the task holds sandbox.max_connections
	// connections to its socket; a new one waited ConnWait and was closed
	// with a 503.
	CauseTooManyConnections = "too_many_connections"
)

// ConnWait is how long a task's new connection waits for one of its others
// to close when the task is at sandbox.max_connections. Once one has waited
// in vain, the next are refused at once until one closes.
const ConnWait = time.Second

// The per-task servers' bounds, as the daemon's TCP proxy listener has them.
const (
	socketReadHeaderTimeout = 30 * time.Second
	socketIdleTimeout       = 2 * time.Minute
)

// via is the task whose socket a connection came in on; done closes with
// the socket (its egress tunnels end then).
type via struct {
	taskID, taskRef string
	done            <-chan struct{}
}

type viaKey struct{}

// viaOf is the task of the socket the request came in on; nil: the TCP
// listener (or any caller that is not a task's socket).
func viaOf(ctx context.Context) *via {
	v, _ := ctx.Value(viaKey{}).(*via)
	return v
}

// Sockets are the proxy's per-task Unix sockets. The daemon opens a task's
// socket when its turn launches and releases it when the turn ends; the
// runner binds it into the sandbox, where the forwarder connects to it.
type Sockets struct {
	p   *Proxy
	dir string // where the sockets live (host paths, bound into sandboxes)
	// bindDir reaches dir in at most a few dozen bytes: a Unix socket path is
	// capped at 108 bytes and a state dir may be longer. It is dir itself
	// when short enough, else /proc/self/fd/<fd of dir>.
	bindDir string
	dirf    *os.File

	mu     sync.Mutex
	open   map[string]*taskSocket // by task id
	closed bool
}

// NewSockets makes dir (0700, emptied of sockets a dead daemon left) and
// serves p on the task sockets it opens there.
func NewSockets(p *Proxy, dir string) (*Sockets, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("proxy sockets: clear %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("proxy sockets: %w (check that the state dir is writable)", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("proxy sockets: %w", err)
	}
	s := &Sockets{p: p, dir: dir, bindDir: dir, open: map[string]*taskSocket{}}
	if len(filepath.Join(dir, strings.Repeat("x", 32)+".sock")) >= 104 {
		f, err := os.Open(dir)
		if err != nil {
			return nil, fmt.Errorf("proxy sockets: %w", err)
		}
		s.dirf, s.bindDir = f, "/proc/self/fd/"+strconv.Itoa(int(f.Fd()))
	}
	return s, nil
}

// Dir is where the sockets live.
func (s *Sockets) Dir() string { return s.dir }

// Open makes (or shares) the task's socket and returns its host path and
// the release the turn calls when it ends; the last release closes the
// socket and every connection through it, and removes the file.
func (s *Sockets) Open(taskID, ref string) (string, func(), error) {
	if !validTaskID(taskID) {
		return "", nil, fmt.Errorf("proxy socket: %q is not a task id", taskID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", nil, errors.New("proxy socket: the daemon is stopping")
	}
	ts := s.open[taskID]
	if ts == nil {
		var err error
		if ts, err = s.listen(taskID, ref); err != nil {
			return "", nil, err
		}
		s.open[taskID] = ts
	}
	ts.users++
	var once sync.Once
	return ts.path, func() { once.Do(func() { s.release(ts) }) }, nil
}

func (s *Sockets) release(ts *taskSocket) {
	s.mu.Lock()
	ts.users--
	last := ts.users == 0 && s.open[ts.via.taskID] == ts
	if last {
		delete(s.open, ts.via.taskID)
	}
	s.mu.Unlock()
	if last {
		ts.close()
	}
}

// Conns is the number of connections the task holds open to its socket.
func (s *Sockets) Conns(taskID string) int {
	s.mu.Lock()
	ts := s.open[taskID]
	s.mu.Unlock()
	if ts == nil {
		return 0
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.conns
}

// Close closes every socket and its connections and removes the directory.
func (s *Sockets) Close() error {
	s.mu.Lock()
	s.closed = true
	all := s.open
	s.open = map[string]*taskSocket{}
	s.mu.Unlock()
	for _, ts := range all {
		ts.close()
	}
	if s.dirf != nil {
		s.dirf.Close()
	}
	return os.RemoveAll(s.dir)
}

func validTaskID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// listen opens the task's socket (s.mu held).
func (s *Sockets) listen(taskID, ref string) (*taskSocket, error) {
	name := taskID + ".sock"
	path := filepath.Join(s.dir, name)
	_ = os.Remove(path)
	ln, err := net.Listen("unix", s.bindDir+"/"+name)
	if err != nil {
		return nil, fmt.Errorf("proxy socket for task %s: %w", ref, err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false) // removed by its host path
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("proxy socket for task %s: %w", ref, err)
	}
	done := make(chan struct{})
	ts := &taskSocket{s: s, via: &via{taskID: taskID, taskRef: ref, done: done}, path: path, freed: make(chan struct{}, 1), done: done}
	ts.srv = &http.Server{Handler: s.p, ReadHeaderTimeout: socketReadHeaderTimeout, IdleTimeout: socketIdleTimeout,
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context { return context.WithValue(ctx, viaKey{}, ts.via) }}
	go func() {
		if err := ts.srv.Serve(&capListener{Listener: ln, ts: ts}); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.p.log.Error("proxy socket failed", "task", ref, "err", err)
		}
	}()
	return ts, nil
}

// taskSocket is one task's socket and its connection count.
type taskSocket struct {
	s     *Sockets
	via   *via
	path  string
	srv   *http.Server
	users int // turns holding it (Sockets.mu)

	mu        sync.Mutex
	conns     int
	saturated bool // a connection waited ConnWait in vain, none closed since
	refused   int  // refused since the last traffic line
	lastLine  time.Time
	freed     chan struct{} // a connection closed
	done      chan struct{} // the socket closed
	closeOnce sync.Once
}

func (ts *taskSocket) close() {
	ts.closeOnce.Do(func() {
		close(ts.done)
		_ = ts.srv.Close()
		_ = os.Remove(ts.path)
	})
}

// maxConns is sandbox.max_connections in force now.
func (ts *taskSocket) maxConns() int {
	if n := ts.s.p.routes.Load().maxConns; n > 0 {
		return n
	}
	return config.Defaults().Sandbox.MaxConnections
}

// admit takes a connection slot, waiting up to ConnWait for one when the
// task holds its maximum (unless one already waited in vain since the last
// close: a flood is refused at once, one connection at a time).
func (ts *taskSocket) admit() (bool, int) {
	var timer *time.Timer
	for {
		limit := ts.maxConns()
		ts.mu.Lock()
		if ts.conns < limit {
			ts.conns++
			ts.saturated = false
			ts.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			return true, limit
		}
		if ts.saturated {
			ts.mu.Unlock()
			return false, limit
		}
		ts.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(ConnWait)
		}
		select {
		case <-ts.freed:
		case <-ts.done:
			timer.Stop()
			return false, limit
		case <-timer.C:
			ts.mu.Lock()
			ts.saturated = true
			ts.mu.Unlock()
			return false, limit
		}
	}
}

func (ts *taskSocket) released() {
	ts.mu.Lock()
	ts.conns--
	ts.saturated = false
	ts.mu.Unlock()
	select {
	case ts.freed <- struct{}{}:
	default:
	}
}

// refuse answers a connection over the cap with a 503 in the provider's
// error shape and closes it; the traffic stream and the log say so at most
// once a second per task, with what to raise.
func (ts *taskSocket) refuse(c net.Conn, limit int) {
	msg := fmt.Sprintf("lazy proxy: task %s holds sandbox.max_connections = %d connections to the proxy; close some, or raise sandbox.max_connections in .lazy/config.toml", ts.via.taskRef, limit)
	body, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": "overloaded_error", "message": msg, "cause": CauseTooManyConnections}})
	_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nx-lazy-refused: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", CauseTooManyConnections, len(body), body)
	_ = c.Close()
	now := ts.s.p.now()
	ts.mu.Lock()
	ts.refused++
	n := ts.refused
	report := now.Sub(ts.lastLine) >= time.Second
	if report {
		ts.refused, ts.lastLine = 0, now
	}
	ts.mu.Unlock()
	if !report {
		return
	}
	tr := api.Traffic{Time: now.UTC(), TaskRef: ts.via.taskRef, TaskID: ts.via.taskID, Method: "-", Path: "-", Status: http.StatusServiceUnavailable,
		Refused: CauseTooManyConnections,
		Error:   fmt.Sprintf("%d connections refused: the task holds sandbox.max_connections = %d open; raise sandbox.max_connections if its agent needs more", n, limit)}
	ts.s.p.log.Warn(tr.Line())
	if ts.s.p.o.Publish != nil {
		ts.s.p.o.Publish(tr)
	}
}

// capListener admits at most the task's maximum of connections at once.
type capListener struct {
	net.Listener
	ts *taskSocket
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ok, limit := l.ts.admit()
		if ok {
			return &countedConn{Conn: c, ts: l.ts}, nil
		}
		l.ts.refuse(c, limit)
	}
}

// countedConn gives its slot back when closed.
type countedConn struct {
	net.Conn
	ts   *taskSocket
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.ts.released)
	return err
}
