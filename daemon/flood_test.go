package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lazy/actors"
	"lazy/gitx/gitxtest"
	"lazy/stubmodel"
)

// floodConns is how many connections the flood opens (issue 22, attack 8).
const floodConns = 21000

// floodCap is sandbox.max_connections in the flood test.
const floodCap = 64

// TestOneTaskAtItsLimits: one task's sandbox opens 21,000 connections to
// its proxy socket and holds them (from a process of its own, as a sandbox
// is); the daemon keeps at most sandbox.max_connections of them, and
// meanwhile the dashboard, an RPC call and another task's proxy call through
// its own socket all answer within a few seconds. Without the cap the
// daemon runs out of file descriptors (its limit here is below the flood).
func TestOneTaskAtItsLimits(t *testing.T) {
	up := httptest.NewServer(stubmodel.New())
	defer up.Close()
	root := gitxtest.NewRepo(t, nil)
	if err := os.MkdirAll(filepath.Join(root, ".lazy"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("[agent]\nrunner = \"bwrap\"\n[proxy]\nupstream = %q\ncredential = \"none\"\n[sandbox]\nmax_connections = %d\n", up.URL, floodCap)
	if err := os.WriteFile(filepath.Join(root, ".lazy", "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := startIn(t, root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { d.Stop(); <-d.Done() }()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	if rl.Cur != rl.Max {
		t.Fatalf("the daemon left its file limit at %d below the hard limit %d", rl.Cur, rl.Max)
	}

	flooder, calm := strings.Repeat("f", 32), strings.Repeat("c", 32)
	floodPath, releaseF, err := d.sockets.Open(flooder, "flood")
	if err != nil {
		t.Fatal(err)
	}
	defer releaseF()
	calmPath, releaseC, err := d.sockets.Open(calm, "calm")
	if err != nil {
		t.Fatal(err)
	}
	defer releaseC()
	env, err := d.sup.Mint(&actors.MintGrants{TaskRef: "calm", TaskID: calm, Vars: map[string]actors.MintVar{"ANTHROPIC_API_KEY": {Kind: "api_key"}}})
	if err != nil {
		t.Fatal(err)
	}
	calmKey := env["ANTHROPIC_API_KEY"]

	// the flood: processes of their own (their fds are not the daemon's,
	// as a sandbox's are not), each holding what its file limit allows,
	// 21,000 in all
	per := floodConns
	if room := int(rl.Max) - 200; per > room {
		per = room
	}
	helpers := min((floodConns+per-1)/per, 8) // a low hard limit floods with less
	lines := make(chan string, helpers)       // one report from each
	var stdins []io.Closer
	var cmds []*exec.Cmd
	var readers sync.WaitGroup
	defer func() {
		for _, in := range stdins {
			in.Close()
		}
		readers.Wait() // all read before Wait closes the pipes
		for _, c := range cmds {
			_ = c.Wait()
		}
	}()
	for i := 0; i < helpers; i++ {
		n := max(min(per, floodConns-i*per), 1)
		cmd := exec.Command(os.Args[0], "-test.run=^TestFloodHelper$", "-test.v")
		cmd.Env = append(os.Environ(), "LAZY_TEST_FLOOD="+floodPath, "LAZY_TEST_FLOOD_N="+strconv.Itoa(n))
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stdins, cmds = append(stdins, stdin), append(cmds, cmd)
		readers.Add(1)
		go func() {
			defer readers.Done()
			sc := bufio.NewScanner(stdout)
			sent := false
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "flood: ") {
					lines <- sc.Text()
					sent = true
				} else {
					t.Log("helper: " + sc.Text())
				}
			}
			if !sent {
				lines <- "" // ended without a report
			}
		}()
	}
	answers := func(when string) {
		t.Helper()
		start := time.Now()
		if err := dashboard(d); err != nil {
			t.Fatalf("%s: the dashboard does not answer: %v", when, err)
		}
		if err := rpc(d, "taskList"); err != nil {
			t.Fatalf("%s: the RPC does not answer: %v", when, err)
		}
		if err := callThrough(calmPath, d.Info().ProxyPort, calmKey); err != nil {
			t.Fatalf("%s: another task's proxy call: %v", when, err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("%s: dashboard, RPC and proxy took %s", when, took)
		}
	}

	// while the flood runs
	opened, failed, reports, checks := 0, 0, 0, 0
	for reports < helpers {
		select {
		case l := <-lines:
			var o, f int
			if _, err := fmt.Sscanf(l, "flood: %d connections held, %d dials failed", &o, &f); err != nil {
				t.Fatalf("a flood helper ended without a report (%q)", l)
			}
			opened, failed, reports = opened+o, failed+f, reports+1
		case <-time.After(200 * time.Millisecond):
			answers("during the flood")
			checks++
			if n := d.sockets.Conns(flooder); n > floodCap {
				t.Fatalf("the flooding task holds %d connections, over its cap %d", n, floodCap)
			}
		}
	}
	t.Logf("flood: %d connections held by %d processes (%d dials found the backlog full and were retried); dashboard, RPC and another task's proxy answered %d times during it", opened, helpers, failed, checks)
	if uint64(opened) <= rl.Cur {
		t.Logf("the flood opened %d connections, not above the daemon's file limit %d: this run cannot show the exhaustion", opened, rl.Cur)
		if os.Getenv("CI") == "true" && opened < floodCap*10 {
			t.Fatalf("the flood opened only %d connections", opened)
		}
	}
	// while it holds them all
	answers("while the flood holds its connections")
	if n := d.sockets.Conns(flooder); n > floodCap {
		t.Fatalf("the flooding task holds %d connections, over its cap %d", n, floodCap)
	}
	if n := openFDs(t); n > 1500 {
		t.Fatalf("the daemon holds %d file descriptors during the flood", n)
	} else {
		t.Logf("daemon file descriptors while %d connections are held: %d (cap %d, limit %d)", opened, n, floodCap, rl.Cur)
	}
}

// TestFloodHelper is the flooding sandbox of TestOneTaskAtItsLimits (run
// by it in a process of its own): it connects to the socket until it holds
// LAZY_TEST_FLOOD_N connections (or its file limit), reports, and holds them
// until its stdin closes.
func TestFloodHelper(t *testing.T) {
	path := os.Getenv("LAZY_TEST_FLOOD")
	if path == "" {
		t.Skip("run by TestOneTaskAtItsLimits")
	}
	want, _ := strconv.Atoi(os.Getenv("LAZY_TEST_FLOOD_N"))
	var rl syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	if rl.Max < uint64(want)+200 {
		// as root the hard limit may be raised; otherwise flood with what there is
		raised := syscall.Rlimit{Cur: uint64(want) + 200, Max: uint64(want) + 200}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			rl = raised
		}
	}
	rl.Cur = rl.Max
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	if room := int(rl.Cur) - 100; want > room {
		want = room
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close() // its descriptor is in the path
	short := "/proc/self/fd/" + strconv.Itoa(int(dir.Fd())) + "/" + filepath.Base(path)
	var conns []int
	failed := 0
	deadline := time.Now().Add(2 * time.Minute)
	for len(conns) < want && time.Now().Before(deadline) {
		fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, 0)
		if err != nil {
			t.Fatalf("socket after %d: %v", len(conns), err)
		}
		if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: short}); err != nil {
			syscall.Close(fd)
			failed++
			if errors.Is(err, syscall.EAGAIN) {
				time.Sleep(time.Millisecond) // the backlog is full: the proxy takes them one by one
				continue
			}
			t.Fatalf("connect after %d: %v", len(conns), err)
		}
		conns = append(conns, fd)
	}
	fmt.Printf("flood: %d connections held, %d dials failed\n", len(conns), failed)
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, fd := range conns {
		syscall.Close(fd)
	}
}

