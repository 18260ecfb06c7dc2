package proxy

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
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"lazy/api"
	"lazy/canary"
	"lazy/config"
)

// Options configure the proxy.
type Options struct {
	Config *config.Config
	Home   string // lazy home, for default credential file paths
	// Grants is the registry snapshot published by the grants actor.
	Grants  *atomic.Pointer[Grants]
	Log     *slog.Logger
	Publish func(api.Traffic)
	// Transport reaches the upstreams (default: a pooled http.Transport).
	Transport http.RoundTripper
	Now       func() time.Time
	// BodyReadTimeout replaces the package's BodyReadTimeout when set.
	BodyReadTimeout time.Duration
	// Port is the proxy's own TCP port: a request whose Host names another
	// port is refused (0: any loopback port). The sandbox forwarder listens on
	// the same port inside the sandbox, so the agent's Host matches.
	Port int
	// Reserve holds tokens of a task's budget for one model call before it
	// leaves, and answers how many it held (0: the task has no budget) or
	// why the call is refused (the budget is used up, calls on their way
	// included). estimate is called, only for a task with a budget, to size
	// the hold (see reservation). The call's traffic event settles it
	// (Traffic.Reserved, Traffic.Charged). nil: no budgets.
	Reserve func(taskID string, estimate func() int64) (held int64, refused string)
	// Tripwire is told when a task's traffic trips a wire (the real
	// credential in a response, another task's placeholder in a request). The
	// daemon revokes the task's grants and records it on the task. It must
	// not block.
	Tripwire func(taskID, taskRef, what string)
	// OverBudget says whether a task has used its token budget, and why in
	// words; its calls are then refused before they leave (nil: no budgets)
	OverBudget func(taskID string) (bool, string)
	// Canaries is the decoy secrets of every sandbox home, as they are now
	// (package canary); a request carrying one is refused before it
	// leaves, tripwire canary (nil: none).
	Canaries func() *canary.Set
	// Resolve resolves an egress destination's name (nil: the system
	// resolver). Tests give names of their own.
	Resolve Resolver
	// Transcript is asked, for each task's model call with a reply, where
	// the reply's transcript goes (transcript.go); nil, or a nil answer:
	// the reply is not read for one (no cost while nobody watches).
	Transcript func(taskID, taskRef string) Transcript
}

// Refusal causes, as the traffic stream and the 401 body name them.
const (
	CauseUnknownPlaceholder = "unknown_placeholder"
	CauseExpiredGrant       = "expired_grant"
	CauseProviderMissing    = "provider_credential_missing"
	CauseProviderExpired    = "provider_credential_expired"
	CauseEditorMissing      = "editor_credential_missing"
	CauseNoUpstream         = "no_usable_upstream"
	CauseRoleNotConfigured  = "role_not_configured"
	CauseWrongGrantKind     = "wrong_grant_kind"
	CauseCrossOrigin        = "cross_origin"
	CauseNoGrant            = "no_grant"
	// CauseBudgetExceeded: the task has used its token budget (429)
	CauseBudgetExceeded = "budget_exceeded"
	CauseTripwire       = "tripwire"
	CauseBodyTimeout    = "request_body_timeout"
)

// What a tripwire saw (the traffic line ends " tripwire: <what>").
const (
	TripRealCredential     = "real_credential_in_response"
	TripForeignPlaceholder = "foreign_placeholder"
	// TripMisplacedPlaceholder: the editor route's own placeholder
	// somewhere its client never carries its key (a cookie, a Referer, the
	// query, the body): the real key would go there, so nothing goes
	TripMisplacedPlaceholder = "misplaced_placeholder"
)

// BodyReadTimeout bounds how long a client may take to send a request body;
// a body trickled slower than that is cut (408). Options.BodyReadTimeout
// changes it for one proxy.
const BodyReadTimeout = 60 * time.Second

// MaxSubstituteBody is the largest body (by declared Content-Length) the
// editor route reads whole, to look for placeholders before it forwards a
// byte; a larger or undeclared body is scanned as it streams, and a
// placeholder in it is masked.
const MaxSubstituteBody = 64 << 10

// maxReplayBody bounds a request body buffered so a fallback can resend it;
// maxReplayTotal bounds all such bodies held at once. A body that does not
// fit is streamed to the first target alone, with no fallback: memory stays
// bounded whatever slow or hostile clients send.
const (
	maxReplayBody  = 32 << 20
	maxReplayTotal = 64 << 20
)

// target is one upstream with its credential setting.
type target struct {
	url        *url.URL
	origin     string
	credential string // provider | none | editor
	primary    bool
}

// Proxy is the http.Handler of the proxy listener.
type Proxy struct {
	o Options
	// routes is where each request goes and with what; Reconfigure swaps
	// it whole, and each request reads it once, so a request never sees
	// half of an old config and half of a new one
	routes  atomic.Pointer[routes]
	rp      *httputil.ReverseProxy
	log     *slog.Logger
	bodies  watchdog     // cuts bodies that arrive too slowly
	ownHost string       // 127.0.0.1:<Port>, the Host agents send
	replay  atomic.Int64 // bytes of request bodies held for replay
	index   atomic.Pointer[grantIndex]
	// tripped holds the placeholders of tasks that tripped a wire: they
	// are refused from that instant, before the registry catches up.
	tripped sync.Map
	egress  *egress // CONNECT and absolute-form http:// (egress.go)
}

// routes is the part of the proxy that comes from the config: the targets,
// the credential files and what no-grant traffic gets.
type routes struct {
	primary   target
	fallbacks []target
	roles     map[string]target
	editor    target
	provider  *CredentialFile
	kind      string
	editorKey *CredentialFile
	// gemini is proxy.gemini's target, geminiKey credentials.gemini (gemini.go)
	gemini    target
	geminiKey *CredentialFile
	noGrant   string
	// tcpGrants: agents run in no sandbox (agent.runner = "process") and
	// present their placeholders on the TCP listener; otherwise a
	// placeholder is accepted only through its task's own socket
	tcpGrants bool
	maxConns  int // sandbox.max_connections: per task, at its socket
	egress    []config.EgressRule
	// openai is [proxy.openai], the OpenAI Responses route's target, and
	// openaiKey [credentials.openai] (openai.go)
	openai    target
	openaiKey *CredentialFile
}

