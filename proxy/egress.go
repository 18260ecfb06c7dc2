package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"lazy/api"
	"lazy/canary"
	"lazy/config"
)

// Egress (CONTRACT §15): the proxy is a sandbox's only door to the network.
// A sandboxed agent's HTTPS_PROXY and HTTP_PROXY name the forwarder on its
// own loopback, which copies to its task's socket; here a `CONNECT
// host:port` becomes a tunnel and an absolute-form `http://` request is
// forwarded, each only to a destination egress.allow lists. The destination
// is resolved once, every address it resolves to is checked, and the
// connection is made to a checked address, never by name again, so a name
// that answers differently the second time (DNS rebinding) reaches nothing
// unchecked. An address that is loopback, private, link-local, shared
// (CGNAT), unspecified or a cloud metadata address is reached only when
// that exact host:port is listed. A tunnel is opaque: the proxy sees its
// destination and counts its bytes, nothing of what it carries.

// Refusal causes of egress.
const (
	// CauseEgressNotAllowed: the destination is not in egress.allow (403).
	CauseEgressNotAllowed = "egress_not_allowed"
	// CauseEgressPrivate: the destination resolves to a loopback, private,
	// link-local or metadata address and its exact host:port is not
	// listed (403).
	CauseEgressPrivate = "egress_private_address"
)

// Bounds of one egress connection.
const (
	egressResolveTimeout = 10 * time.Second
	egressDialTimeout    = 10 * time.Second
)

// Resolver resolves a destination's name to its addresses.
type Resolver func(ctx context.Context, host string) ([]netip.Addr, error)

// egress is the proxy's egress half: the transport of plain http://
// requests (pooled; every new connection checked as it is dialled) and the
// reverse proxy over it.
type egress struct {
	p  *Proxy
	tr *http.Transport
	rp *httputil.ReverseProxy
}

func newEgress(p *Proxy) *egress {
	e := &egress{p: p}
	e.tr = &http.Transport{
		Proxy:                 nil,
		DialContext:           e.dialChecked,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		ResponseHeaderTimeout: 5 * time.Minute,
		DisableCompression:    true,
	}
	e.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// the absolute URL as the client sent it; nothing added
			pr.Out.Host = pr.In.URL.Host
		},
		Transport:     e.tr,
		FlushInterval: -1,
		BufferPool:    bufferPool{},
		ErrorHandler:  e.errorHandler,
		ModifyResponse: func(resp *http.Response) error {
			if et := egressTrafficOf(resp.Request.Context()); et != nil && resp.Body != nil {
				resp.Body = &countingBody{ReadCloser: resp.Body, n: &et.down}
			}
			return nil
		},
	}
	return e
}

// isEgress reports a request for the network rather than for the model
// routes: CONNECT, or an absolute-form request line.
func isEgress(r *http.Request) bool {
	return r.Method == http.MethodConnect || r.URL.IsAbs() || r.URL.Host != ""
}

// egressTraffic is what one egress connection or request did, for its
// traffic line.
type egressTraffic struct {
	up, down atomic.Int64 // counted as bodies are read, on the transport's goroutines
	refused  string
	err      string
}

type egressKey struct{}

func egressTrafficOf(ctx context.Context) *egressTraffic {
	et, _ := ctx.Value(egressKey{}).(*egressTraffic)
	return et
}