// fresh is a client on a connection of its own, as a new CLI or browser
// makes (a kept-alive one would need no new descriptor).
func fresh() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
}

// dashboard opens the dashboard with the dashboard token.
func dashboard(d *Daemon) error {
	tok, err := os.ReadFile(d.Paths().DashboardToken)
	if err != nil {
		return err
	}
	c := fresh()
	c.Jar, _ = cookiejar.New(nil) // the token sets the session cookie and redirects
	resp, err := c.Get(d.Info().BaseURL + "/?token=" + strings.TrimSpace(string(tok)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET /: %d", resp.StatusCode)
	}
	return nil
}

// rpc calls an argument-less RPC command with the auth token.
func rpc(d *Daemon, name string) error {
	tok, err := os.ReadFile(d.Paths().AuthToken)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, d.Info().BaseURL+"/rpc/"+name, strings.NewReader("{}"))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := fresh().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %d %s", name, resp.StatusCode, b)
	}
	return nil
}

// callThrough makes a model call through a task's socket with its key.
func callThrough(path string, port int, key string) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	short := "/proc/self/fd/" + strconv.Itoa(int(d.Fd())) + "/" + filepath.Base(path)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", short)
	}}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(port)+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		return err
	}
	req.Header.Set("x-api-key", key)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	return nil
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