// New builds the proxy from config. An origin collision is refused by
// config.Validate before this runs; New checks it again for callers that
// built a Config by hand.
func New(o Options) (*Proxy, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	p := &Proxy{o: o, log: o.Log}
	p.egress = newEgress(p)
	if err := p.Reconfigure(o.Config); err != nil {
		return nil, err
	}
	if o.Port != 0 {
		p.ownHost = "127.0.0.1:" + strconv.Itoa(o.Port)
	}
	tr := o.Transport
	if tr == nil {
		tr = &http.Transport{
			Proxy:                 nil,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          1024,
			MaxIdleConnsPerHost:   256,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
			DisableCompression:    true,
		}
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:   p.rewrite,
		Transport: &chainTransport{p: p, base: tr},
		// 0: a stream (text/event-stream, or a body of unknown length) is
		// flushed at every write by ReverseProxy itself; a reply of known
		// length goes out whole (-1 would arm a timer per response)
		FlushInterval:  0,
		BufferPool:     bufferPool{},
		ErrorHandler:   p.errorHandler,
		ModifyResponse: p.modifyResponse,
		ErrorLog:       nil,
	}
	return p, nil
}

// Reconfigure applies a config to the requests that start from now on;
// requests in flight finish with the routes they started with. The tripped
// placeholders, the grants and the listener stay as they are.
func (p *Proxy) Reconfigure(cfg *config.Config) error {
	targets, err := cfg.Targets()
	if err != nil {
		return err
	}
	old := p.routes.Load()
	mk := func(raw string, primary bool) (target, error) {
		org, err := config.Origin(raw)
		if err != nil {
			return target{}, err
		}
		u, err := url.Parse(raw)
		if err != nil {
			return target{}, err
		}
		return target{url: u, origin: org, credential: targets[org].Credential, primary: primary}, nil
	}
	rt := &routes{roles: map[string]target{}, kind: cfg.Credentials.Provider.Kind, noGrant: cfg.Proxy.NoGrant,
		tcpGrants: cfg.Agent.Runner == config.RunnerProcess, maxConns: cfg.Sandbox.MaxConnections,
		provider:  p.credentialFile(old, cfg.ProviderCredentialFile(p.o.Home), func(r *routes) *CredentialFile { return r.provider }),
		editorKey: p.credentialFile(old, cfg.EditorCredentialFile(p.o.Home), func(r *routes) *CredentialFile { return r.editorKey }),
		geminiKey: p.credentialFile(old, cfg.GeminiCredentialFile(p.o.Home), func(r *routes) *CredentialFile { return r.geminiKey })}
	if rt.primary, err = mk(cfg.Proxy.Upstream, true); err != nil {
		return fmt.Errorf("proxy.upstream: %w", err)
	}
	for i, f := range cfg.Proxy.Fallback {
		t, err := mk(f.Upstream, false)
		if err != nil {
			return fmt.Errorf("proxy.fallback[%d]: %w", i, err)
		}
		rt.fallbacks = append(rt.fallbacks, t)
	}
	for name, r := range cfg.Models.Roles {
		t, err := mk(r.Endpoint, true)
		if err != nil {
			return fmt.Errorf("models.roles.%s: %w", name, err)
		}
		if r.Local {
			t.credential = config.CredentialNone
		}
		rt.roles[name] = t
	}
	if rt.gemini, err = mk(cfg.Proxy.Gemini.Upstream, true); err != nil {
		return fmt.Errorf("proxy.gemini.upstream: %w", err)
	}
	eu, err := url.Parse(cfg.Proxy.EditorUpstream)
	if err != nil {
		return fmt.Errorf("proxy.editor_upstream: %w", err)
	}
	rt.editor = target{url: eu, credential: "editor", primary: true}
	if rt.openai, err = openAITarget(cfg); err != nil {
		return fmt.Errorf("proxy.openai.upstream: %w", err)
	}
	rt.openaiKey = p.credentialFile(old, cfg.OpenAICredentialFile(p.o.Home), func(r *routes) *CredentialFile { return r.openaiKey })
	if rt.egress, err = cfg.Egress.Rules(); err != nil {
		return err
	}
	p.routes.Store(rt)
	// an idle connection was checked against the old list: none is reused
	p.egress.tr.CloseIdleConnections()
	return nil
}

// credentialFile keeps the old routes' credential file when its path is
// unchanged, so its cache and watch stay.
func (p *Proxy) credentialFile(old *routes, path string, of func(*routes) *CredentialFile) *CredentialFile {
	if old != nil && of(old).Path == path {
		return of(old)
	}
	return &CredentialFile{Path: path}
}

// plan is what ServeHTTP decided for one request; the transport and the
// traffic record read it from the request context.
type plan struct {
	rt       *routes // the config this request is served under
	via      *via    // the task whose socket the request came in on (nil: TCP)
	grant    *Grant
	role     string // claimed by x-svc-role on traffic with no grant
	taskRef  string // claimed by x-svc-task-id on traffic with no grant
	chain    []target
	editor   bool
	session  bool        // editor host-session route: forward the credential untouched
	editorPH string      // the placeholder in the editor path
	outPath  string      // upstream path (editor route)
	reqPath  string      // the path to append to each target's base path
	body     *replayBody // buffered body for replay, when there are fallbacks
	answered atomic.Pointer[target]
	refused  string
	tripwire string
	// lateTrip is a wire tripped by the transport's goroutine (tripLater);
	// revoked: the task's placeholders were refused and the daemon told
	lateTrip atomic.Pointer[string]
	revoked  atomic.Bool
	// upstreamErr is why no upstream answered (the traffic line's error)
	upstreamErr string
	reserved    int64 // replay budget held by this request
	// cred, editorCred, openaiCred and geminiCred are the real credentials
	// as read for this request (one stat each), injected by the transport
	// and known to the scrubber
	cred, editorCred, openaiCred, geminiCred *Credential
	// openai: the OpenAI Responses route (its refusals in OpenAI's shape);
	// gemini: a Gemini route (Google's shape, gemini.go)
	openai, gemini bool
	// watchdog is the body watchdog that watches this request's body (nil:
	// none); w is the request's writer (its read deadline cuts the body)
	watchdog *watchdog
	w        http.ResponseWriter
	// rec and watched are the request's status writer and watched body, kept
	// in the plan (one allocation for the three)
	rec     statusWriter
	watched watchdogBody
	// heldBody is the body read for replay (body points at it), bodyReader
	// its first reading when it is one chunk
	heldBody   replayBody
	bodyReader bytes.Reader
	// hold is the request's pooled body buffers (bodypool.go); bodyRead:
	// bufferForReplay has read the body (held whole, or in part and put
	// back in front of the rest)
	hold         bodyHold
	bodyRead     bool
	bodyTimedOut atomic.Bool
	// usage is what the reply said the call cost (usageSeen: it said so);
	// written by the body's reader, read after the body is copied
	usage     api.CallUsage
	usageSeen bool
	usageScan usageScanner // the reader that fills usage (no allocation of its own)
	// canaryHit is the owner of a decoy the body's reader saw (set from
	// the transport's goroutine)
	canaryHit atomic.Pointer[canary.Owner]
	// usageDone: the reply was read to its end (its usage is all it cost)
	usageDone bool
	// replyEnd reads the transcript of a reply of one message, after the
	// reply was sent (nil: none to read, or read as it passed)
	replyEnd func()
	// held is what Reserve held of the task's budget; left: the call was
	// handed to the transport and may have reached the upstream
	held int64
	left bool
	// bodyErr is why the body could not be read to size the reservation
	bodyErr error
}

