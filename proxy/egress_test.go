package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lazy/api"
	"lazy/canary"
	"lazy/config"
)

// egressFixture: a proxy under a sandboxing runner whose egress.allow lists
// the test's registry by exact host:port and every name under lab.test by
// wildcard; names resolve as the test says (all to loopback, the only
// network a test has).
type egressFixture struct {
	*fixture
	plain, tlsSrv *httptest.Server
	plainPort     string
	tlsPort       string
	resolves      atomic.Int64
	s             *Sockets
}

func newEgressFixture(t *testing.T, allow ...string) *egressFixture {
	t.Helper()
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "got %d bytes", len(b))
			return
		}
		fmt.Fprintf(w, "hello from %s%s", r.Host, r.URL.Path)
	})
	e := &egressFixture{plain: httptest.NewServer(hello), tlsSrv: httptest.NewTLSServer(hello)}
	t.Cleanup(e.plain.Close)
	t.Cleanup(e.tlsSrv.Close)
	_, e.plainPort, _ = net.SplitHostPort(e.plain.Listener.Addr().String())
	_, e.tlsPort, _ = net.SplitHostPort(e.tlsSrv.Listener.Addr().String())
	cfg := cfgFor("http://127.0.0.1:1", "none")
	cfg.Agent.Runner = config.RunnerBwrap
	cfg.Egress.Allow = append([]string{"registry.test:" + e.plainPort, "registry.test:" + e.tlsPort, "*.lab.test"}, allow...)
	e.fixture = newFixture(t, cfg)
	e.p.o.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
		e.resolves.Add(1)
		switch host {
		case "registry.test", "sneaky.lab.test":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		case "sneaky6.lab.test":
			return []netip.Addr{netip.MustParseAddr("::1")}, nil
		case "mixed.lab.test":
			// one public address and one private: every address is checked
			return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("127.0.0.1")}, nil
		case "metadata.lab.test":
			return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	e.s = e.sockets()
	return e
}

// client is an agent's HTTP client inside task's sandbox: proxy variables
// pointing at the forwarder, here a dial straight to the task's socket.
func (e *egressFixture) client(t *testing.T, taskID, ref string) *http.Client {
	t.Helper()
	path, release, err := e.s.Open(taskID, ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	roots := x509.NewCertPool()
	roots.AddCert(e.tlsSrv.Certificate())
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "127.0.0.1:1"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialSocket(ctx, path)
		},
		// the test server's certificate names example.com and loopback
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "example.com"},
	}}
}

func get(t *testing.T, c *http.Client, u string) (int, string, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		// a refused CONNECT surfaces as the client's error, with the status
		return 0, err.Error(), ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("x-lazy-refused")
}

var egressLine = regexp.MustCompile(`^net> \S+ (\S+) (\S+) (CONNECT|GET|POST) (\S+) -> (\d+) (\d+)/(\d+) \d+ms( refused: \S+)?$`)