// serveEgress answers CONNECT and absolute-form requests.
func (p *Proxy) serveEgress(w http.ResponseWriter, r *http.Request) {
	start := p.now()
	rec := &statusWriter{ResponseWriter: w}
	et := &egressTraffic{}
	v := viaOf(r.Context())
	tr := api.Traffic{Time: start.UTC(), Method: r.Method, Egress: true}
	if v != nil {
		tr.TaskRef, tr.TaskID, tr.Role = v.taskRef, v.taskID, p.roleOf(v.taskID)
	}
	defer func() {
		tr.Status = rec.status
		if tr.Status == 0 {
			tr.Status = 499
		}
		tr.Millis = p.now().Sub(start).Milliseconds()
		tr.BytesUp, tr.BytesDown, tr.Refused, tr.Error = et.up.Load(), et.down.Load(), et.refused, et.err
		p.logTraffic(r.Context(), slog.LevelInfo, &tr)
		if p.o.Publish != nil {
			p.o.Publish(tr)
		}
	}()
	host, port, err := egressTarget(r)
	tr.Dest = net.JoinHostPort(host, port)
	tr.Path = tr.Dest
	if r.Method != http.MethodConnect {
		tr.Path = "http://" + tr.Dest + r.URL.EscapedPath()
	}
	if err != nil {
		tr.Path = r.Host
		egressError(rec, http.StatusBadRequest, "", "lazy proxy: "+err.Error())
		return
	}
	if r.Header.Get("Origin") != "" || (r.Header.Get("Sec-Fetch-Site") != "" && r.Header.Get("Sec-Fetch-Site") != "none") {
		et.refused = CauseCrossOrigin
		egressError(rec, http.StatusForbidden, CauseCrossOrigin, "lazy proxy: requests from a web page are refused; only agents call the proxy")
		return
	}
	if v == nil {
		// the TCP listener: no task to hold the connection to, so no
		// egress (sandboxed agents come through their task's socket)
		et.refused = CauseNotFromSandbox
		egressError(rec, http.StatusForbidden, CauseNotFromSandbox, "lazy proxy: egress is served only to a task's sandbox, through its own proxy socket; this request came on the TCP listener")
		return
	}
	// a decoy secret of a sandbox home in the request's target or headers
	// (a CONNECT's too): refused before anything is dialled
	if owner, hit := p.CanaryInHead(r); hit {
		p.TripCanary(v.taskID, v.taskRef, owner)
		et.refused = CauseTripwire
		tr.Tripwire = TripCanary
		egressError(rec, http.StatusForbidden, CauseTripwire, canaryText)
		return
	}
	rt := p.routes.Load()
	if _, allowed := egressAllowed(rt.egress, host, port); !allowed {
		et.refused = CauseEgressNotAllowed
		egressError(rec, http.StatusForbidden, CauseEgressNotAllowed, fmt.Sprintf("lazy proxy: %s is not in egress.allow; to open it, list it in [egress] allow in .lazy/config.toml (a protected file: the change needs the approval passphrase)", tr.Dest))
		return
	}
	if r.Method == http.MethodConnect {
		p.tunnel(rec, r, v, host, port, et)
		return
	}
	if r.URL.Scheme != "http" {
		egressError(rec, http.StatusBadRequest, "", "lazy proxy: only http:// URLs are forwarded as they are; reach an https:// URL with CONNECT (set HTTPS_PROXY)")
		return
	}
	r.URL.Host = tr.Dest
	if r.Body != nil && r.Body != http.NoBody {
		// a plain-HTTP body is scanned as it streams: a read that would
		// hand on a decoy fails and trips the wire
		r.Body = &countingBody{ReadCloser: p.CanaryBody(r.Body, func(o canary.Owner) { p.TripCanary(v.taskID, v.taskRef, o) }), n: &et.up}
	}
	p.egress.rp.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), egressKey{}, et)))
}

// egressTarget is the destination of an egress request, host lower case
// (an IPv6 address without brackets) and a numeric port.
func egressTarget(r *http.Request) (host, port string, err error) {
	if r.Method == http.MethodConnect {
		h, p, err := net.SplitHostPort(r.Host)
		if err != nil || h == "" {
			return "", "", fmt.Errorf("CONNECT wants host:port, got %q", r.Host)
		}
		host, port = h, p
	} else {
		host, port = r.URL.Hostname(), r.URL.Port()
		if port == "" {
			port = "80"
		}
		if host == "" {
			return "", "", fmt.Errorf("an absolute-form request wants a host, got %q", r.URL.String())
		}
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("the port of %q is not a number from 1 to 65535", r.Host)
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return "", "", fmt.Errorf("an address with a zone is not a destination: %q", r.Host)
		}
		host = a.Unmap().String()
	}
	return host, strconv.Itoa(n), nil
}

