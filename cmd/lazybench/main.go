// Command lazybench measures the proxy against its baselines, each in its own
// process on loopback: the stub upstream, a direct connection to it, a bare
// httputil.ReverseProxy that only swaps the key (the floor of a Go proxy), and
// lazy's proxy with a real grant lookup and credential file. The load client
// runs as its own process too. `lazybench run` interleaves rounds and prints
// one table: figure, lazy, baseline, ratio.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"lazy/api"
	"lazy/config"
	"lazy/proxy"
	"lazy/scriptagent"
	"lazy/stubmodel"
)

// The real keys the proxies put on calls: Anthropic's, OpenAI's and
// Gemini's, each in its provider's shape.
const (
	realKey       = "sk-ant-api03-BENCHREALKEY-0123456789abcdefghij"
	realOpenAIKey = "sk-proj-BENCHREALOPENAIKEY-0123456789abcdefghij"
	realGeminiKey = "AIzaBENCHrealGEMINIkey0123456789abcdefg" // 39 characters
)

// noDelayHeader asks the stub upstream to stream without its event delay
// (the rows per protocol measure the proxy's cost per event, not sleeps).
const noDelayHeader = "X-Lazybench-No-Delay"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: lazybench run | serve-upstream | serve-bare | serve-lazy | serve-daemon | load")
		os.Exit(2)
	}
	if os.Getenv("LAZYBENCH_HEAPPROFILE") != "" {
		runtime.MemProfileRate = 4096 // a heap profile fine enough to read a few MB by
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = run(os.Args[2:])
	case "serve-upstream":
		err = serveUpstream(os.Args[2:])
	case "serve-bare":
		err = serveBare(os.Args[2:])
	case "serve-lazy":
		err = serveLazy(os.Args[2:])
	case "serve-daemon":
		err = serveDaemon(os.Args[2:])
	case "script-agent": // the daemon's scripted agent (SelfExe)
		os.Exit(scriptagent.Main(os.Args[2:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
	case "load":
		err = load(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lazybench:", err)
		os.Exit(1)
	}
}

func listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err == nil {
		fmt.Printf("ADDR %s\n", ln.Addr())
	}
	return ln, err
}

func serveUpstream(args []string) error {
	fs := flag.NewFlagSet("serve-upstream", flag.ExitOnError)
	delay := fs.Duration("event-delay", 2*time.Millisecond, "delay between SSE events")
	_ = fs.Parse(args)
	stub := func(d time.Duration) *stubmodel.Server {
		s := stubmodel.New()
		s.Record = false
		s.EventDelay = d
		s.Reply = func(string) string { return "one two three four five six seven eight nine ten" }
		return s
	}
	slow, fast := stub(*delay), stub(0)
	ln, err := listen()
	if err != nil {
		return err
	}
	return (&http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(noDelayHeader) != "" {
			fast.ServeHTTP(w, r)
			return
		}
		slow.ServeHTTP(w, r)
	})}).Serve(ln)
}

// serveBare is the floor: a ReverseProxy that swaps the presented key. With
// --tuned it is the floor a careful Go proxy reaches: idle connections for
// every client, a buffer pool, and flushing left to ReverseProxy's stream
// detection (lazy's settings); without, http.DefaultTransport (2 idle
// connections per host) and a flush after every write.
func serveBare(args []string) error {
	fs := flag.NewFlagSet("serve-bare", flag.ExitOnError)
	up := fs.String("upstream", "", "upstream URL")
	tuned := fs.Bool("tuned", false, "idle connections >= clients and a BufferPool")
	proto := fs.String("protocol", protoAnthropic, "whose key it swaps: anthropic (x-api-key), openai (Authorization: Bearer) or gemini (x-goog-api-key)")
	_ = fs.Parse(args)
	u, err := url.Parse(*up)
	if err != nil {
		return err
	}
	header, value := "x-api-key", realKey
	switch *proto {
	case protoOpenAI:
		header, value = "Authorization", "Bearer "+realOpenAIKey
	case protoGemini:
		header, value = "x-goog-api-key", realGeminiKey
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Header.Set(header, value)
		},
		FlushInterval: -1,
	}
	if *tuned {
		rp.Transport = &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second, DisableCompression: true}
		rp.BufferPool = benchPool{}
		rp.FlushInterval = 0 // streams are still flushed at once; see proxy.New
	}
	ln, err := listen()
	if err != nil {
		return err
	}
	// a profile or trace of the bare proxy ends at SIGTERM (to be set
	// beside the daemon's)
	stop, on, err := startProfiles()
	if err != nil {
		return err
	}
	if on {
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		go func() { <-term; stop(); os.Exit(0) }()
	}
	return (&http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// without it the server drops the request body when the answer's
		// headers go out, and an upstream that answers at once (the stub
		// streaming without delay) races the transport's last read of the
		// body: the upstream connection is torn down mid-stream
		// (golang/go#40747)
		_ = http.NewResponseController(w).EnableFullDuplex()
		rp.ServeHTTP(w, r)
	})}).Serve(ln)
}

// benchPool reuses 32 KiB copy buffers, as a tuned proxy does.
type benchPool struct{}

var bufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (benchPool) Get() []byte  { return *(bufs.Get().(*[]byte)) }
func (benchPool) Put(b []byte) { bufs.Put(&b) }

// serveLazy is lazy's proxy with one grant and a credential file: fail-closed
// injection, the response scrubber and the tripwires all on.
func serveLazy(args []string) error {
	fs := flag.NewFlagSet("serve-lazy", flag.ExitOnError)
	up := fs.String("upstream", "", "upstream URL")
	placeholder := fs.String("placeholder", "", "the placeholder clients present")
	_ = fs.Parse(args)
	home, err := os.MkdirTemp("", "lazybench-home-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	if err := os.MkdirAll(filepath.Join(home, "credentials"), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(home, "credentials", "provider"), []byte(realKey), 0o600); err != nil {
		return err
	}
	cfg := config.Defaults()
	cfg.Proxy.Upstream, cfg.Proxy.Credential = *up, "provider"
	// the load client is a process in no sandbox, on the TCP listener:
	// placeholders are taken there only under the process runner
	cfg.Agent.Runner = config.RunnerProcess
	g := proxy.Grants{*placeholder: {Placeholder: *placeholder, Role: "", TaskRef: "bench", TaskID: strings.Repeat("b", 32), EnvVar: "ANTHROPIC_API_KEY", CreatedAt: time.Now()}}
	ptr := &atomic.Pointer[proxy.Grants]{}
	ptr.Store(&g)
	var events atomic.Int64
	ln, err := listen()
	if err != nil {
		return err
	}
	p, err := proxy.New(proxy.Options{Config: &cfg, Home: home, Grants: ptr, Port: ln.Addr().(*net.TCPAddr).Port,
		Publish: func(api.Traffic) { events.Add(1) }})
	if err != nil {
		return err
	}
	// a profile or trace of the proxy alone: its first 10 s
	stop, _, err := startProfiles()
	if err != nil {
		return err
	}
	time.AfterFunc(10*time.Second, stop)
	return (&http.Server{Handler: p}).Serve(ln)
}

// result is what one load run measured.
type result struct {
	Count     int     `json:"count"`
	Errors    int     `json:"errors"`
	P50us     float64 `json:"p50_us"`
	P99us     float64 `json:"p99_us"`
	RPS       float64 `json:"rps"`
	TTFBp50us float64 `json:"ttfb_p50_us"`
	GapP50us  float64 `json:"gap_p50_us"`
	// Dials is how many connections the load opened to the target after
	// its warm-up call: 0 when every call went on a kept connection
	Dials int `json:"dials"`
}