// TestEgressAllowedAndRefused: through its task's socket an agent reaches
// a listed destination by CONNECT and by absolute-form http://, with a
// traffic line for each connection (bytes each way); what is not listed,
// and what resolves to a private address without its exact host:port
// listed, is refused with its cause, before any connection is made.
func TestEgressAllowedAndRefused(t *testing.T) {
	e := newEgressFixture(t)
	c := e.client(t, taskA, "mine")
	ph := e.grantTo(taskA, "mine")
	_ = ph

	// plain http, absolute-form: listed exactly, so its loopback address is reached
	st, body, _ := get(t, c, "http://registry.test:"+e.plainPort+"/mod/@v/list")
	if st != 200 || body != "hello from registry.test:"+e.plainPort+"/mod/@v/list" {
		t.Fatalf("plain http to the listed registry: %d %q", st, body)
	}
	tr := e.lastTraffic()
	line := tr.Line()
	m := egressLine.FindStringSubmatch(line)
	if m == nil || m[1] != "mine" || m[3] != "GET" || m[4] != "http://registry.test:"+e.plainPort+"/mod/@v/list" || m[5] != "200" || m[7] == "0" || !tr.Egress || tr.Dest != "registry.test:"+e.plainPort {
		t.Fatalf("traffic line of a plain http request: %q (%+v)", line, tr)
	}

	// https through a CONNECT tunnel
	st, body, _ = get(t, c, "https://registry.test:"+e.tlsPort+"/x")
	if st != 200 || !strings.HasPrefix(body, "hello from registry.test:"+e.tlsPort) {
		t.Fatalf("https through CONNECT: %d %q", st, body)
	}
	c.CloseIdleConnections() // the tunnel's line comes when it closes
	tr = e.lastTraffic()
	m = egressLine.FindStringSubmatch(tr.Line())
	if m == nil || m[3] != "CONNECT" || m[4] != "registry.test:"+e.tlsPort || m[5] != "200" || m[6] == "0" || m[7] == "0" {
		t.Fatalf("traffic line of a tunnel: %q", tr.Line())
	}

	refusals := []struct {
		name, url, cause string
	}{
		{"not listed, plain", "http://elsewhere.example:" + e.plainPort + "/", CauseEgressNotAllowed},
		{"not listed, tunnel", "https://elsewhere.example:" + e.tlsPort + "/", CauseEgressNotAllowed},
		{"loopback literal not listed", "http://127.0.0.2:" + e.plainPort + "/", CauseEgressNotAllowed},
		{"wildcard name resolving to loopback, plain", "http://sneaky.lab.test:" + e.plainPort + "/", CauseEgressPrivate},
		{"wildcard name resolving to loopback, tunnel", "https://sneaky.lab.test:" + e.tlsPort + "/", CauseEgressPrivate},
		{"wildcard name resolving to ::1", "http://sneaky6.lab.test:" + e.plainPort + "/", CauseEgressPrivate},
		{"one public and one loopback address", "https://mixed.lab.test:" + e.tlsPort + "/", CauseEgressPrivate},
		{"metadata address", "http://metadata.lab.test/latest/meta-data/", CauseEgressPrivate},
		{"registry listed on another port only", "http://registry.test:1/", CauseEgressNotAllowed},
	}
	for _, rc := range refusals {
		t.Run(rc.name, func(t *testing.T) {
			st, body, cause := get(t, c, rc.url)
			tr := e.lastTraffic()
			if tr.Refused != rc.cause || !strings.HasSuffix(tr.Line(), " refused: "+rc.cause) || tr.TaskRef != "mine" || tr.Status != 403 {
				t.Fatalf("got %d %q, line %q; want refused: %s", st, body, tr.Line(), rc.cause)
			}
			if st != 0 && (st != 403 || cause != rc.cause) {
				t.Fatalf("got %d (x-lazy-refused %q) %q, want 403 %s", st, cause, body, rc.cause)
			}
			if st == 403 && !strings.Contains(body, "egress") {
				t.Fatalf("the refusal should say what to do: %q", body)
			}
		})
	}
}

// TestEgressResolvesOnce: a connection resolves its destination once and
// dials an address it checked, so a name that answers otherwise the next
// time (DNS rebinding) cannot move a checked connection elsewhere.
func TestEgressResolvesOnce(t *testing.T) {
	e := newEgressFixture(t)
	c := e.client(t, taskA, "mine")
	var calls atomic.Int64
	e.p.o.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
		// first answer: the listed registry's loopback address; any later
		// answer names an address where nothing listens
		if calls.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("127.9.9.9")}, nil
	}
	st, body, _ := get(t, c, "https://registry.test:"+e.tlsPort+"/x")
	if st != 200 {
		t.Fatalf("tunnel: %d %q", st, body)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("resolved %d times for one connection, want 1", n)
	}
}