// egressAllowed reports whether host:port is listed, and whether an entry
// names exactly that host:port (which alone opens a private address).
func egressAllowed(rules []config.EgressRule, host, port string) (exact, allowed bool) {
	for _, r := range rules {
		if r.Matches(host, port) {
			allowed = true
			if r.Exact() {
				exact = true
			}
		}
	}
	return exact, allowed
}

// egressRefusal is a destination refused after resolution.
type egressRefusal struct {
	cause, dest string
	addr        netip.Addr
}

func (e *egressRefusal) Error() string {
	return fmt.Sprintf("%s resolves to %s, a loopback, private, link-local or metadata address: to reach it, list exactly %q in [egress] allow in .lazy/config.toml (a protected file: the change needs the approval passphrase)", e.dest, e.addr, e.dest)
}

// checkedAddrs resolves host once and checks every address it has; the
// caller dials only these.
func (p *Proxy) checkedAddrs(ctx context.Context, host, port string) ([]netip.Addr, error) {
	rt := p.routes.Load()
	exact, allowed := egressAllowed(rt.egress, host, port)
	if !allowed {
		return nil, &egressRefusal{cause: CauseEgressNotAllowed, dest: net.JoinHostPort(host, port)}
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		ctx, cancel := context.WithTimeout(ctx, egressResolveTimeout)
		defer cancel()
		resolve := p.o.Resolve
		if resolve == nil {
			resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
				return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			}
		}
		if addrs, err = resolve(ctx, host); err != nil {
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("resolve %s: no address", host)
		}
	}
	for i, a := range addrs {
		a = a.Unmap()
		addrs[i] = a
		if !exact && PrivateAddr(a) {
			return nil, &egressRefusal{cause: CauseEgressPrivate, dest: net.JoinHostPort(host, port), addr: a}
		}
	}
	return addrs, nil
}

// dialChecked dials one of the checked addresses of addr (host:port).
func (e *egress) dialChecked(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	addrs, err := e.p.checkedAddrs(ctx, host, port)
	if err != nil {
		return nil, err
	}
	n, _ := strconv.Atoi(port)
	d := net.Dialer{Timeout: egressDialTimeout, KeepAlive: 30 * time.Second}
	var first error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(n)).String())
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

// errorHandler answers a plain http:// request that reached no destination.
func (e *egress) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	et := egressTrafficOf(r.Context())
	var ref *egressRefusal
	if errors.As(err, &ref) {
		et.refused = ref.cause
		egressError(w, http.StatusForbidden, ref.cause, "lazy proxy: "+ref.Error())
		return
	}
	if r.Context().Err() != nil {
		w.WriteHeader(499)
		return
	}
	et.err = upstreamCause(err)
	status := http.StatusBadGateway
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		status = http.StatusGatewayTimeout
	}
	egressError(w, status, "", "lazy proxy: "+et.err)
}