type planKey struct{}

func (p *Proxy) now() time.Time { return p.o.Now() }

func (p *Proxy) bodyTimeout() time.Duration {
	if p.o.BodyReadTimeout > 0 {
		return p.o.BodyReadTimeout
	}
	return BodyReadTimeout
}

// ServeHTTP resolves the grant, plans the targets and forwards.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isEgress(r) {
		p.serveEgress(w, r) // CONNECT, absolute-form http:// (egress.go)
		return
	}
	start := p.now()
	pl := &plan{rt: p.routes.Load(), via: viaOf(r.Context()), w: w, openai: isOpenAIRoute(r.URL.Path), gemini: isGeminiRoute(r)}
	pl.rec = statusWriter{ResponseWriter: w, p: p, pl: pl}
	rec := &pl.rec
	logPath := r.URL.EscapedPath()
	defer func() {
		pl.hold.finish()
		if pl.replyEnd != nil {
			pl.replyEnd() // the transcript of a whole reply (transcript.go)
		}
		p.canaryTripped(pl) // a decoy seen after the reply began
		if pl.reserved > 0 {
			p.replay.Add(-pl.reserved)
		}
		tr := api.Traffic{Time: start.UTC(), Method: r.Method, Path: logPath, Status: rec.status, Millis: p.now().Sub(start).Milliseconds(), Refused: pl.refused, Tripwire: pl.tripwire, Error: pl.upstreamErr}
		if late := pl.lateTrip.Load(); late != nil && tr.Tripwire == "" {
			tr.Tripwire = *late
		}
		if tr.Status == 0 {
			tr.Status = 499
		}
		if pl.grant != nil {
			tr.TaskRef, tr.TaskID, tr.Role = pl.grant.TaskRef, pl.grant.TaskID, pl.grant.Role
		} else if pl.tripwire != "" && pl.via != nil {
			tr.TaskRef, tr.TaskID = pl.via.taskRef, pl.via.taskID // the socket's task tripped it
		} else {
			tr.ClaimedRef, tr.ClaimedRole = pl.taskRef, pl.role
		}
		if t := pl.answered.Load(); t != nil {
			tr.Upstream = t.url.Host
		}
		if pl.usageSeen {
			u := pl.usage
			tr.Usage = &u
		}
		if pl.held > 0 {
			tr.Reserved, tr.Charged = pl.held, pl.charge()
		}
		p.logTraffic(r.Context(), slog.LevelInfo, &tr)
		if p.o.Publish != nil {
			p.o.Publish(tr)
		}
	}()

	if !p.sameOrigin(r) {
		p.refuseStatus(rec, pl, http.StatusForbidden, "permission_error", CauseCrossOrigin, "lazy proxy: requests from a web page (an Origin or Sec-Fetch-Site header, or a Host other than this proxy's own loopback address) are refused; only agents call the proxy")
		return
	}
	if r.Method == http.MethodOptions {
		writeAPIError(rec, http.StatusMethodNotAllowed, "invalid_request_error", "lazy proxy: OPTIONS is answered here and never forwarded", "")
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		// a watchdog, not a deadline: the connection's deadline is left to
		// net/http (its own background read uses it) unless the body is
		// still arriving when the time is up; then a past deadline cuts it
		pl.watchdog = &p.bodies
		p.bodies.watch(pl, start.Add(p.bodyTimeout()), p.bodyTimeout()/4)
		defer p.bodies.done(pl)
		pl.watched = watchdogBody{ReadCloser: r.Body, pl: pl}
		r.Body = &pl.watched
	}
	if strings.HasPrefix(r.URL.Path, "/_svc/") {
		masked, ok := p.planEditor(rec, r, pl)
		logPath = masked
		if !ok {
			return
		}
	} else if pl.openai {
		if !p.planOpenAI(rec, r, pl) {
			return
		}
	} else if pl.gemini {
		if !p.planGemini(rec, r, pl) {
			return
		}
	} else if !p.planModel(rec, r, pl) {
		return
	}
	if pl.grant != nil {
		if g := p.foreignIn(r, pl.grant); g != nil {
			p.trip(pl, TripForeignPlaceholder)
			p.refuseStatus(rec, pl, http.StatusForbidden, "permission_error", CauseTripwire, "lazy proxy: this request carries another task's placeholder; the task's grant is revoked")
			return
		}
	}
	if !p.canaryCheck(rec, r, pl) {
		return
	}
	if len(pl.chain) > 1 && r.Body != nil && r.Body != http.NoBody {
		if err := p.bufferForReplay(r, pl); err != nil {
			p.bodyError(rec, pl, err)
			return
		}
	}
	if pl.grant != nil && !pl.editor && p.o.Reserve != nil {
		held, why := p.o.Reserve(pl.grant.TaskID, func() int64 { return p.reservation(r, pl) })
		pl.held = held
		if why != "" {
			p.refuseStatus(rec, pl, http.StatusTooManyRequests, "rate_limit_error", CauseBudgetExceeded, "lazy proxy: "+why)
			return
		}
		if pl.bodyErr != nil || p.canaryTripped(pl) {
			p.bodyError(rec, pl, pl.bodyErr)
			return
		}
	}
	if !p.readAhead(rec, r, pl) {
		return
	}
	pl.left = true
	p.rp.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), planKey{}, pl)))
	// a reply of known length is whole now: its last bytes go to the agent
	// before the call's bookkeeping (the traffic record, the log line, the
	// usage settled), not after it. The budget stays safe meanwhile: the
	// call's reservation is held until its traffic event gives it back.
	if rec.status != 0 && w.Header().Get("Content-Length") != "" {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// bodyError answers a request whose body could not be read: 403 when its
// reader met a decoy, 408 when it came too slowly, 400 otherwise.
func (p *Proxy) bodyError(w http.ResponseWriter, pl *plan, err error) {
	if p.canaryTripped(pl) {
		p.refuseStatus(w, pl, http.StatusForbidden, "permission_error", CauseTripwire, canaryText)
		return
	}
	if pl.bodyTimedOut.Load() {
		writeAPIError(w, http.StatusRequestTimeout, "invalid_request_error", fmt.Sprintf("lazy proxy: the request body did not arrive within %s", p.bodyTimeout()), CauseBodyTimeout)
		return
	}
	writeAPIError(w, http.StatusBadRequest, "invalid_request_error", "lazy proxy: could not read the request body: "+err.Error(), "")
}

// sameOrigin refuses what a browser sends (an Origin, or a Sec-Fetch-Site
// other than "none") and any Host that is not this proxy's loopback address,
// so no web page, by form, fetch or DNS rebinding, reaches the proxy.
func (p *Proxy) sameOrigin(r *http.Request) bool {
	if r.Header.Get("Origin") != "" {
		return false
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "none" {
		return false
	}
	if r.Host == p.ownHost {
		return true // what every agent sends: the address it was given
	}
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		host, port = r.Host, ""
	}
	if host != "localhost" {
		ip := net.ParseIP(strings.Trim(host, "[]"))
		if ip == nil || !ip.IsLoopback() {
			return false
		}
	}
	return p.o.Port == 0 || port == strconv.Itoa(p.o.Port)
}

// stopWatchdog stops the body watchdog once the body is read (again:
// nothing).
func (pl *plan) stopWatchdog() {
	if pl.watchdog != nil {
		pl.watchdog.done(pl)
	}
}

// cutBody is the watchdog's cut: the body did not arrive in time. A past
// read deadline ends it (the connection's deadline is left to net/http
// until then: its own background read uses it).
func (pl *plan) cutBody() {
	pl.bodyTimedOut.Store(true)
	_ = http.NewResponseController(pl.w).SetReadDeadline(time.Unix(1, 0))
}

// watchdogBody stops the body watchdog at the end of the body.
type watchdogBody struct {
	io.ReadCloser
	pl *plan
}

func (d *watchdogBody) Read(b []byte) (int, error) {
	n, err := d.ReadCloser.Read(b)
	if err == io.EOF {
		d.pl.stopWatchdog()
	}
	return n, err
}

// bufferForReplay reads the body so a fallback can resend it, within the
// per-request and the total replay budget. A body that does not fit goes to
// the first target alone, streamed, with what was read put back in front.
func (p *Proxy) bufferForReplay(r *http.Request, pl *plan) error {
	const chunkSize = 64 << 10
	// once: a body that did not fit is the held part put back in front of
	// the rest, and reading it again would take its length from the first
	// reading (a body sent with whole chunks missing, found by an outside
	// attack pass with the replay total spent and a budget's hold to size)
	pl.bodyRead = true
	held := &pl.heldBody // whole chunks: memory is what was reserved, no regrowth
	held.chunks = held.first[:0]
	for {
		size := int64(chunkSize)
		if r.ContentLength >= 0 {
			if held.n == r.ContentLength {
				break // the declared length, all of it (net/http holds the client to it)
			}
			size = min(size, r.ContentLength-held.n)
		}
		fits := held.n+size <= maxReplayBody
		if fits && p.replay.Add(size) > maxReplayTotal {
			p.replay.Add(-size)
			fits = false
		}
		if !fits {
			pl.chain = pl.chain[:1]
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(held.reader(), r.Body), r.Body}
			return nil
		}
		pl.reserved += size
		chunk := pl.hold.take(size)
		n, err := io.ReadFull(r.Body, chunk)
		held.add(chunk[:n])
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return err
		}
	}
	pl.body = held
	if len(held.chunks) == 1 {
		pl.bodyReader.Reset(held.chunks[0])
		r.Body = io.NopCloser(&pl.bodyReader)
	} else {
		r.Body = io.NopCloser(held.reader())
	}
	r.ContentLength = held.n
	return nil
}

