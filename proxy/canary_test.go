package proxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"lazy/canary"
	"lazy/config"
)

// canaryFixture is a sandboxed proxy whose tasks have decoys, and an
// upstream that records every byte it got.
type canaryFixture struct {
	*fixture
	set   *canary.Set
	marks map[string][]string // task id → marks
	trips chan string
	got   struct {
		sync.Mutex
		bytes.Buffer
		requests int
		calls    int // the handler ran: the upstream heard of a request
	}
}

func newCanaryFixture(t *testing.T, fallback bool) *canaryFixture {
	t.Helper()
	c := &canaryFixture{trips: make(chan string, 8), marks: map[string][]string{}}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		c.got.Lock()
		c.got.Write(b)
		c.got.calls++
		if err == nil {
			c.got.requests++
		}
		c.got.Unlock()
		if err != nil {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":1,"output_tokens":1}}`)
	}))
	t.Cleanup(up.Close)
	cfg := cfgFor(up.URL, "provider")
	cfg.Agent.Runner = config.RunnerBwrap
	if fallback {
		cfg.Proxy.Fallback = []config.Fallback{{Upstream: up.URL + "/fb", Credential: "provider"}}
	}
	c.fixture = newFixture(t, cfg)
	c.writeCred("provider", realKey)
	m := canary.NewMaker([]byte("a key of the daemon's, 32 bytes!"))
	marks := map[canary.Owner][]string{}
	for _, id := range []string{taskA, taskB} {
		d := m.For(id)
		c.marks[id] = d.Marks
		marks[canary.Owner{TaskID: id, Ref: id[:4]}] = d.Marks
	}
	c.set = canary.NewSet(marks)
	c.p.o.Canaries = func() *canary.Set { return c.set }
	c.p.o.Tripwire = func(taskID, ref, what string) { c.trips <- taskID + ":" + what }
	return c
}

// TestCanaryRefused: a decoy of a sandbox home in a request's body (small,
// large and streamed, whole or any 20 bytes of it), header or query is
// refused with 403 before it leaves — the upstream never gets it, nor a
// whole request — and the sending task trips the wire `canary`, its
// placeholder dead from then on; the same request without it passes.
func TestCanaryRefused(t *testing.T) {
	big := strings.Repeat("a harmless line of a long prompt\n", 40000) // 1.3 MB
	for _, tc := range []struct {
		name     string
		fallback bool
		chunked  bool
		body     func(mark string) string
		header   bool
		query    bool
		long     bool // past the read-ahead: the upstream gets the head and a cut body
	}{
		{name: "streamed, short", chunked: true, body: func(m string) string { return `{"content":"` + m + `"}` }},
		{name: "json body", body: func(m string) string { return `{"messages":[{"role":"user","content":"my key: ` + m + `"}]}` }},
		{name: "20 bytes of it", body: func(m string) string {
			if m == "" {
				return msgBody
			}
			return `{"content":"` + m[3:3+canary.Window] + `"}`
		}},
		{name: "past 1 MB", long: true, body: func(m string) string { return `{"content":"` + big + m + `"}` }},
		{name: "streamed", chunked: true, long: true, body: func(m string) string { return `{"content":"` + big + m + big + `"}` }},
		{name: "buffered for a fallback", fallback: true, body: func(m string) string { return `{"content":"` + big + m + `"}` }},
		{name: "header", header: true, body: func(string) string { return msgBody }},
		{name: "query", query: true, body: func(string) string { return msgBody }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCanaryFixture(t, tc.fallback)
			ph := c.grantTo(taskA, "mine")
			client, _ := openSocket(t, c.sockets(), taskA, "mine")
			send := func(mark string) (*http.Response, string) {
				t.Helper()
				url := "http://127.0.0.1/v1/messages"
				if tc.query && mark != "" {
					url += "?beta=true&x=" + mark
				}
				var body io.Reader = strings.NewReader(tc.body(mark))
				if tc.chunked {
					body = io.MultiReader(body) // no length: sent chunked
				}
				req, _ := http.NewRequest("POST", url, body)
				req.Header.Set("x-api-key", ph)
				if tc.header && mark != "" {
					req.Header.Set("Cookie", "session="+mark)
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				return resp, string(b)
			}
			if resp, body := send(""); resp.StatusCode != 200 {
				t.Fatalf("without a decoy: %d %s", resp.StatusCode, body)
			}
			c.got.Lock()
			c.got.Reset()
			c.got.requests, c.got.calls = 0, 0
			c.got.Unlock()

			mark := c.marks[taskB][2] // another task's decoy: the sender trips
			resp, body := send(mark)
			tr := c.lastTraffic()
			if resp.StatusCode != 403 || !strings.Contains(body, "decoy secret") || !strings.HasSuffix(tr.Line(), " tripwire: "+TripCanary) || tr.TaskRef != "mine" {
				t.Fatalf("with a decoy: %d %s\nline: %s", resp.StatusCode, body, tr.Line())
			}
			if got := <-c.trips; got != taskA+":"+TripCanary {
				t.Fatalf("tripwire on %q, want the sending task", got)
			}
			c.got.Lock()
			n, sent, calls := c.got.requests, c.got.String(), c.got.calls
			c.got.Unlock()
			if !tc.long && calls != 0 {
				t.Fatalf("the upstream heard of the request (%d bytes of body)", len(sent))
			}
			if n != 0 || strings.Contains(sent, mark[:10]) {
				t.Fatalf("the upstream got %d whole requests and %d bytes, the decoy's start among them: %v", n, len(sent), strings.Contains(sent, mark[:10]))
			}
			if resp, _ := send(""); resp.StatusCode != 401 {
				t.Fatalf("the tripped task's placeholder still works: %d", resp.StatusCode)
			}
		})
	}
}

// TestCanaryNoTask: a decoy in traffic of no task (the TCP listener, no
// grant) is refused too, and trips the task whose decoy it is.
func TestCanaryNoTask(t *testing.T) {
	c := newCanaryFixture(t, false)
	resp := c.do("POST", "/v1/messages", map[string]string{"x-api-key": "sk-ant-api03-host-session"}, `{"content":"`+c.marks[taskB][0]+`"}`)
	resp.Body.Close()
	if resp.StatusCode != 403 || c.lastTraffic().Tripwire != TripCanary {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got := <-c.trips; got != taskB+":"+TripCanary {
		t.Fatalf("tripwire on %q, want the decoy's task", got)
	}
}

// TestCanaryBodyForEgress: the body wrapper the egress path uses hands a
// clean stream on whole, and a dirty one never past the decoy.
func TestCanaryBodyForEgress(t *testing.T) {
	c := newCanaryFixture(t, false)
	clean := strings.Repeat("x", 100000)
	b, err := io.ReadAll(c.p.CanaryBody(io.NopCloser(strings.NewReader(clean)), nil))
	if err != nil || string(b) != clean {
		t.Fatalf("clean: %d bytes, %v", len(b), err)
	}
	var hit atomic.Pointer[canary.Owner]
	mark := c.marks[taskA][4]
	b, err = io.ReadAll(c.p.CanaryBody(io.NopCloser(strings.NewReader(clean+mark)), func(o canary.Owner) { hit.Store(&o) }))
	if !IsCanary(err) || len(b) > len(clean) || hit.Load() == nil || hit.Load().TaskID != taskA {
		t.Fatalf("dirty: %d bytes, %v, owner %v", len(b), err, hit.Load())
	}
}