// tunnel answers CONNECT: the destination checked and dialled, then the
// bytes copied both ways until either side closes or the task's socket
// does (its turn ended).
func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request, v *via, host, port string, et *egressTraffic) {
	up, err := p.egress.dialChecked(r.Context(), "tcp", net.JoinHostPort(host, port))
	if err != nil {
		var ref *egressRefusal
		if errors.As(err, &ref) {
			et.refused = ref.cause
			egressError(w, http.StatusForbidden, ref.cause, "lazy proxy: "+ref.Error())
			return
		}
		et.err = upstreamCause(err)
		status := http.StatusBadGateway
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			status = http.StatusGatewayTimeout
		}
		egressError(w, status, "", "lazy proxy: "+et.err)
		return
	}
	defer up.Close()
	client, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		et.err = "hijack: " + err.Error()
		egressError(w, http.StatusInternalServerError, "", "lazy proxy: this connection cannot carry a tunnel")
		return
	}
	defer client.Close()
	if sw, ok := w.(*statusWriter); ok {
		sw.status = http.StatusOK
	}
	_ = client.SetDeadline(time.Time{})
	raw := client
	if cc, ok := client.(*countedConn); ok {
		raw = cc.Conn // copied through directly (splice); closed as counted
	}
	if _, err := io.WriteString(raw, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	// what the client sent after its request line, already read
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Peek(n)
		m, err := up.Write(b)
		et.up.Add(int64(m))
		if err != nil {
			return
		}
	}
	var wg sync.WaitGroup
	var upN, downN int64
	wg.Add(2)
	go func() {
		defer wg.Done()
		upN, _ = io.Copy(up, raw)
		closeWrite(up)
	}()
	go func() {
		defer wg.Done()
		downN, _ = io.Copy(raw, up)
		closeWrite(raw)
	}()
	ended := make(chan struct{})
	go func() {
		select {
		case <-v.done: // the turn ended: its socket and every tunnel close
			_ = client.Close()
			_ = up.Close()
		case <-ended:
		}
	}()
	wg.Wait()
	close(ended)
	et.up.Add(upN)
	et.down.Add(downN)
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		_ = c.Close()
	}
}

// egressError answers an egress request in plain text (the client is a
// package manager or git, not a model client).
func egressError(w http.ResponseWriter, status int, cause, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	if cause != "" {
		w.Header().Set("x-lazy-refused", cause)
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

// roleOf is the role of the task's model grant (the traffic line's role
// field; "" when the task holds none).
func (p *Proxy) roleOf(taskID string) string {
	snap := p.o.Grants.Load()
	if snap == nil {
		return ""
	}
	for _, g := range *snap {
		if g.TaskID == taskID && !isEditorGrant(&g) {
			return g.Role
		}
	}
	return ""
}

// countingBody counts the bytes read through it.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// nonPublic are the ranges egress reaches only by an exact host:port entry.
var nonPublic = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",      // this network, unspecified
		"10.0.0.0/8",     // private
		"100.64.0.0/10",  // shared address space (CGNAT)
		"127.0.0.0/8",    // loopback
		"169.254.0.0/16", // link-local, cloud metadata (169.254.169.254)
		"172.16.0.0/12",  // private
		"192.0.0.0/24",   // IETF protocol assignments
		"192.168.0.0/16", // private
		"198.18.0.0/15",  // benchmarking
		"224.0.0.0/4",    // multicast
		"240.0.0.0/4",    // reserved, broadcast
		"::/128",         // unspecified
		"::1/128",        // loopback
		"64:ff9b:1::/48", // local-use IPv4/IPv6 translation
		"fc00::/7",       // unique local (fd00:ec2::254, a cloud metadata address)
		"fe80::/10",      // link-local
		"fec0::/10",      // site-local (deprecated)
		"ff00::/8",       // multicast
		"100::/64",       // discard
		"2001:db8::/32",  // documentation
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// PrivateAddr reports an address egress does not reach by a name or a
// wildcard: loopback, private, link-local, shared (CGNAT), unspecified,
// multicast, reserved, a cloud metadata address, and an IPv6 address that
// embeds an IPv4 one (mapped, NAT64, 6to4) of those.
func PrivateAddr(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range nonPublic {
		if p.Contains(a) {
			return true
		}
	}
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64.Contains(a), v4compat.Contains(a):
			return PrivateAddr(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(a):
			return PrivateAddr(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	return false
}

// IPv6 ranges that embed an IPv4 address: NAT64, IPv4-compatible
// (deprecated), 6to4.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	v4compat  = netip.MustParsePrefix("::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)