// replayBody is a request body held in chunks, to be sent more than once.
type replayBody struct {
	chunks [][]byte
	n      int64
	first  [1][]byte // chunks' room for a body of one chunk
}

func (b *replayBody) add(c []byte) {
	if len(c) > 0 {
		b.chunks, b.n = append(b.chunks, c), b.n+int64(len(c))
	}
}

// reader reads the whole body from its start. A body of one chunk is a
// *bytes.Reader, which net/http knows is in memory: it sends the request's
// headers and body in one write instead of flushing the headers first.
func (b *replayBody) reader() io.Reader {
	if len(b.chunks) == 1 {
		return bytes.NewReader(b.chunks[0])
	}
	rs := make([]io.Reader, len(b.chunks))
	for i, c := range b.chunks {
		rs[i] = bytes.NewReader(c)
	}
	return io.MultiReader(rs...)
}

// isModelRoute reports the paths observed at the model base URL.
func isModelRoute(r *http.Request) bool {
	switch r.URL.Path {
	case "/v1/messages", "/v1/messages/count_tokens", "/api/hello":
		return true
	}
	return false
}

// isRefresh reports a token-refresh request.
func isRefresh(r *http.Request) bool {
	return r.Method == http.MethodPost && (r.URL.Path == "/v1/oauth/token" || r.URL.Path == "/oauth/token")
}