func pct(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	i := int(float64(len(ds)-1) * p)
	return float64(ds[i].Nanoseconds()) / 1e3
}

var benchBody = func() []byte {
	pad := strings.Repeat("lorem ipsum dolor sit amet ", 110) // about 3 KB, like the real client's body
	b, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 64, "messages": []map[string]string{{"role": "user", "content": pad}}})
	return b
}()

// The protocols of the rows per protocol.
const (
	protoAnthropic = "anthropic"
	protoOpenAI    = "openai"
	protoGemini    = "gemini"
)

var protocols = []string{protoAnthropic, protoOpenAI, protoGemini}

// call is one protocol's streamed request as its client sends it (about
// 3 KB of prompt): path, body, the header its key goes in, and what the
// stream's last event carries (a stream without it was cut short).
type call struct {
	path, header, prefix string // the key goes in header as prefix+key
	body                 []byte
	end                  []byte
}

func callOf(proto string) (call, error) {
	pad := strings.Repeat("lorem ipsum dolor sit amet ", 110)
	var body any
	var c call
	switch proto {
	case protoAnthropic:
		c = call{path: "/v1/messages", header: "x-api-key", end: []byte("message_stop")}
		body = map[string]any{"model": "m", "max_tokens": 64, "stream": true, "messages": []map[string]string{{"role": "user", "content": pad}}}
	case protoOpenAI: // as codex sends it
		c = call{path: proxy.OpenAIRoute, header: "Authorization", prefix: "Bearer ", end: []byte("response.completed")}
		body = map[string]any{"model": "m", "stream": true, "input": []map[string]any{{"type": "message", "role": "user",
			"content": []map[string]string{{"type": "input_text", "text": pad}}}}}
	case protoGemini: // as the gemini CLI sends it
		c = call{path: "/v1beta/models/m:streamGenerateContent?alt=sse", header: "x-goog-api-key", end: []byte(`"finishReason":"STOP"`)}
		body = map[string]any{"contents": []map[string]any{{"role": "user", "parts": []map[string]string{{"text": pad}}}}}
	default:
		return c, fmt.Errorf("no protocol %q: give %s", proto, strings.Join(protocols, ", "))
	}
	b, err := json.Marshal(body)
	c.body = b
	return c, err
}