// TestEgressNeedsATask: the TCP listener (no task's socket) serves no
// egress under a sandboxing runner, whatever is listed.
func TestEgressNeedsATask(t *testing.T) {
	e := newEgressFixture(t)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: e.srv.Listener.Addr().String()})}}
	st, body, cause := get(t, c, "http://registry.test:"+e.plainPort+"/")
	if st != 403 || cause != CauseNotFromSandbox {
		t.Fatalf("egress on the TCP listener: %d %q %q", st, body, cause)
	}
	if tr := e.lastTraffic(); tr.Refused != CauseNotFromSandbox || !tr.Egress {
		t.Fatalf("line: %q", tr.Line())
	}
	st, body, _ = get(t, c, "https://registry.test:"+e.tlsPort+"/")
	if st != 0 || !strings.Contains(body, "Forbidden") {
		t.Fatalf("CONNECT on the TCP listener: %d %q", st, body)
	}
}

// TestEgressTunnelEndsWithTheTurn: a tunnel open when the task's socket is
// released (its turn ended) is closed, and its line is written.
func TestEgressTunnelEndsWithTheTurn(t *testing.T) {
	e := newEgressFixture(t)
	// a raw TCP destination that never closes on its own
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			held <- c
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	e.p.Reconfigure(withAllow(e.p, "127.0.0.1:"+port))
	path, release, err := e.s.Open(taskA, "mine")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := dialSocket(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT 127.0.0.1:%s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\nping", port, port)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	up := <-held
	defer up.Close()
	buf := make([]byte, 4)
	if _, err := io.ReadFull(up, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("the destination got %q, %v (bytes sent with the CONNECT must arrive)", buf, err)
	}
	release()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("the tunnel outlived its task's socket: %v", err)
	}
	tr := e.lastTraffic()
	if !tr.Egress || tr.Method != "CONNECT" || tr.BytesUp != 4 || tr.Status != 200 {
		t.Fatalf("line: %q", tr.Line())
	}
}

// withAllow is the proxy's config with egress.allow extended.
func withAllow(p *Proxy, allow ...string) *config.Config {
	c := *p.o.Config
	c.Egress.Allow = append(append([]string(nil), c.Egress.Allow...), allow...)
	return &c
}

// TestEgressReconfigure: egress.allow applies to the next connection.
func TestEgressReconfigure(t *testing.T) {
	e := newEgressFixture(t)
	c := e.client(t, taskA, "mine")
	if st, _, cause := get(t, c, "http://127.0.0.1:"+e.plainPort+"/"); st != 403 || cause != CauseEgressNotAllowed {
		t.Fatalf("before: %d %s", st, cause)
	}
	if err := e.p.Reconfigure(withAllow(e.p, "127.0.0.1:"+e.plainPort)); err != nil {
		t.Fatal(err)
	}
	if st, body, _ := get(t, c, "http://127.0.0.1:"+e.plainPort+"/"); st != 200 {
		t.Fatalf("after listing it: %d %q", st, body)
	}
}

func TestPrivateAddr(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1", true}, {"10.1.2.3", true}, {"172.20.0.1", true}, {"192.168.1.1", true},
		{"169.254.169.254", true}, {"100.64.0.1", true}, {"0.0.0.0", true}, {"::", true}, {"::1", true},
		{"fd00:ec2::254", true}, {"fe80::1", true}, {"::ffff:127.0.0.1", true}, {"::ffff:10.0.0.1", true},
		{"64:ff9b::7f00:1", true}, {"2002:7f00:1::", true}, {"224.0.0.1", true}, {"255.255.255.255", true},
		{"93.184.216.34", false}, {"2606:2800:220:1::1", false}, {"64:ff9b::5db8:d822", false}, {"::ffff:93.184.216.34", false},
	} {
		if got := PrivateAddr(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("PrivateAddr(%s): got %v, want %v", tc.addr, got, tc.want)
		}
	}
}