// presented is every credential the client sent: x-api-key, and the token of
// the Authorization header whatever its scheme's case.
func presented(h http.Header) []string {
	var out []string
	for _, v := range h[hdrAPIKey] {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	for _, v := range h[hdrAuthorization] {
		v = strings.TrimSpace(v)
		if _, tok, ok := strings.Cut(v, " "); ok {
			v = strings.TrimSpace(tok)
		}
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// looksMinted reports a value shaped like one of our placeholders.
func looksMinted(v string) bool {
	return strings.Contains(v, "svc-") || strings.Contains(v, "key_svc_")
}

// isEditorGrant reports a grant minted for the editor agent's key.
func isEditorGrant(g *Grant) bool { return strings.HasPrefix(g.Placeholder, "key_svc_") }

// resolve looks a presented value up in the registry.
func (p *Proxy) resolve(v string) (*Grant, string) {
	if v == "" {
		return nil, ""
	}
	if _, ok := p.tripped.Load(v); ok {
		return nil, CauseUnknownPlaceholder
	}
	gs := p.o.Grants.Load()
	if gs != nil {
		if g, ok := (*gs)[v]; ok {
			if g.ExpiresAt != nil && !p.now().Before(*g.ExpiresAt) {
				return nil, CauseExpiredGrant
			}
			return &g, ""
		}
	}
	if looksMinted(v) {
		return nil, CauseUnknownPlaceholder
	}
	return nil, ""
}

func (p *Proxy) refuse(w http.ResponseWriter, pl *plan, cause, msg string) {
	p.refuseStatus(w, pl, http.StatusUnauthorized, "authentication_error", cause, "lazy proxy: "+msg)
}

func (p *Proxy) refuseStatus(w http.ResponseWriter, pl *plan, status int, kind, cause, msg string) {
	pl.refused = cause
	writeAPIError(w, status, kind, msg, cause)
}

// admit checks a live grant against where the request came in. Through a
// task's socket only that task's placeholders pass: another task's trips
// the wire on the socket's task (its agent presented what is not its own).
// On the TCP listener, from a process in no sandbox, a placeholder passes
// only while agents run unsandboxed (agent.runner = "process").
func (p *Proxy) admit(w http.ResponseWriter, pl *plan, g *Grant) bool {
	switch {
	case pl.via != nil && g.TaskID != pl.via.taskID:
		pl.grant = nil
		p.trip(pl, TripForeignPlaceholder)
		p.refuseStatus(w, pl, http.StatusForbidden, "permission_error", CauseTripwire, "lazy proxy: this request carries another task's placeholder; the task's grant is revoked")
		return false
	case pl.via == nil && !pl.rt.tcpGrants:
		pl.grant = g
		p.refuseStatus(w, pl, http.StatusForbidden, "permission_error", CauseNotFromSandbox, "lazy proxy: "+causeText[CauseNotFromSandbox])
		return false
	}
	return true
}

// tripTask is the task a tripwire is on: the socket's, whose agent sent the
// request, else the grant's.
func (pl *plan) tripTask() (id, ref string) {
	if pl.via != nil {
		return pl.via.taskID, pl.via.taskRef
	}
	if pl.grant != nil {
		return pl.grant.TaskID, pl.grant.TaskRef
	}
	return "", ""
}

// trip records a tripwire on the request and tells the daemon once.
func (p *Proxy) trip(pl *plan, what string) {
	if pl.tripwire != "" {
		return
	}
	pl.tripwire = what
	p.revokeTask(pl, what)
}

// tripLater is trip from a goroutine other than the request's own (the
// transport reading a request body): the task's placeholders are refused
// and the daemon told at once; the traffic line says it unless another
// wire tripped first.
func (p *Proxy) tripLater(pl *plan, what string) {
	if pl.lateTrip.CompareAndSwap(nil, &what) {
		p.revokeTask(pl, what)
	}
}

// revokeTask refuses the tripping task's placeholders from now on and tells
// the daemon, once per request.
func (p *Proxy) revokeTask(pl *plan, what string) {
	if !pl.revoked.CompareAndSwap(false, true) {
		return
	}
	id, ref := pl.tripTask()
	p.tripOn(id, ref, what)
}

// tripOn refuses the task's placeholders from this instant and tells the
// daemon (nothing for no task).
func (p *Proxy) tripOn(id, ref, what string) {
	if id == "" {
		return
	}
	if gs := p.o.Grants.Load(); gs != nil {
		for ph, g := range *gs {
			if g.TaskID == id {
				p.tripped.Store(ph, struct{}{})
			}
		}
	}
	if p.o.Tripwire != nil {
		p.o.Tripwire(id, ref, what)
	}
}

var causeText = map[string]string{
	CauseUnknownPlaceholder: "the placeholder credential has no grant (its task ended, or the grant registry was reset); relaunch the task's agent",
	CauseExpiredGrant:       "the placeholder's grant has expired; relaunch the task's agent",
	CauseProviderMissing:    "the real provider credential is missing on this machine; write it to the file named by credentials.provider.file",
	CauseProviderExpired:    "the real provider credential has expired; write a fresh one to the credential file (no relaunch needed)",
	CauseEditorMissing:      "the editor agent's real key is missing; write it to the file named by credentials.editor.file",
	CauseRoleNotConfigured:  "the grant's role is no longer in the config ([models.roles.*]); add it back, or relaunch the task with a configured role",
	CauseWrongGrantKind:     "this placeholder was minted for another route (the editor key only on /_svc/<agent>/..., OPENAI_API_KEY only on /v1/responses, an Anthropic key only on the Anthropic routes)",
	CauseOpenAIMissing:      "the real OpenAI key is missing on this machine; write it to the file named by credentials.openai.file (default ~/.lazy/credentials/openai)",
	CauseNoGrant:            "no placeholder credential was presented and proxy.no_grant = \"refuse\"; agents get theirs at launch",
	CauseGeminiMissing:      "the real Gemini API key is missing on this machine; write it to the file named by credentials.gemini.file (default ~/.lazy/credentials/gemini)",
	CauseNotFromSandbox:     "a placeholder is accepted only through its task's own sandbox socket, and this request came on the TCP listener from a process in no sandbox; agents under agent.runner = \"process\" (no sandbox) use the TCP listener",
}

// revokedText is what an agent hears when it presents a placeholder whose
// task tripped a wire (the cause stays unknown_placeholder: the grant is
// gone).
const revokedText = "this placeholder's task tripped a wire, and its grant was revoked (the task's page and `lazy task show` say which); the reviewer decides what next: unblocking the task gives its next turn a new grant"

// causeOf is the refusal's words for a presented value v that did not
// resolve.
func (p *Proxy) causeOf(v, cause string) string {
	if _, ok := p.tripped.Load(v); ok && cause == CauseUnknownPlaceholder {
		return revokedText
	}
	return causeText[cause]
}

// planModel handles the model routes and refresh.
func (p *Proxy) planModel(w http.ResponseWriter, r *http.Request, pl *plan) bool {
	if isRefresh(r) {
		p.answerRefresh(w, r, pl)
		return false
	}
	if !isModelRoute(r) {
		writeAPIError(w, http.StatusNotFound, "not_found_error", "lazy proxy: "+r.Method+" "+r.URL.EscapedPath()+" is not a proxied route (only /v1/messages, /v1/messages/count_tokens, /api/hello, /v1/responses and /_svc/...)", "")
		return false
	}
	g, ok := p.grantOf(w, pl, presented(r.Header))
	if !ok {
		return false
	}
	if g == nil {
		// no grant (a host session on its own login): it goes to the
		// primary with exactly what it presented, never with our credential
		pl.role, pl.taskRef = headerValue(r.Header, hdrSvcRole), headerValue(r.Header, hdrSvcTaskID)
		if pl.rt.noGrant == config.NoGrantRefuse {
			p.refuse(w, pl, CauseNoGrant, causeText[CauseNoGrant])
			return false
		}
		pl.chain = []target{pl.rt.primary}
		return true
	}
	if isEditorGrant(g) || isOpenAIGrant(g) || isGeminiGrant(g) {
		p.refuse(w, pl, CauseWrongGrantKind, causeText[CauseWrongGrantKind])
		return false
	}
	if p.o.OverBudget != nil {
		if over, why := p.o.OverBudget(g.TaskID); over {
			p.refuseStatus(w, pl, http.StatusTooManyRequests, "rate_limit_error", CauseBudgetExceeded, "lazy proxy: "+why)
			return false
		}
	}
	t := pl.rt.primary
	if g.Role != "" {
		rt, ok := pl.rt.roles[g.Role]
		if !ok {
			p.refuse(w, pl, CauseRoleNotConfigured, causeText[CauseRoleNotConfigured])
			return false
		}
		t = rt
	}
	pl.chain = []target{t}
	if t.origin == pl.rt.primary.origin {
		pl.chain = append(pl.chain, pl.rt.fallbacks...)
	}
	// a primary whose credential is resolvable but missing or expired: 401
	if t.credential == config.CredentialProvider {
		c, cause := p.providerCredential(pl.rt)
		if cause != "" {
			p.refuse(w, pl, cause, causeText[cause])
			return false
		}
		pl.cred = &c
	}
	return true
}

// planEditor handles /_svc/<agent>/<placeholder|->/<path>. It returns the
// path with the placeholder masked for logs.
func (p *Proxy) planEditor(w http.ResponseWriter, r *http.Request, pl *plan) (string, bool) {
	agentName, token, rest, ok := ParseEditorRoute(r.URL.Path)
	if !ok {
		n := len(strings.Split(strings.Trim(r.URL.Path, "/"), "/"))
		p.log.Warn("malformed editor-agent route", "segments", n)
		writeAPIError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("lazy proxy: malformed editor-agent route (%d segments); want /_svc/<agent>/<placeholder>/<path>", n), "")
		return fmt.Sprintf("/_svc/<malformed:%d segments>", n), false
	}
	masked := "/_svc/" + agentName + "/***" + rest
	pl.editor, pl.outPath = true, rest
	pl.chain = []target{pl.rt.editor}
	if token == "-" {
		masked = "/_svc/" + agentName + "/-" + rest
		pl.session = true
		pl.role, pl.taskRef = headerValue(r.Header, hdrSvcRole), headerValue(r.Header, hdrSvcTaskID)
		return masked, true
	}
	g, cause := p.resolve(token)
	if g == nil {
		if cause == "" {
			cause = CauseUnknownPlaceholder
		}
		p.refuse(w, pl, cause, p.causeOf(token, cause))
		return masked, false
	}
	if !p.admit(w, pl, g) {
		return masked, false
	}
	pl.grant, pl.editorPH = g, token
	if !isEditorGrant(g) || g.Local {
		p.refuse(w, pl, CauseWrongGrantKind, causeText[CauseWrongGrantKind])
		return masked, false
	}
	c, err := pl.rt.editorKey.Load()
	if err != nil {
		p.refuse(w, pl, CauseEditorMissing, causeText[CauseEditorMissing])
		return masked, false
	}
	pl.editorCred = &c
	return masked, p.editorPlacement(w, r, pl, rest)
}

// The editor client (Cursor's CLI, CURSOR_API_KEY) carries its key in one
// place: "Authorization: Bearer <key>" (its key exchange and every call
// after; no body field carries it). The real key is put there and nowhere
// else. The placeholder anywhere else — another header or its name, a
// cookie, a Referer, the path, the query, the body — trips the wire
// (misplaced_placeholder): an agent that put it there wants the real key
// sent where the editor upstream may pass it on.

// bearerOf is the token of an Authorization value of the Bearer scheme.
func bearerOf(v string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// editorPlacement refuses a request that carries the editor placeholder
// anywhere but its client's Authorization header, and another task's
// placeholder in a body it reads. A body of declared length up to
// MaxSubstituteBody is read and checked before any byte leaves; a larger
// or undeclared one goes on streaming, the placeholder masked in it (and
// the wire tripped) as it passes.
func (p *Proxy) editorPlacement(w http.ResponseWriter, r *http.Request, pl *plan, rest string) bool {
	ph := pl.editorPH
	// its random part: a placeholder cut down or re-prefixed is still it
	mark := ph
	if len(ph) > randLen {
		mark = ph[len(ph)-randLen:]
	}
	misplaced := strings.Contains(rest, mark) || strings.Contains(r.URL.RawQuery, mark)
	if q, err := url.QueryUnescape(r.URL.RawQuery); err == nil && strings.Contains(q, mark) {
		misplaced = true
	}
	for k, vs := range r.Header {
		if strings.Contains(k, mark) {
			misplaced = true
		}
		for _, v := range vs {
			if tok, ok := bearerOf(v); ok && tok == ph && k == "Authorization" {
				continue // where the client carries its key
			}
			if strings.Contains(v, mark) {
				misplaced = true
			}
		}
	}
	if !misplaced && r.Body != nil && r.Body != http.NoBody {
		if r.ContentLength < 0 || r.ContentLength > MaxSubstituteBody {
			r.Body = &bodyGuard{scrubber: newScrubber(r.Body, secretSet{[]byte(mark)}, nil, func() { p.tripLater(pl, TripMisplacedPlaceholder) })}
			return true
		}
		var buf bytes.Buffer
		buf.Grow(int(r.ContentLength))
		_, err := buf.ReadFrom(io.LimitReader(r.Body, MaxSubstituteBody+1))
		r.Body.Close()
		if err != nil {
			if pl.bodyTimedOut.Load() {
				writeAPIError(w, http.StatusRequestTimeout, "invalid_request_error", fmt.Sprintf("lazy proxy: the request body did not arrive within %s", p.bodyTimeout()), CauseBodyTimeout)
				return false
			}
			writeAPIError(w, http.StatusBadRequest, "invalid_request_error", "lazy proxy: could not read the request body: "+err.Error(), "")
			return false
		}
		b := buf.Bytes()
		if g := p.foreignInBytes(b, pl.grant); g != nil {
			p.trip(pl, TripForeignPlaceholder)
			p.refuseStatus(w, pl, http.StatusForbidden, "permission_error", CauseTripwire, "lazy proxy: this request carries another task's placeholder; the task's grant is revoked")
			return false
		}
		misplaced = bytes.Contains(b, []byte(mark))
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	if misplaced {
		p.trip(pl, TripMisplacedPlaceholder)
		p.refuseStatus(w, pl, http.StatusForbidden, "permission_error", CauseTripwire, "lazy proxy: the editor placeholder is somewhere its client never carries its key (only \"Authorization: Bearer <key>\" gets the real key); the task's grant is revoked")
		return false
	}
	return true
}

// bodyGuard is an editor body scanned as it streams: the scrubber masks
// the placeholder and holds back a tail that may start it.
type bodyGuard struct{ *scrubber }

// ParseEditorRoute splits /_svc/<agent>/<token>/<rest>; rest keeps its
// leading slash. Every part must be non-empty.
func ParseEditorRoute(path string) (agentName, token, rest string, ok bool) {
	s, found := strings.CutPrefix(path, "/_svc/")
	if !found {
		return "", "", "", false
	}
	agentName, s, found = strings.Cut(s, "/")
	if !found || agentName == "" {
		return "", "", "", false
	}
	token, s, found = strings.Cut(s, "/")
	if !found || token == "" || s == "" {
		return "", "", "", false
	}
	return agentName, token, "/" + s, true
}

// providerCredential reads the real provider credential now (rotation).
func (p *Proxy) providerCredential(rt *routes) (Credential, string) {
	c, err := rt.provider.Load()
	if err != nil {
		return Credential{}, CauseProviderMissing
	}
	if c.Expired(p.now()) {
		return Credential{}, CauseProviderExpired
	}
	return c, ""
}

// answerRefresh answers a token refresh itself: the client keeps its
// placeholder and learns the real credential's expiry; nothing is forwarded.
func (p *Proxy) answerRefresh(w http.ResponseWriter, r *http.Request, pl *plan) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	var req struct {
		RefreshToken string `json:"refresh_token"`
	}
	_ = json.Unmarshal(body, &req)
	if req.RefreshToken == "" {
		if v, err := url.ParseQuery(string(body)); err == nil {
			req.RefreshToken = v.Get("refresh_token")
		}
	}
	g, cause := p.resolve(req.RefreshToken)
	if g == nil {
		if cause == "" {
			cause = CauseUnknownPlaceholder
		}
		p.refuse(w, pl, cause, p.causeOf(req.RefreshToken, cause))
		return
	}
	if !p.admit(w, pl, g) {
		return
	}
	pl.grant = g
	c, cause := p.providerCredential(pl.rt)
	if cause != "" {
		p.refuse(w, pl, cause, causeText[cause])
		return
	}
	expires := 8 * time.Hour
	if !c.ExpiresAt.IsZero() {
		expires = c.ExpiresAt.Sub(p.now())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"token_type": "Bearer", "access_token": g.Placeholder, "refresh_token": g.Placeholder,
		"expires_in": int(expires.Seconds()),
	})
}

// rewrite strips what the client presented and the attribution headers; the
// transport injects the target's own credential.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	pl := pr.In.Context().Value(planKey{}).(*plan)
	out := pr.Out
	if !pl.editor && pl.grant != nil {
		// model routes under a grant: what the client presented never goes
		// upstream. With no grant it goes as presented (passthrough). The
		// editor route substitutes the key where the client put it instead.
		delete(out.Header, hdrAPIKey)
		delete(out.Header, hdrAuthorization)
		delete(out.Header, hdrGoogAPIKey)
	}
	// an encoded response could carry a secret past the scrubber
	out.Header[hdrAcceptEncoding] = []string{"identity"}
	delete(out.Header, hdrSvcRole)
	delete(out.Header, hdrSvcTaskID)
	delete(out.Header, hdrForwardedFor)
	pl.reqPath = out.URL.Path
	if pl.editor {
		pl.reqPath = pl.outPath
	}
	// the transport picks the target; point at the first so Rewrite is total
	setTarget(out, pl.chain[0], pl.reqPath)
}

func setTarget(out *http.Request, t target, path string) {
	out.URL.Scheme, out.URL.Host = t.url.Scheme, t.url.Host
	out.URL.Path = singleJoin(t.url.Path, path)
	out.URL.RawPath = ""
	out.Host = t.url.Host
}

func singleJoin(a, b string) string {
	a = strings.TrimRight(a, "/")
	if a == "" {
		return b
	}
	return a + "/" + strings.TrimLeft(b, "/")
}

// chainTransport tries the plan's targets in order: the next one on a
// connection failure or a 5xx, always before any byte reached the client.
type chainTransport struct {
	p    *Proxy
	base http.RoundTripper
}

func (c *chainTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pl := req.Context().Value(planKey{}).(*plan)
	var lastErr error
	var lastResp *http.Response
	for i, t := range pl.chain {
		// Rewrite already aimed the outgoing request (ours, made by the
		// ReverseProxy) at the first target; later targets get a copy.
		out := req
		if i > 0 {
			out = req.Clone(req.Context())
			setTarget(out, t, pl.reqPath)
		}
		if err := c.p.inject(out, t, pl); err != nil {
			if t.primary {
				return nil, err
			}
			continue // a fallback without a usable credential is skipped
		}
		if pl.body != nil {
			out.Body = io.NopCloser(pl.body.reader())
			out.ContentLength = pl.body.n
		}
		if c.p.canaryTripped(pl) { // the editor route read the body
			return nil, errCanary
		}
		if pl.hold.pooled() {
			out = pl.hold.attempt(out)
		}
		resp, err := c.base.RoundTrip(out)
		if c.p.canaryTripped(pl) || IsCanary(err) {
			if err == nil {
				resp.Body.Close()
			}
			if lastResp != nil {
				lastResp.Body.Close()
			}
			return nil, errCanary
		}
		last := i == len(pl.chain)-1
		if err == nil && (resp.StatusCode < 500 || last) {
			tt := t
			pl.answered.Store(&tt)
			return resp, nil
		}
		if err == nil {
			if lastResp != nil {
				lastResp.Body.Close()
			}
			lastResp = resp
			tt := t
			pl.answered.Store(&tt)
			continue
		}
		lastErr = err
		if req.Context().Err() != nil {
			return nil, err
		}
		c.p.log.Warn("upstream failed; trying the next", "upstream", t.url.Host, "err", err)
	}
	if lastResp != nil {
		return lastResp, nil
	}
	if lastErr == nil {
		lastErr = &refusal{cause: CauseNoUpstream, msg: "no upstream had a usable credential"}
	}
	return nil, lastErr
}

// refusal is a credential failure found while injecting.
type refusal struct{ cause, msg string }

func (r *refusal) Error() string { return r.msg }

// inject puts the target's own credential on the outgoing request.
func (p *Proxy) inject(out *http.Request, t target, pl *plan) error {
	if pl.grant == nil {
		return nil // no grant: nothing of ours is ever added
	}
	switch t.credential {
	case config.CredentialProvider:
		if pl.cred == nil { // a fallback with a credential behind a primary without
			c, cause := p.providerCredential(pl.rt)
			if cause != "" {
				return &refusal{cause: cause, msg: causeText[cause]}
			}
			pl.cred = &c
		}
		c := *pl.cred
		if pl.rt.kind == config.KindAPIKey {
			out.Header[hdrAPIKey] = []string{c.Value}
		} else {
			out.Header[hdrAuthorization] = []string{"Bearer " + c.Value}
		}
	case config.CredentialOpenAI:
		out.Header[hdrAuthorization] = []string{"Bearer " + pl.openaiCred.Value}
	case config.CredentialGemini:
		if pl.geminiCred == nil {
			return &refusal{cause: CauseGeminiMissing, msg: causeText[CauseGeminiMissing]}
		}
		out.Header[hdrGoogAPIKey] = []string{pl.geminiCred.Value}
	case "editor":
		if pl.session {
			return nil
		}
		carryKey(out, pl.editorPH, pl.editorCred.Value)
	}
	return nil
}

// carryKey puts the real editor key where the editor client carries its
// own: an Authorization header of the Bearer scheme holding the
// placeholder, and nowhere else (editorPlacement refused any other place).
func carryKey(out *http.Request, placeholder, real string) {
	vs := out.Header[hdrAuthorization]
	for i, v := range vs {
		if tok, ok := bearerOf(v); ok && tok == placeholder {
			vs[i] = "Bearer " + real
		}
	}
}

// errorHandler maps transport failures: timeout 504, client gone 499,
// credential refusal 401, anything else 502.
func (p *Proxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	pl := r.Context().Value(planKey{}).(*plan)
	if neverSent(err) {
		pl.left = false // the upstream never had the call: nothing spent
	}
	var ref *refusal
	if errors.As(err, &ref) {
		if ref.cause == CauseTripwire {
			p.refuseStatus(w, pl, http.StatusForbidden, "permission_error", ref.cause, "lazy proxy: "+ref.msg)
			return
		}
		p.refuse(w, pl, ref.cause, ref.msg)
		return
	}
	if pl.bodyTimedOut.Load() {
		writeAPIError(w, http.StatusRequestTimeout, "invalid_request_error", fmt.Sprintf("lazy proxy: the request body did not arrive within %s", p.bodyTimeout()), CauseBodyTimeout)
		return
	}
	var enc *encodingError
	if errors.As(err, &enc) {
		writeAPIError(w, http.StatusBadGateway, "api_error", "lazy proxy: "+enc.Error(), "")
		return
	}
	if errors.Is(err, context.Canceled) || r.Context().Err() != nil {
		w.WriteHeader(499)
		return
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		pl.upstreamErr = "the upstream did not answer in time"
		writeAPIError(w, http.StatusGatewayTimeout, "timeout_error", "lazy proxy: the upstream did not answer in time", "")
		return
	}
	p.log.Warn("upstream unreachable", "err", err)
	pl.upstreamErr = upstreamCause(err)
	writeAPIError(w, http.StatusBadGateway, "api_error", "lazy proxy: no upstream could be reached ("+pl.upstreamErr+"); check proxy.upstream and the network", "")
}

// writeAPIError answers in the provider's own error JSON shape: OpenAI's
// on its route (the plan says so through the statusWriter), Anthropic's
// elsewhere.
func writeAPIError(w http.ResponseWriter, status int, kind, msg, cause string) {
	if sw, ok := w.(*statusWriter); ok && sw.pl != nil && sw.pl.openai {
		writeOpenAIError(w, status, kind, msg, cause)
		return
	}
	if sw, ok := w.(*statusWriter); ok && sw.pl != nil && sw.pl.gemini {
		writeGeminiError(w, status, msg, cause) // Google's shape on its routes
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if cause != "" {
		w.Header().Set("x-lazy-refused", cause)
	}
	w.WriteHeader(status)
	e := map[string]string{"type": kind, "message": msg}
	if cause != "" {
		e["cause"] = cause
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": e})
}

// statusWriter records the status while keeping Flush and Unwrap, and
// scans the header blocks of informational (1xx) answers as they leave.
type statusWriter struct {
	http.ResponseWriter
	status int
	p      *Proxy
	pl     *plan
}

func (s *statusWriter) WriteHeader(code int) {
	if code >= 100 && code < 200 {
		// the reverse proxy forwards an upstream's 1xx (103 Early Hints, ...)
		// from inside the round trip, through this writer, before any
		// response the scrubber sees: its headers are scanned here
		if s.pl != nil {
			if secrets := s.p.secrets(s.pl); secrets.maskHeader(s.Header()) {
				s.p.trip(s.pl, TripRealCredential)
			}
		}
		s.ResponseWriter.WriteHeader(code)
		return
	}
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// bufferPool reuses the copy buffers of replies across requests. The pool
// holds each buffer by its array's pointer, which a slice converts to and
// from without an allocation (a *[]byte made in Put was one a call).
type bufferPool struct{}

// copyBuffer is a copy buffer's size: 8 KiB, twice the upstream
// connection's read buffer, so a large reply is still read past it. A
// collection empties the pool, and under load every call in flight then
// takes a new buffer: 64 calls took 2 MiB a collection with 32 KiB, which
// brought the next collection sooner (the daemon's CPU a call 1.28-1.31x
// the tuned bare proxy's with 32 KiB, 1.23-1.24x with 8 KiB, same rounds).
const copyBuffer = 8 << 10

var pool = sync.Pool{New: func() any { return new([copyBuffer]byte) }}

func (bufferPool) Get() []byte { return pool.Get().(*[copyBuffer]byte)[:] }

func (bufferPool) Put(b []byte) {
	if cap(b) >= copyBuffer {
		pool.Put((*[copyBuffer]byte)(b[:copyBuffer]))
	}
}

// upstreamCause is the short reason no upstream answered: the innermost
// network error ("dial tcp 127.0.0.1:1: connect: connection refused",
// "lookup api.example: no such host"), without the request's URL.
func upstreamCause(err error) string {
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Error()
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		return de.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// grantOf resolves the placeholders a request presents (values) to at most
// one task's grant and admits it: a value with the marker that is no live
// grant is refused, two tasks' placeholders in one request trip the wire
// (foreign_placeholder), and an admitted grant is set on pl. It answers
// false once it has written the refusal.
func (p *Proxy) grantOf(w http.ResponseWriter, pl *plan, values []string) (*Grant, bool) {
	var g *Grant
	for _, v := range values {
		got, cause := p.resolve(v)
		if cause != "" {
			p.refuse(w, pl, cause, p.causeOf(v, cause))
			return nil, false
		}
		if got == nil {
			continue
		}
		if g != nil && got.TaskID != g.TaskID {
			pl.grant = g
			p.trip(pl, TripForeignPlaceholder)
			p.refuseStatus(w, pl, http.StatusForbidden, "permission_error", CauseTripwire, "lazy proxy: this request carries another task's placeholder; the task's grant is revoked")
			return nil, false
		}
		g = got
	}
	if g != nil && !p.admit(w, pl, g) {
		return nil, false
	}
	pl.grant = g
	return g, true
}