func load(args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	target := fs.String("url", "", "base URL")
	key := fs.String("key", "", "x-api-key to present")
	clients := fs.Int("clients", 1, "concurrent clients")
	dur := fs.Duration("duration", 3*time.Second, "how long")
	sse := fs.Bool("sse", false, "streaming requests: measure time to first byte and gaps between events")
	proto := fs.String("protocol", "", "a streamed call of this protocol ("+strings.Join(protocols, ", ")+"), the stub upstream streaming without delay; the key presented as that protocol's client does")
	interleave := fs.String("interleave", "", "URL=KEY,...: one client sends to each of these in turn, a request at a time (each target's latencies are then taken under the same noise of the machine); prints a result per target, in order. With --clients over 1, the clients go to each target in turn a --slice at a time, --duration each in all")
	slice := fs.Duration("slice", 250*time.Millisecond, "with --interleave and --clients over 1: how long the clients stay on one target before the next")
	_ = fs.Parse(args)
	// no bound on the idle connections in all: with --interleave each
	// target keeps its own (a bound of clients*2 in all closed all but two
	// of the 1-client load's six and measured a new connection per call)
	tr := &http.Transport{MaxIdleConnsPerHost: *clients * 2, DisableCompression: true}
	hc := &http.Client{Transport: tr}
	body := benchBody
	if *sse {
		body = []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"go"}]}`)
	}
	pc := call{path: "/v1/messages", header: "x-api-key"}
	if *proto != "" {
		var err error
		if pc, err = callOf(*proto); err != nil {
			return err
		}
		body = pc.body
	}
	if *interleave != "" && *clients > 1 {
		return loadSliced(*interleave, *clients, *dur, *slice, pc, body, *proto != "")
	}
	if *interleave != "" {
		return loadInterleaved(tr, *interleave, *dur, pc, body, *proto != "")
	}
	newReq := func() *http.Request {
		req, _ := http.NewRequest("POST", *target+pc.path, bytes.NewReader(body))
		req.Header.Set(pc.header, pc.prefix+*key)
		if *proto != "" {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(noDelayHeader, "1")
		}
		return req
	}
	var mu sync.Mutex
	var lat, ttfb, gaps []time.Duration
	var errs int
	ctx, cancel := context.WithTimeout(context.Background(), *dur)
	defer cancel()
	// warm up the connections
	for i := 0; i < *clients; i++ {
		if resp, err := hc.Do(newReq()); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < *clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var myLat, myTTFB, myGaps []time.Duration
			myErr := 0
			var got bytes.Buffer
			for ctx.Err() == nil {
				req := newReq()
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				resp, err := hc.Do(req)
				if err != nil {
					myErr++
					continue
				}
				if *sse {
					r := bufio.NewReader(resp.Body)
					first := true
					last := time.Now()
					for {
						line, err := r.ReadString('\n')
						if err != nil {
							break
						}
						if strings.HasPrefix(line, "event: ") {
							now := time.Now()
							if first {
								myTTFB = append(myTTFB, now.Sub(t0))
								first = false
							} else {
								myGaps = append(myGaps, now.Sub(last))
							}
							last = now
						}
					}
				} else if pc.end != nil {
					got.Reset()
					_, _ = got.ReadFrom(resp.Body)
				} else {
					_, _ = io.Copy(io.Discard, resp.Body)
				}
				resp.Body.Close()
				if resp.StatusCode == 200 && pc.end != nil && !bytes.Contains(got.Bytes(), pc.end) {
					if myErr == 0 {
						fmt.Fprintf(os.Stderr, "lazybench load: a %s stream without %q (cut short)\n", *proto, pc.end)
					}
					myErr++
					continue
				}
				if resp.StatusCode != 200 {
					if myErr == 0 {
						fmt.Fprintf(os.Stderr, "lazybench load: %s: %s\n", resp.Status, resp.Header.Get("x-lazy-refused"))
					}
					myErr++
					continue
				}
				myLat = append(myLat, time.Since(t0))
			}
			mu.Lock()
			lat, ttfb, gaps = append(lat, myLat...), append(ttfb, myTTFB...), append(gaps, myGaps...)
			errs += myErr
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	res := result{Count: len(lat), Errors: errs, P50us: pct(lat, .5), P99us: pct(lat, .99), RPS: float64(len(lat)) / el.Seconds(),
		TTFBp50us: pct(ttfb, .5), GapP50us: pct(gaps, .5)}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// loadInterleaved is one client sending a request to each target in turn
// (each turn in a random order, so none is always measured right after the
// same one), each call read to its end before the next; it prints one
// result per target, in the order given.
func loadInterleaved(tr *http.Transport, spec string, dur time.Duration, pc call, body []byte, streamed bool) error {
	ts, err := loadTargets(spec)
	if err != nil {
		return err
	}
	// every dial counted by address: a call that opens a connection
	// measures the connection's setup, not the proxy
	var dialMu sync.Mutex
	dials := map[string]int{}
	var d net.Dialer
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialMu.Lock()
		dials[addr]++
		dialMu.Unlock()
		return d.DialContext(ctx, network, addr)
	}
	hc := &http.Client{Transport: tr}
	lat := make([][]time.Duration, len(ts))
	errs := make([]int, len(ts))
	one := func(i int) (time.Duration, error) { return callOnce(hc, ts[i], pc, body, streamed, nil) }
	for i := range ts { // warm each connection
		_, _ = one(i)
	}
	dialMu.Lock()
	warm := maps.Clone(dials)
	dialMu.Unlock()
	start := time.Now()
	for time.Since(start) < dur {
		// a new order each turn: what a target does after its reply (the
		// daemon's bookkeeping) falls on the call of whichever target
		// comes next, so no target may always come after the same one
		for _, i := range rand.Perm(len(ts)) {
			d, err := one(i)
			if err != nil {
				if errs[i] == 0 {
					fmt.Fprintf(os.Stderr, "lazybench load: %s: %v\n", ts[i].url, err)
				}
				errs[i]++
				continue
			}
			lat[i] = append(lat[i], d)
		}
	}
	el := time.Since(start)
	out := make([]result, len(ts))
	for i := range ts {
		out[i] = result{Count: len(lat[i]), Errors: errs[i], P50us: pct(lat[i], .5), P99us: pct(lat[i], .99), RPS: float64(len(lat[i])) / el.Seconds()}
		if u, err := url.Parse(ts[i].url); err == nil {
			addr := u.Host // as the transport dials it: host:port
			if u.Port() == "" {
				port := "80"
				if u.Scheme == "https" {
					port = "443"
				}
				addr = net.JoinHostPort(u.Hostname(), port)
			}
			out[i].Dials = dials[addr] - warm[addr]
		}
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// loadTarget is one target of `load --interleave`: its base URL and the
// key presented to it.
type loadTarget struct{ url, key string }

// loadTargets reads --interleave's URL=KEY,URL=KEY.
func loadTargets(spec string) ([]loadTarget, error) {
	var ts []loadTarget
	for _, f := range strings.Split(spec, ",") {
		u, k, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("--interleave %q: give URL=KEY,URL=KEY", spec)
		}
		ts = append(ts, loadTarget{u, k})
	}
	return ts, nil
}

// callOnce sends pc's call to t and reads the reply to its end: into got,
// which must then hold pc.end when pc has one, or discarded when got is nil.
func callOnce(hc *http.Client, t loadTarget, pc call, body []byte, streamed bool, got *bytes.Buffer) (time.Duration, error) {
	req, _ := http.NewRequest("POST", t.url+pc.path, bytes.NewReader(body))
	req.Header.Set(pc.header, pc.prefix+t.key)
	req.Header.Set("Content-Type", "application/json")
	if streamed {
		req.Header.Set(noDelayHeader, "1")
	}
	t0 := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	if got != nil {
		got.Reset()
		_, _ = got.ReadFrom(resp.Body)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("%s: %s", resp.Status, resp.Header.Get("x-lazy-refused"))
	}
	if got != nil && pc.end != nil && !bytes.Contains(got.Bytes(), pc.end) {
		return 0, fmt.Errorf("a stream without %q (cut short)", pc.end)
	}
	return time.Since(t0), nil
}

// loadSliced is clients concurrent clients sent to each target in turn, a
// slice of time at a time, each turn of slices in a random order, until
// every target had dur. Measured one 2 s load after another, two identical
// bare proxies differed by up to a quarter in CPU and a fifth in
// throughput (the machine's speed drifts over seconds); in slices, a drift
// falls on every target alike. A target's latencies and throughput are
// taken over its own slices (a slice ends when its last call has ended);
// its CPU is read by the caller over the whole run, so what a target does
// behind its calls (a batch written, a collection finished) is counted even
// when it falls in another target's slice.
func loadSliced(spec string, clients int, dur, slice time.Duration, pc call, body []byte, streamed bool) error {
	ts, err := loadTargets(spec)
	if err != nil {
		return err
	}
	// a pool of each target's own: idle connections are kept per target
	hcs := make([]*http.Client, len(ts))
	for i := range ts {
		hcs[i] = &http.Client{Transport: &http.Transport{MaxIdleConns: clients * 2, MaxIdleConnsPerHost: clients * 2, DisableCompression: true}}
	}
	lat := make([][]time.Duration, len(ts))
	errs := make([]int, len(ts))
	active := make([]time.Duration, len(ts))
	// run is one slice of target i: every client calls until the slice's
	// end, and the slice lasts until the last call ended
	run := func(i int, d time.Duration) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := time.Now()
		end := start.Add(d)
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []time.Duration
				bad := 0
				var got bytes.Buffer
				for time.Now().Before(end) {
					l, err := callOnce(hcs[i], ts[i], pc, body, streamed, &got)
					if err != nil {
						if bad == 0 && errs[i] == 0 {
							fmt.Fprintf(os.Stderr, "lazybench load: %s: %v\n", ts[i].url, err)
						}
						bad++
						continue
					}
					mine = append(mine, l)
				}
				mu.Lock()
				lat[i] = append(lat[i], mine...)
				errs[i] += bad
				mu.Unlock()
			}()
		}
		wg.Wait()
		active[i] += time.Since(start)
	}
	for i := range ts { // open and warm each target's connections
		run(i, 50*time.Millisecond)
		lat[i], active[i] = nil, 0
	}
	for left := dur; left > 0; left -= slice {
		for _, i := range rand.Perm(len(ts)) {
			run(i, min(slice, left))
		}
	}
	out := make([]result, len(ts))
	for i := range ts {
		out[i] = result{Count: len(lat[i]), Errors: errs[i], P50us: pct(lat[i], .5), P99us: pct(lat[i], .99), RPS: float64(len(lat[i])) / active[i].Seconds()}
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// server is a child process serving on ADDR; keys are the placeholders it
// printed beside its address (serve-daemon: its tasks'), key the first.
type server struct {
	cmd       *exec.Cmd
	addr, key string
	keys      []string
}

// copyExecutable copies the executable at path to a new file in the temp
// dir and returns its path (the caller removes it).
func copyExecutable(path string) (string, error) {
	src, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer src.Close()
	f, err := os.CreateTemp("", "lazybench-copy-")
	if err != nil {
		return "", err
	}
	_, err = io.Copy(f, src)
	if err == nil {
		err = f.Chmod(0o755)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

func spawn(self string, args ...string) (*server, error) {
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		return nil, fmt.Errorf("%v printed no address", args)
	}
	line, ok := strings.CutPrefix(sc.Text(), "ADDR ")
	if !ok {
		return nil, fmt.Errorf("%v: unexpected %q", args, sc.Text())
	}
	addr, rest, _ := strings.Cut(line, " ")
	keys := strings.Fields(rest)
	key := ""
	if len(keys) > 0 {
		key = keys[0]
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return &server{cmd: cmd, addr: "http://" + addr, key: key, keys: keys}, nil
}

// stop asks the server to end (SIGTERM: the daemon stops its task and
// writes its profile) and kills it after 15 s.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// cpuSeconds is a process's user + system CPU so far.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// the fields after the command name, which is in parentheses
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// rssMB reads a process's peak and current resident set.
func rssMB(pid int) (hwm, now float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmHWM:":
			hwm = kb / 1024
		case "VmRSS:":
			now = kb / 1024
		}
	}
	return hwm, now
}

// anonMB is a process's anonymous resident memory now (RssAnon: its heap,
// stacks and the like; the rest of its RSS is the binary's pages, shared
// with every process that maps it).
func anonMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "RssAnon:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func runLoad(self, url, key string, clients int, dur time.Duration, sse bool, proto string) (result, error) {
	args := []string{"load", "--url", url, "--key", key, "--clients", strconv.Itoa(clients), "--duration", dur.String()}
	if sse {
		args = append(args, "--sse")
	}
	if proto != "" {
		args = append(args, "--protocol", proto)
	}
	out, err := exec.Command(self, args...).Output()
	if err != nil {
		return result{}, fmt.Errorf("load %v: %w", args, err)
	}
	var r result
	if err := json.Unmarshal(out, &r); err != nil {
		return r, err
	}
	if r.Errors > 0 {
		return r, fmt.Errorf("load against %s: %d errors", url, r.Errors)
	}
	return r, nil
}

// shuffled is ts in a random order: each round's loads come one after
// another, and none is always measured right after the same neighbour.
func shuffled(ts []target) []target {
	out := make([]target, 0, len(ts))
	for _, i := range rand.Perm(len(ts)) {
		out = append(out, ts[i])
	}
	return out
}

// runInterleaved is `load --interleave` over ts: with 1 client, a call to
// each target in turn for dur in all; with more, the clients go to each
// target in turn a slice at a time, dur each (loadSliced).
func runInterleaved(self string, ts []target, clients int, dur time.Duration, proto string) ([]result, error) {
	var spec []string
	for _, t := range ts {
		spec = append(spec, t.url+"="+t.key)
	}
	args := []string{"load", "--interleave", strings.Join(spec, ","), "--duration", dur.String(), "--clients", strconv.Itoa(clients)}
	if proto != "" {
		args = append(args, "--protocol", proto)
	}
	out, err := exec.Command(self, args...).Output()
	if err != nil {
		return nil, fmt.Errorf("load %v: %w", args, err)
	}
	var rs []result
	if err := json.Unmarshal(out, &rs); err != nil {
		return nil, err
	}
	if len(rs) != len(ts) {
		return nil, fmt.Errorf("load --interleave printed %d results for %d targets", len(rs), len(ts))
	}
	for i, r := range rs {
		if r.Errors > 0 {
			return nil, fmt.Errorf("load against %s: %d errors", ts[i].url, r.Errors)
		}
		if clients == 1 && r.Dials > 0 {
			return nil, fmt.Errorf("load against %s: %d of %d calls opened a new connection; the 1-client figures would count its setup (each target's connection is kept between calls)", ts[i].url, r.Dials, r.Count)
		}
	}
	return rs, nil
}

func median(xs []float64) float64 {
	xs = append([]float64(nil), xs...) // the samples stay in round order
	sort.Float64s(xs)
	if len(xs) == 0 {
		return 0
	}
	return xs[len(xs)/2]
}

func run(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	rounds := fs.Int("rounds", 5, "interleaved rounds")
	dur := fs.Duration("duration", 2*time.Second, "per measurement")
	proxyOnly := fs.Bool("proxy-only", false, "the proxy table alone, no Go benchmarks")
	before := fs.String("daemon-before", "", "a lazybench binary of another build: its daemon is measured in the same rounds and set beside this one's")
	protoDur := fs.Duration("protocol-duration", time.Second, "per measurement of the rows per protocol (0: leave them out)")
	_ = fs.Parse(args)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	placeholder := proxy.NewPlaceholder("api_key", realKey)
	up, err := spawn(self, "serve-upstream")
	if err != nil {
		return err
	}
	defer up.stop()
	bare, err := spawn(self, "serve-bare", "--upstream", up.addr, "--tuned")
	if err != nil {
		return err
	}
	defer bare.stop()
	// a second tuned bare proxy, measured as a target of its own: its
	// ratio to the first is what the machine's noise alone makes of a ratio
	twin, err := spawn(self, "serve-bare", "--upstream", up.addr, "--tuned")
	if err != nil {
		return err
	}
	defer twin.stop()
	plain, err := spawn(self, "serve-bare", "--upstream", up.addr)
	if err != nil {
		return err
	}
	defer plain.stop()
	lz, err := spawn(self, "serve-lazy", "--upstream", up.addr, "--placeholder", placeholder)
	if err != nil {
		return err
	}
	defer lz.stop()
	// the rows per protocol: an upstream of each protocol's own (the
	// daemon's [proxy.openai] and [proxy.gemini] must be other origins than
	// proxy.upstream), the bare proxies to each, and the daemon's codex and
	// gemini tasks
	var protoTargets map[string][]target
	daemonArgs := []string{"serve-daemon", "--upstream", up.addr}
	if *protoDur > 0 {
		protoTargets = map[string][]target{}
		ups := map[string]*server{protoAnthropic: up}
		for _, p := range []string{protoOpenAI, protoGemini} {
			u, err := spawn(self, "serve-upstream")
			if err != nil {
				return err
			}
			defer u.stop()
			ups[p] = u
		}
		daemonArgs = append(daemonArgs, "--openai-upstream", ups[protoOpenAI].addr, "--gemini-upstream", ups[protoGemini].addr)
		realOf := map[string]string{protoAnthropic: realKey, protoOpenAI: realOpenAIKey, protoGemini: realGeminiKey}
		for _, p := range protocols {
			tuned, dp := bare, plain // Anthropic's are the headline's
			if p != protoAnthropic {
				if tuned, err = spawn(self, "serve-bare", "--upstream", ups[p].addr, "--tuned", "--protocol", p); err != nil {
					return err
				}
				defer tuned.stop()
				if dp, err = spawn(self, "serve-bare", "--upstream", ups[p].addr, "--protocol", p); err != nil {
					return err
				}
				defer dp.stop()
			}
			protoTargets[p] = []target{{"direct", ups[p].addr, realOf[p], nil}, {"bare", tuned.addr, "ignored", tuned}, {"plain", dp.addr, "ignored", dp}}
		}
	}
	dm, err := spawn(self, daemonArgs...)
	if err != nil {
		return err
	}
	defer dm.stop()
	if *protoDur > 0 {
		if len(dm.keys) != len(protocols) {
			return fmt.Errorf("serve-daemon printed %d placeholders, want one per protocol (%s)", len(dm.keys), strings.Join(protocols, ", "))
		}
		for i, p := range protocols {
			protoTargets[p] = append(protoTargets[p], target{"daemon", dm.addr, dm.keys[i], dm})
		}
	}
	targets := []target{{"direct", up.addr, realKey, nil}, {"bare", bare.addr, "ignored", bare}, {"plain", plain.addr, "ignored", plain},
		{"lazy", lz.addr, placeholder, lz}, {"daemon", dm.addr, dm.key, dm}, {"twin", twin.addr, "ignored", twin}}
	// the two builds' daemons each run from a file of their own: a process
	// running the file the load client and the bare proxies run shares
	// their code's pages, and was measured faster at one client than the
	// same build from a copy (added p50 1.20 against 1.39 of the tuned
	// bare proxy's), so "this daemon" in the comparison is a copy too
	var dmBefore, dmAfter *server
	if *before != "" {
		if dmBefore, err = spawn(*before, "serve-daemon", "--upstream", up.addr); err != nil {
			return err
		}
		defer dmBefore.stop()
		copied, err := copyExecutable(self)
		if err != nil {
			return err
		}
		defer os.Remove(copied)
		if dmAfter, err = spawn(copied, "serve-daemon", "--upstream", up.addr); err != nil {
			return err
		}
		defer dmAfter.stop()
		targets = append(targets, target{"before", dmBefore.addr, dmBefore.key, dmBefore}, target{"after", dmAfter.addr, dmAfter.key, dmAfter})
	}
	type key struct{ target, figure string }
	samples := map[key][]float64{}
	add := func(t, f string, v float64) { samples[key{t, f}] = append(samples[key{t, f}], v) }
	// oneAndMany runs the 1-client and the 64-client load against t and
	// keeps their figures under name
	// one is the 1-client load, sent to every target in turn so that each
	// target's latencies are taken under the same noise of the machine
	// (measured one target after another, the 1-client p99 ratios moved by
	// a quarter from run to run on a shared machine); prefix names the
	// targets' figures
	one := func(prefix string, ts []target, dur time.Duration, proto string) error {
		rs, err := runInterleaved(self, ts, 1, dur*time.Duration(len(ts)), proto)
		if err != nil {
			return err
		}
		for i, t := range ts {
			add(prefix+t.name, "p50_1", rs[i].P50us)
			add(prefix+t.name, "p99_1", rs[i].P99us)
		}
		return nil
	}
	// many is the 64-client load, sent to every target in turn a slice at
	// a time (loadSliced); a target's CPU per call is its process's CPU
	// over the whole load (what it did behind its calls in another's
	// slice counted too, and its idle time: to the daemon's cost, if any)
	// over its calls
	many := func(prefix string, ts []target, dur time.Duration, proto string) error {
		cpu0 := make([]float64, len(ts))
		for i, t := range ts {
			if t.srv != nil {
				cpu0[i] = cpuSeconds(t.srv.cmd.Process.Pid)
			}
		}
		rs, err := runInterleaved(self, ts, 64, dur, proto)
		if err != nil {
			return err
		}
		for i, t := range ts {
			m := rs[i]
			if t.srv != nil && m.Count > 0 {
				add(prefix+t.name, "cpu_64", (cpuSeconds(t.srv.cmd.Process.Pid)-cpu0[i])*1e6/float64(m.Count))
			}
			add(prefix+t.name, "p50_64", m.P50us)
			add(prefix+t.name, "p99_64", m.P99us)
			add(prefix+t.name, "rps_64", m.RPS)
		}
		return nil
	}
	fmt.Fprintf(os.Stderr, "lazybench: %d rounds x %d targets x 3 loads of %s (the 1-client load sent to every target in turn), interleaved; load average before: %s\n", *rounds, len(targets), *dur, loadAvg())
	if *protoDur > 0 {
		fmt.Fprintf(os.Stderr, "lazybench: and per round %d protocols x 4 targets x 2 loads of %s\n", len(protocols), *protoDur)
	}
	// the peak of each proxy's anonymous memory (heap, stacks), sampled
	// through the run: /proc keeps a peak of the whole resident set only,
	// and most of that is the pages of this 50 MB binary that every
	// process running it maps (the bare proxies too)
	peakAnon := map[*server]float64{}
	sample := []*server{dm, bare, plain, lz}
	if dmBefore != nil {
		sample = append(sample, dmBefore, dmAfter)
	}
	var peakMu sync.Mutex
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, s := range sample {
				a := anonMB(s.cmd.Process.Pid)
				peakMu.Lock()
				peakAnon[s] = max(peakAnon[s], a)
				peakMu.Unlock()
			}
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()
	var headPeak float64
	for r := 1; r <= *rounds; r++ {
		fmt.Fprintf(os.Stderr, "lazybench: round %d/%d: 1 client, every target in turn\n", r, *rounds)
		if err := one("", targets, *dur, ""); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "lazybench: round %d/%d: 64 clients, every target in turn a slice at a time\n", r, *rounds)
		if err := many("", targets, *dur, ""); err != nil {
			return err
		}
		// each round in another order, so none is always measured right
		// after the same neighbour
		for _, t := range shuffled(targets) {
			fmt.Fprintf(os.Stderr, "lazybench: round %d/%d: %s, streamed\n", r, *rounds, t.name)
			sse, err := runLoad(self, t.url, t.key, 4, *dur, true, "")
			if err != nil {
				return err
			}
			add(t.name, "ttfb", sse.TTFBp50us)
			add(t.name, "gap", sse.GapP50us)
		}
		if r == 1 {
			// the daemon's peak on the headline's calls alone (the bare
			// proxies' whole run): the rows per protocol add streams to two
			// more upstreams, whose idle connections the daemon keeps
			peakMu.Lock()
			headPeak = peakAnon[dm]
			peakMu.Unlock()
		}
		for _, p := range protocols {
			if *protoDur <= 0 {
				break // --protocol-duration 0: no rows per protocol
			}
			fmt.Fprintf(os.Stderr, "lazybench: round %d/%d: %s, 1 client, every target in turn\n", r, *rounds, p)
			if err := one(p+" ", protoTargets[p], *protoDur, p); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "lazybench: round %d/%d: %s, 64 clients, every target in turn a slice at a time\n", r, *rounds, p)
			if err := many(p+" ", protoTargets[p], *protoDur, p); err != nil {
				return err
			}
		}
	}
	close(stopSampling)
	<-sampled
	fmt.Fprintf(os.Stderr, "lazybench: load average after: %s\n", loadAvg())
	m := func(t, f string) float64 { return median(samples[key{t, f}]) }
	hwm := func(s *server) float64 { h, _ := rssMB(s.cmd.Process.Pid); return h }
	bareHWM, dmHWM, plainHWM := hwm(bare), hwm(dm), hwm(plain)
	added := func(t, f string) float64 { return m(t, f) - m("direct", f) }

	// the headline: the daemon users run against the tuned bare proxy
	head := []headRow{
		{"throughput, 64 clients", "req/s", m("daemon", "rps_64"), m("bare", "rps_64"), m("plain", "rps_64"), m("direct", "rps_64"), ">=", 0.9, false, "", m("twin", "rps_64")},
		{"CPU per request, 64 clients", "us", m("daemon", "cpu_64"), m("bare", "cpu_64"), m("plain", "cpu_64"), 0, "<=", 1.25, false, "", m("twin", "cpu_64")},
		{"added p50 over direct, 1 client", "us", added("daemon", "p50_1"), added("bare", "p50_1"), added("plain", "p50_1"), 0, "<=", 1.25, false, "", added("twin", "p50_1")},
		{"added p50 over direct, 64 clients", "us", added("daemon", "p50_64"), added("bare", "p50_64"), added("plain", "p50_64"), 0, "<=", 1.25, false, "", added("twin", "p50_64")},
		{"p99, 1 client", "us", m("daemon", "p99_1"), m("bare", "p99_1"), m("plain", "p99_1"), m("direct", "p99_1"), "<=", 1.1, false, "", m("twin", "p99_1")},
		{"p99, 64 clients", "us", m("daemon", "p99_64"), m("bare", "p99_64"), m("plain", "p99_64"), m("direct", "p99_64"), "<=", 1.1, false, "", m("twin", "p99_64")},
		{"peak RSS under load, anonymous", "MB", peakAnon[dm], peakAnon[bare], peakAnon[plain], 0, "<=", 40, true, "", 0},
		{"  the same, the headline's calls alone", "MB", headPeak, peakAnon[bare], peakAnon[plain], 0, "", 0, false, "", 0},
		{"  peak RSS, with the binary's pages", "MB", dmHWM, bareHWM, plainHWM, 0, "", 0, false, "", 0},
		{"SSE added time to first event", "us", added("daemon", "ttfb"), added("bare", "ttfb"), added("plain", "ttfb"), 0, "", 0, false, "", added("twin", "ttfb")},
	}
	// each round's own ratio (daemon over tuned, each measured in that
	// round): how far the machine's noise moves a figure between rounds
	perRound := func(f string, overDirect bool) string {
		d, t, dir := samples[key{"daemon", f}], samples[key{"bare", f}], samples[key{"direct", f}]
		lo, hi := math.Inf(1), math.Inf(-1)
		for i := range min(len(d), len(t)) {
			a, b := d[i], t[i]
			if overDirect {
				if i >= len(dir) {
					break
				}
				a, b = a-dir[i], b-dir[i]
			}
			if b == 0 {
				continue
			}
			lo, hi = min(lo, a/b), max(hi, a/b)
		}
		if lo > hi {
			return ""
		}
		return fmt.Sprintf("%.2f-%.2f", lo, hi)
	}
	for i, f := range []string{"rps_64", "cpu_64", "p50_1", "p50_64", "p99_1", "p99_64"} {
		head[i].rounds = perRound(f, f == "p50_1" || f == "p50_64")
	}
	printHead(os.Stdout, head)
	if dmBefore != nil {
		fmt.Fprintf(os.Stdout, "\nthis daemon against the daemon of %s, same rounds, each from a copy of its binary; ratios to the tuned bare proxy\n", *before)
		fmt.Fprintf(os.Stdout, "%-36s %14s %7s %14s %7s %14s\n", "figure", "before", "ratio", "after", "ratio", "tuned bare")
		for _, c := range []struct {
			name, unit, fig string
			added           bool
		}{{"throughput, 64 clients", "req/s", "rps_64", false}, {"CPU per request, 64 clients", "us", "cpu_64", false},
			{"added p50 over direct, 1 client", "us", "p50_1", true}, {"added p50 over direct, 64 clients", "us", "p50_64", true},
			{"p99, 1 client", "us", "p99_1", false}, {"p99, 64 clients", "us", "p99_64", false}} {
			get := m
			if c.added {
				get = added
			}
			b, a, t := get("before", c.fig), get("after", c.fig), get("bare", c.fig)
			fmt.Fprintf(os.Stdout, "%-36s %10.1f %-3s %7.2f %10.1f %-3s %7.2f %10.1f %s\n", c.name, b, c.unit, b/t, a, c.unit, a/t, t, c.unit)
		}
		fmt.Fprintf(os.Stdout, "%-36s %10.1f %-3s %7s %10.1f %-3s %7s %10.1f %s\n", "peak RSS under load, anonymous", peakAnon[dmBefore], "MB", "", peakAnon[dmAfter], "MB", "", peakAnon[bare], "MB")
	}
	if *protoDur > 0 {
		var prows []protoRow
		for _, p := range protocols {
			mm := func(t, f string) float64 { return m(p+" "+t, f) }
			ad := func(t, f string) float64 { return mm(t, f) - mm("direct", f) }
			prow := func(name, unit, f string, v func(t, f string) float64, direct float64) {
				prows = append(prows, protoRow{p, name, unit, v("daemon", f), v("bare", f), v("plain", f), direct})
			}
			prow("throughput, 64 clients", "req/s", "rps_64", mm, mm("direct", "rps_64"))
			prow("CPU per request, 64 clients", "us", "cpu_64", mm, 0)
			prow("added p50 over direct, 1 client", "us", "p50_1", ad, mm("direct", "p50_1"))
			prow("added p99 over direct, 1 client", "us", "p99_1", ad, mm("direct", "p99_1"))
			prow("added p50 over direct, 64 clients", "us", "p50_64", ad, mm("direct", "p50_64"))
			prow("added p99 over direct, 64 clients", "us", "p99_64", ad, mm("direct", "p99_64"))
		}
		printProtocols(os.Stdout, prows)
	}

	// the second table: the proxy component (proxy.New alone, no daemon)
	var rows []row
	addRow := func(name string, lazy, base float64, unit, baseIs string) {
		rows = append(rows, row{name, lazy, base, unit, baseIs})
	}
	const bareIs, plainIs, directIs = "tuned bare ReverseProxy", "bare, DefaultTransport", "direct to upstream"
	addRow("proxy alone: added p50 over direct, 1 client", added("lazy", "p50_1"), added("bare", "p50_1"), "us", bareIs)
	addRow("proxy alone: added p50 over direct, 64 clients", added("lazy", "p50_64"), added("bare", "p50_64"), "us", bareIs)
	addRow("proxy alone: p50 latency, 1 client", m("lazy", "p50_1"), m("direct", "p50_1"), "us", directIs)
	addRow("proxy alone: p99 latency, 1 client", m("lazy", "p99_1"), m("bare", "p99_1"), "us", bareIs)
	addRow("proxy alone: p99 latency, 64 clients", m("lazy", "p99_64"), m("bare", "p99_64"), "us", bareIs)
	addRow("proxy alone: throughput, 64 clients", m("lazy", "rps_64"), m("bare", "rps_64"), "req/s", bareIs)
	addRow("proxy alone: throughput, 64 clients", m("lazy", "rps_64"), m("plain", "rps_64"), "req/s", plainIs)
	addRow("proxy alone: throughput, 64 clients", m("lazy", "rps_64"), m("direct", "rps_64"), "req/s", directIs)
	addRow("proxy alone: CPU per request, 64 clients", m("lazy", "cpu_64"), m("bare", "cpu_64"), "us", bareIs)
	addRow("proxy alone: peak RSS under load, anonymous", peakAnon[lz], peakAnon[bare], "MB", bareIs)
	addRow("proxy alone: SSE added time to first event", added("lazy", "ttfb"), added("bare", "ttfb"), "us", bareIs)
	addRow("proxy alone: SSE added time to first event", added("lazy", "ttfb"), 1000, "us", "target")
	addRow("daemon: SSE gap between events (2 ms upstream)", m("daemon", "gap"), m("direct", "gap"), "us", directIs)
	if *proxyOnly {
		printTable(os.Stdout, rows)
		return nil
	}

	fmt.Fprintln(os.Stderr, "lazybench: Go benchmarks (store, daemon, supervisor, httpapi, proxy, the review page in Chromium)")
	gb := func(pkg, pattern, benchtime string, env ...string) map[string]map[string]float64 {
		r, err := goBench(pkg, pattern, benchtime, env...)
		if err != nil {
			fmt.Fprintln(os.Stderr, "lazybench:", err)
			return map[string]map[string]float64{}
		}
		return r
	}
	store := gb("./store", "^BenchmarkAddReviewComment$", "2000x")
	post := gb("./daemon", "^BenchmarkCommentPost(Paced|Durable)$", "3000x")
	postNormal := gb("./daemon", "^BenchmarkCommentPost(Paced|Durable)$", "3000x", "LAZY_STORAGE__SYNC=normal")
	start := gb("./daemon", "^BenchmarkDaemonStartToReady$", "20x")
	edit := gb("./proxy", "^BenchmarkEditorBody|^BenchmarkGrantLookup$", "1s")
	egress := gb("./proxy", "^BenchmarkEgressConnect$", "300x")
	page := gb("./httpapi", "^BenchmarkRenderLargeReview$", "1s")
	browser := gb("./cmd/lazy", "^BenchmarkBrowserLargeReview$", "5x")
	gitTask := gb("./cmd/lazy", "^BenchmarkGitPerTask$", "3x")
	r292 := gb("./daemon", "^BenchmarkReview292$", "20x")
	spawn := gb("./supervisor", "^BenchmarkSpawnIdleTaskActors$", "1x")
	drain := gb("./supervisor", "^BenchmarkDrainQueuedAsks$", "1x")
	hub := gb("./supervisor", "^BenchmarkHubTranscriptEvents$", "20000x")
	watched := gb("./proxy", "^BenchmarkModelCall(NoWatcher|Watched)$", "2000x")
	raw := store["AddReviewComment"]["ns/op"] / 1e3
	addRow("comment POST to durable reply, p50 (100 reviewers, 500/s)", post["CommentPostPaced"]["p50-ms"]*1e3, raw, "us", "raw store insert")
	addRow("comment POST to durable reply, p99 (100 reviewers, 500/s)", post["CommentPostPaced"]["p99-ms"]*1e3, 20000, "us", "target")
	addRow("  the same, storage.sync = normal", postNormal["CommentPostPaced"]["p99-ms"]*1e3, 20000, "us", "target")
	addRow("comment POST p99, 100 reviewers back to back", post["CommentPostDurable"]["p99-ms"]*1e3, 20000, "us", "target")
	addRow("  the same, storage.sync = normal", postNormal["CommentPostDurable"]["p99-ms"]*1e3, 20000, "us", "target")
	addRow("comments/s, 100 reviewers back to back", post["CommentPostDurable"]["comments/s"], postNormal["CommentPostDurable"]["comments/s"], "/s", "storage.sync = normal")
	addRow("editor route: 64 KiB body read whole and scanned", edit["EditorBody64KSubstituted"]["ns/op"]/1e3, edit["EditorBody64KPlus1Streamed"]["ns/op"]/1e3, "us", "same body streamed")
	addRow("grant lookup (10,000 grants)", edit["GrantLookup"]["ns/op"], 0, "ns", "")
	addRow("egress: CONNECT tunnel via a task's socket, echoed", egress["EgressConnect/connect-via-socket"]["MB/s"], egress["EgressConnect/direct"]["MB/s"], "MB/s", "direct to the same server")
	addRow("review page render: 5,000 lines, 200 threads", page["RenderLargeReview/page"]["ns/op"]/1e6, 100, "ms", "target")
	addRow("  the same, cold (every hunk lexed)", page["RenderLargeReview/page-cold"]["ns/op"]/1e6, 100, "ms", "target")
	addRow("review page weight", page["RenderLargeReview/page"]["KiB/page"], 3072, "KiB", "target")
	addRow("300-file review (15,000 lines): server answer, reloaded", browser["BrowserLargeReview"]["server-ms"], 0, "ms", "")
	addRow("review page in Chromium: load to interactive", browser["BrowserLargeReview"]["interactive-ms"], 1000, "ms", "target")
	addRow("review page in Chromium: j to the next file", browser["BrowserLargeReview"]["j-ms"], 50, "ms", "target")
	addRow("review page in Chromium: open a file sent without rows", browser["BrowserLargeReview"]["open-file-ms"], 100, "ms", "target")
	addRow("review page in Chromium: switch to split", browser["BrowserLargeReview"]["split-ms"], 100, "ms", "target")
	addRow("git processes per task, single daemon", gitTask["GitPerTask/single"]["git/task"], 12, "", "target")
	addRow("git processes per task, cluster member", gitTask["GitPerTask/member"]["git/task"], 24, "", "target")
	addRow("git processes per task, two cluster members (both counted)", gitTask["GitPerTask/members=2"]["git/task"], gitTask["GitPerTask/member"]["git/task"], "", "one member")
	addRow("292-file review page: server render", r292["Review292/page"]["ns/op"]/1e6, 0, "ms", "")
	addRow("  the same, gzipped", r292["Review292/page-gzip"]["ns/op"]/1e6, r292["Review292/page"]["ns/op"]/1e6, "ms", "sent plain")
	addRow("292-file review page weight, gzipped", r292["Review292/page"]["gzip-KiB/page"], r292["Review292/page"]["KiB/page"], "KiB", "sent plain")
	addRow("292-file review: one file sent without rows", r292["Review292/lazy-file"]["ns/op"]/1e6, r292["Review292/page"]["ns/op"]/1e6, "ms", "the whole page")
	addRow("threads JSON (200 threads)", page["RenderLargeReview/threads-json"]["ns/op"]/1e6, 5, "ms", "target")
	addRow("idle task actor spawn (10,000)", spawn["SpawnIdleTaskActors"]["ns/actor"]/1e3, 0, "us/actor", "")
	addRow("idle task actor heap", spawn["SpawnIdleTaskActors"]["heap-B/actor"], 0, "B/actor", "")
	addRow("10,000 queued asks drain, FIFO per task", drain["DrainQueuedAsks"]["asks/s"], 0, "asks/s", "")
	for _, n := range []string{"1", "10", "100"} {
		h := hub["HubTranscriptEvents/Watchers"+n]
		addRow("transcript events through the hub to "+n+" watcher(s), delivered", h["delivered/s"], h["events/s"], "/s", "published")
	}
	addRow("streamed model call, a watcher attached (transcript read)", watched["ModelCallWatched"]["ns/op"]/1e3, watched["ModelCallNoWatcher"]["ns/op"]/1e3, "us", "nobody watching")
	addRow("  its allocations", watched["ModelCallWatched"]["allocs/op"], watched["ModelCallNoWatcher"]["allocs/op"], "", "nobody watching")
	addRow("daemon start to ready", start["DaemonStartToReady"]["ns/op"]/1e6, 0, "ms", "")
	if os.Getenv("LAZY_BENCH_SCALE") != "" {
		scale := gb("./daemon", "^BenchmarkScaleTasks$", "1x")["ScaleTasks"]
		addRow("scale: heap per live task", scale["heap-KiB/task"], 0, "KiB", "")
		addRow("scale: daemon CPU per task (ask + unblock)", scale["daemon-cpu-ms/task"], 0, "ms", "")
		addRow("scale: agent CPU per task (ask + unblock)", scale["agent-cpu-ms/task"], 0, "ms", "")
	}
	printTable(os.Stdout, rows)
	return nil
}

// target is one server the load runs against: its URL, the key a client
// presents there, and the proxy process (for its CPU; nil: direct).
type target struct {
	name, url, key string
	srv            *server
}

// protoRow is one figure of the rows per protocol: the daemon's route
// beside the tuned and the DefaultTransport bare proxy to the same
// upstream path, and the direct connection's own figure (for an added
// latency: its own p50 or p99; 0: not measured).
type protoRow struct {
	protocol, name, unit         string
	daemon, tuned, plain, direct float64
}

func printProtocols(w io.Writer, rows []protoRow) {
	fmt.Fprintln(w, "\nthe proxy rows per protocol: a streamed call (~3 KB prompt; the stub streams without delay) on the")
	fmt.Fprintln(w, "daemon's route with a live grant of that protocol's task, against the bare proxies to the same")
	fmt.Fprintln(w, "upstream path, same run; ratio = daemon / tuned; direct: the direct connection's own figure")
	fmt.Fprintf(w, "%-10s %-34s %14s %14s %7s %18s %14s\n", "protocol", "figure", "daemon", "tuned bare", "ratio", "DefaultTransport", "direct")
	f := func(v float64, unit string) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f %s", v, unit)
	}
	for _, r := range rows {
		ratio := "-" // none beside a baseline at or under 0 (an added p99 within the noise)
		if r.tuned > 0 {
			ratio = fmt.Sprintf("%.2f", r.daemon/r.tuned)
		}
		fmt.Fprintf(w, "%-10s %-34s %14s %14s %7s %18s %14s\n", r.protocol, r.name, f(r.daemon, r.unit), f(r.tuned, r.unit), ratio, f(r.plain, r.unit), f(r.direct, r.unit))
	}
}

// row is one line of the table: lazy's figure beside its baseline.
type row struct {
	name         string
	lazy, base   float64
	unit, baseIs string
}

// headRow is one figure of the headline: the daemon beside the tuned bare
// proxy, the DefaultTransport one and a direct connection (0: not
// measured), and the target as a ratio to the tuned bare proxy (absolute:
// the target is the figure itself, in its unit).
type headRow struct {
	name, unit                   string
	daemon, tuned, plain, direct float64
	op                           string // ">=", "<=" or "": no target
	target                       float64
	absolute                     bool
	rounds                       string  // the lowest and highest ratio of one round
	twin                         float64 // the second tuned bare proxy's figure (0: not measured)
}

func printHead(w io.Writer, rows []headRow) {
	fmt.Fprintln(w, "\nthe daemon users run (task with a live grant, budget, usage rows, traffic events, scrubbing)")
	fmt.Fprintln(w, "against the tuned bare ReverseProxy, same run; ratio = daemon / tuned (the median of the rounds' figures);")
	fmt.Fprintln(w, "per round: the lowest and the highest of the rounds' own ratios; noise: a second tuned bare proxy's ratio to the first,")
	fmt.Fprintln(w, "measured as one more target (what the machine alone makes of a ratio); 64 clients: every target in turn, 250 ms at a time")
	fmt.Fprintf(w, "%-36s %14s %14s %7s %12s %5s %11s %6s %18s %14s\n", "figure", "daemon", "tuned bare", "ratio", "target", "met", "per round", "noise", "DefaultTransport", "direct")
	f := func(v float64, unit string) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f %s", v, unit)
	}
	for _, r := range rows {
		ratio := 0.0
		if r.tuned != 0 {
			ratio = r.daemon / r.tuned
		}
		target, met := "-", "-"
		if r.op != "" {
			got := ratio
			target = fmt.Sprintf("%s %.2fx", r.op, r.target)
			if r.absolute {
				got, target = r.daemon, fmt.Sprintf("%s %.0f %s", r.op, r.target, r.unit)
			}
			ok := got <= r.target
			if r.op == ">=" {
				ok = got >= r.target
			}
			met = map[bool]string{true: "yes", false: "NO"}[ok]
		}
		rounds := r.rounds
		if rounds == "" {
			rounds = "-"
		}
		noise := "-"
		if r.twin != 0 && r.tuned != 0 {
			noise = fmt.Sprintf("%.2f", r.twin/r.tuned)
		}
		fmt.Fprintf(w, "%-36s %14s %14s %7.2f %12s %5s %11s %6s %18s %14s\n", r.name, f(r.daemon, r.unit), f(r.tuned, r.unit), ratio, target, met, rounds, noise, f(r.plain, r.unit), f(r.direct, r.unit))
	}
}

// loadAvg is the machine's load average (1, 5, 15 minutes).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func printTable(w io.Writer, rows []row) {
	fmt.Fprintf(w, "\n%-58s %14s %14s %7s  %s\n", "figure", "lazy", "baseline", "ratio", "baseline is")
	for _, r := range rows {
		base, ratio := "-", "-"
		if r.baseIs != "" {
			base = fmt.Sprintf("%.1f %s", r.base, r.unit)
			if r.base != 0 {
				ratio = fmt.Sprintf("%.2f", r.lazy/r.base)
			}
		}
		fmt.Fprintf(w, "%-58s %14s %14s %7s  %s\n", r.name, fmt.Sprintf("%.1f %s", r.lazy, r.unit), base, ratio, r.baseIs)
	}
}

// goBench runs `go test -bench` in pkg and returns benchmark → unit → value.
func goBench(pkg, pattern, benchtime string, env ...string) (map[string]map[string]float64, error) {
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", pattern, "-benchtime", benchtime, "-benchmem", "-timeout", "60m", pkg)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go test -bench %s %s: %w", pattern, pkg, err)
	}
	return parseBench(string(out)), nil
}

// parseBench reads `go test -bench` output: each benchmark's figures by its
// name (without "Benchmark" and the -N suffix).
func parseBench(out string) map[string]map[string]float64 {
	res := map[string]map[string]float64{}
	// a line the code under test logged while a benchmark ran splits the
	// benchmark's name (printed first) from its figures (printed at its
	// end): the figures then belong to the last name seen alone
	pending := ""
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && strings.HasPrefix(f[0], "Benchmark") {
			name := strings.TrimPrefix(f[0], "Benchmark")
			if i := strings.LastIndexByte(name, '-'); i > 0 {
				name = name[:i]
			}
			if figures(f[1:]) {
				res[name], pending = benchFigures(f[1:]), ""
			} else {
				pending = name
			}
			continue
		}
		if pending != "" && figures(f) {
			res[pending], pending = benchFigures(f), ""
		}
	}
	return res
}

// figures says whether f is a benchmark's figures: its iterations, then
// value and unit pairs (a benchmark may report no ns/op, only its own).
func figures(f []string) bool {
	if len(f) < 3 || len(f)%2 != 1 {
		return false
	}
	if _, err := strconv.Atoi(f[0]); err != nil {
		return false
	}
	for i := 1; i+1 < len(f); i += 2 {
		if _, err := strconv.ParseFloat(f[i], 64); err != nil {
			return false
		}
		if _, err := strconv.ParseFloat(f[i+1], 64); err == nil {
			return false // a number where a unit goes
		}
	}
	return true
}

// benchFigures reads a benchmark's figures: its iterations, then value
// and unit pairs ("123 ns/op 456 B/op").
func benchFigures(f []string) map[string]float64 {
	vals := map[string]float64{}
	for i := 1; i+1 < len(f); i += 2 {
		if v, err := strconv.ParseFloat(f[i], 64); err == nil {
			vals[f[i+1]] = v
		}
	}
	return vals
}

// cpuProfileRate sets the CPU profile's rate from LAZYBENCH_CPUHZ (samples a
// second; pprof's own is 100, too few to tell apart costs of a microsecond a
// call in a run of seconds). pprof.StartCPUProfile then keeps it, with a
// warning on stderr that it could not set its own.
func cpuProfileRate() {
	if hz, err := strconv.Atoi(os.Getenv("LAZYBENCH_CPUHZ")); err == nil && hz > 0 {
		runtime.SetCPUProfileRate(hz)
	}
}

// startProfiles starts a CPU profile (LAZYBENCH_CPUPROFILE=FILE, at
// LAZYBENCH_CPUHZ samples a second) and an execution trace
// (LAZYBENCH_TRACE=FILE) of this process, as asked; stop ends and writes
// them (once), on says whether any was asked.
func startProfiles() (stop func(), on bool, err error) {
	var stops []func()
	stop = sync.OnceFunc(func() {
		for _, s := range stops {
			s()
		}
	})
	if path := os.Getenv("LAZYBENCH_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return stop, false, err
		}
		cpuProfileRate()
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return stop, false, err
		}
		stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if path := os.Getenv("LAZYBENCH_TRACE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			stop()
			return stop, false, err
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			stop()
			return stop, false, err
		}
		stops = append(stops, func() { trace.Stop(); f.Close() })
	}
	return stop, len(stops) > 0, nil
}