// BenchmarkEgressConnect: bytes/s through a CONNECT tunnel via a task's
// proxy socket, beside the same loopback server reached directly.
func BenchmarkEgressConnect(b *testing.B) {
	sink, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	go func() {
		for {
			c, err := sink.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }() // echo
		}
	}()
	_, port, _ := net.SplitHostPort(sink.Addr().String())
	cfg := cfgFor("http://127.0.0.1:1", "none")
	cfg.Agent.Runner = config.RunnerBwrap
	cfg.Egress.Allow = []string{"127.0.0.1:" + port}
	var g atomic.Pointer[Grants]
	g.Store(&Grants{})
	p, err := New(Options{Config: &cfg, Home: b.TempDir(), Grants: &g, Publish: func(api.Traffic) {}})
	if err != nil {
		b.Fatal(err)
	}
	s, err := NewSockets(p, b.TempDir()+"/s")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	path, release, err := s.Open(taskA, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer release()
	const chunk = 1 << 20
	payload := make([]byte, chunk)
	run := func(b *testing.B, dial func() net.Conn) {
		c := dial()
		defer c.Close()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 256<<10)
			left := int64(b.N) * chunk
			for left > 0 {
				n, err := c.Read(buf)
				if err != nil {
					b.Error(err)
					return
				}
				left -= int64(n)
			}
		}()
		b.SetBytes(chunk)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := c.Write(payload); err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
	}
	b.Run("direct", func(b *testing.B) {
		run(b, func() net.Conn {
			c, err := net.Dial("tcp", sink.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			return c
		})
	})
	b.Run("connect-via-socket", func(b *testing.B) {
		run(b, func() net.Conn {
			c, err := dialSocket(context.Background(), path)
			if err != nil {
				b.Fatal(err)
			}
			fmt.Fprintf(c, "CONNECT 127.0.0.1:%s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\n", port, port)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != 200 || br.Buffered() != 0 {
				b.Fatalf("CONNECT: %v %v", resp, err)
			}
			return c
		})
	})
}

// TestEgressCarriesNoCanary: a decoy of a sandbox home in a plain-HTTP
// egress request's header, URL or body, or in a CONNECT's headers, is
// refused before it reaches the destination and trips the sending task's
// wire `canary`; the same request without it passes.
func TestEgressCarriesNoCanary(t *testing.T) {
	e := newEgressFixture(t)
	m := canary.NewMaker([]byte("a key of the daemon's, 32 bytes!"))
	d := m.For(taskA)
	set := canary.NewSet(map[canary.Owner][]string{{TaskID: taskA, Ref: "a"}: d.Marks})
	trips := make(chan string, 8)
	e.p.o.Canaries = func() *canary.Set { return set }
	e.p.o.Tripwire = func(taskID, ref, what string) { trips <- taskID + ":" + what }
	reg := "http://registry.test:" + e.plainPort
	mark := d.Marks[0]
	c := e.client(t, taskA, "a")
	if code, body, _ := get(t, c, reg+"/ok"); code != 200 || !strings.Contains(body, "hello") {
		t.Fatalf("a clean request: %d %s", code, body)
	}
	tripped := func(what string) {
		t.Helper()
		select {
		case got := <-trips:
			if got != taskA+":"+TripCanary {
				t.Fatalf("%s: tripped %s", what, got)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no tripwire", what)
		}
	}
	for name, req := range map[string]func() *http.Request{
		"URL": func() *http.Request { r, _ := http.NewRequest("GET", reg+"/leak?k="+mark, nil); return r },
		"header": func() *http.Request {
			r, _ := http.NewRequest("GET", reg+"/x", nil)
			r.Header.Set("Authorization", "token "+mark)
			return r
		},
		"body": func() *http.Request {
			r, _ := http.NewRequest("POST", reg+"/upload", strings.NewReader(strings.Repeat("x", 100000)+mark+"tail"))
			return r
		},
	} {
		resp, err := e.client(t, taskA, "a").Do(req())
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.Contains(string(b), "got") {
				t.Fatalf("%s: the decoy reached the destination: %s", name, b)
			}
		}
		tripped(name)
	}
}
