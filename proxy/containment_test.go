package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lazy/config"
)

// TestFailClosed: the real credential is added only for a live grant. No
// key, a junk key, a revoked placeholder, any case of "bearer": the upstream
// sees exactly what the client presented, or nothing leaves.
func TestFailClosed(t *testing.T) {
	up := newUpstream(t)
	f := newFixture(t, cfgFor(up.srv.URL, "provider"))
	f.writeCred("provider", realKey)
	live := NewPlaceholder("api_key", "")
	f.grant(live, "", "fix", "ANTHROPIC_API_KEY")
	revoked := NewPlaceholder("api_key", "")
	cases := []struct {
		name   string
		hdr    map[string]string
		status int
		cause  string
		sent   map[string]string // what the upstream must see (passthrough)
	}{
		{"no key", nil, 200, "", map[string]string{"x-api-key": "", "Authorization": ""}},
		{"junk key", map[string]string{"x-api-key": "junk"}, 200, "", map[string]string{"x-api-key": "junk"}},
		{"junk bearer", map[string]string{"Authorization": "Bearer junk"}, 200, "", map[string]string{"Authorization": "Bearer junk", "x-api-key": ""}},
		{"revoked placeholder", map[string]string{"x-api-key": revoked}, 401, CauseUnknownPlaceholder, nil},
		{"revoked, lower-case bearer", map[string]string{"Authorization": "bearer " + revoked}, 401, CauseUnknownPlaceholder, nil},
		{"revoked beside a live one", map[string]string{"x-api-key": live, "Authorization": "Bearer " + revoked}, 401, CauseUnknownPlaceholder, nil},
		{"live, lower-case bearer", map[string]string{"Authorization": "bearer " + live}, 200, "", map[string]string{"x-api-key": realKey, "Authorization": ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(up.Requests())
			resp := f.do("POST", "/v1/messages", tc.hdr, msgBody)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			reqs := up.Requests()[before:]
			if tc.cause != "" {
				if len(reqs) != 0 || f.lastTraffic().Refused != tc.cause {
					t.Fatalf("want refusal %s before any upstream: %d sent, %+v", tc.cause, len(reqs), f.lastTraffic())
				}
				return
			}
			if len(reqs) != 1 {
				t.Fatalf("upstream saw %d", len(reqs))
			}
			for k, v := range tc.sent {
				if got := reqs[0].Header.Get(k); got != v {
					t.Errorf("upstream %s = %q, want %q", k, got, v)
				}
			}
			if tc.sent["x-api-key"] != realKey && strings.Contains(fmt.Sprint(reqs[0].Header), realKey) {
				t.Error("the real key was injected into traffic with no grant")
			}
		})
	}

	t.Run("no_grant refuse", func(t *testing.T) {
		cfg := cfgFor(up.srv.URL, "provider")
		cfg.Proxy.NoGrant = config.NoGrantRefuse
		f := newFixture(t, cfg)
		f.writeCred("provider", realKey)
		before := len(up.Requests())
		resp := f.do("POST", "/v1/messages", map[string]string{"x-api-key": "junk"}, msgBody)
		resp.Body.Close()
		if resp.StatusCode != 401 || f.lastTraffic().Refused != CauseNoGrant || len(up.Requests()) != before {
			t.Fatalf("no_grant = refuse: status %d %+v", resp.StatusCode, f.lastTraffic())
		}
	})
}

func TestGrantKindAndRole(t *testing.T) {
	up := newUpstream(t)
	cfg := cfgFor(up.srv.URL, "provider")
	cfg.Proxy.EditorUpstream = up.srv.URL
	cfg.Models.Roles = map[string]config.Role{"local": {Endpoint: up.srv.URL, Credential: "provider", Local: true}}
	f := newFixture(t, cfg)
	f.writeCred("provider", realKey)
	f.writeCred("editor", "key_REALEDITOR_1234567")
	model := NewPlaceholder("api_key", "")
	f.grant(model, "", "fix", "ANTHROPIC_API_KEY")
	editor := NewEditorPlaceholder()
	f.grant(editor, "", "fix", "CURSOR_API_KEY")
	gone := NewPlaceholder("api_key", "")
	f.grant(gone, "reviewer", "fix", "ANTHROPIC_API_KEY")
	for _, tc := range []struct{ name, path, key, cause string }{
		{"model placeholder on the editor route", "/_svc/cursor/" + model + "/v1/x", "", CauseWrongGrantKind},
		{"editor placeholder on a model route", "/v1/messages", editor, CauseWrongGrantKind},
		{"a role removed from the config", "/v1/messages", gone, CauseRoleNotConfigured},
	} {
		hdr := map[string]string{}
		if tc.key != "" {
			hdr["x-api-key"] = tc.key
		}
		resp := f.do("POST", tc.path, hdr, msgBody)
		resp.Body.Close()
		if resp.StatusCode != 401 || f.lastTraffic().Refused != tc.cause {
			t.Errorf("%s: status %d, traffic %+v; want %s", tc.name, resp.StatusCode, f.lastTraffic(), tc.cause)
		}
	}
	if n := len(up.Requests()); n != 0 {
		t.Fatalf("%d refused requests reached the upstream", n)
	}
}

// TestCrossOrigin: nothing a browser sends reaches an upstream: an Origin, a
// Sec-Fetch-Site, a preflight, a rebound Host name.
func TestCrossOrigin(t *testing.T) {
	up := newUpstream(t)
	f := newFixture(t, cfgFor(up.srv.URL, "provider"))
	f.writeCred("provider", realKey)
	key := f.key("fix")
	for _, tc := range []struct {
		name, method string
		hdr          map[string]string
		status       int
	}{
		{"Origin", "POST", map[string]string{"Origin": "http://evil.example"}, 403},
		{"Origin null", "POST", map[string]string{"Origin": "null"}, 403},
		{"no-cors fetch", "POST", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"preflight", "OPTIONS", map[string]string{"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}, 403},
		{"bare OPTIONS", "OPTIONS", nil, 405},
		{"DNS rebinding", "POST", map[string]string{"Host": "evil.example:80"}, 403},
	} {
		req, _ := http.NewRequest(tc.method, f.srv.URL+"/v1/messages", strings.NewReader(msgBody))
		for k, v := range key {
			req.Header.Set(k, v)
		}
		for k, v := range tc.hdr {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
		if tc.status == 403 && f.lastTraffic().Refused != CauseCrossOrigin {
			t.Errorf("%s: traffic must name cross_origin: %+v", tc.name, f.lastTraffic())
		}
		if resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: CORS header in the answer", tc.name)
		}
	}
	if n := len(up.Requests()); n != 0 {
		t.Fatalf("%d browser requests reached the upstream", n)
	}
	// the proxy's own port is checked when it is known
	cfg := cfgFor(up.srv.URL, "none")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{Config: &cfg, Home: t.TempDir(), Grants: f.grants, Port: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := originForm(httptest.NewRequest("POST", "http://127.0.0.1:2/v1/messages", strings.NewReader(msgBody)))
	p.ServeHTTP(rec, req)
	if rec.Code != 403 || rec.Header().Get("x-lazy-refused") != CauseCrossOrigin {
		t.Fatalf("a Host naming another port: %d", rec.Code)
	}
}

// echoUpstream sends the credential it received back in every place a
// response has: body, headers, a cookie, a redirect, and optionally an SSE
// stream with the key split at offset split.
func echoUpstream(t *testing.T, split *int) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("x-api-key")
		w.Header().Set("X-Echo", "got "+key)
		w.Header().Set("Set-Cookie", "session="+key+"; Path=/")
		w.Header().Set("Location", "https://example.com/?k="+key)
		if split == nil {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"you_sent":%q,"again":%q}`, key, key)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		ev := "event: content_block_delta\ndata: {\"text\":\"" + key + "\"}\n\n"
		at := strings.Index(ev, key) + *split
		fl := w.(http.Flusher)
		io.WriteString(w, ev[:at])
		fl.Flush()
		time.Sleep(2 * time.Millisecond)
		io.WriteString(w, ev[at:])
		fl.Flush()
		io.WriteString(w, "event: message_stop\ndata: {}\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestEchoingUpstreamScrubbed: an upstream that echoes the credential hands
// the client nothing of it; the tripwire fires and names the grant's task.
func TestEchoingUpstreamScrubbed(t *testing.T) {
	var split *int
	up := echoUpstream(t, nil)
	_ = split
	cfg := cfgFor(up.URL, "provider")
	f := newFixture(t, cfg)
	var mu sync.Mutex
	var trips []string
	f.p.o.Tripwire = func(taskID, ref, what string) {
		mu.Lock()
		trips = append(trips, ref+":"+what)
		mu.Unlock()
	}
	f.writeCred("provider", realKey)
	resp := f.do("POST", "/v1/messages", f.key("echo"), msgBody)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	all := fmt.Sprint(resp.Header) + string(b)
	if strings.Contains(all, realKey) {
		t.Fatalf("the real key reached the client: %s", all)
	}
	if !strings.Contains(string(b), `"you_sent":"`+strings.Repeat("*", len(realKey))+`"`) {
		t.Errorf("body not masked in place: %s", b)
	}
	for _, h := range []string{"X-Echo", "Set-Cookie", "Location"} {
		if !strings.Contains(resp.Header.Get(h), "****") {
			t.Errorf("%s not masked: %q", h, resp.Header.Get(h))
		}
	}
	tr := f.lastTraffic()
	if tr.Tripwire != TripRealCredential || !strings.HasSuffix(tr.Line(), " tripwire: "+TripRealCredential) {
		t.Errorf("traffic line must end with the tripwire: %s", tr.Line())
	}
	mu.Lock()
	if len(trips) != 1 || trips[0] != "echo:"+TripRealCredential {
		t.Errorf("tripwire calls: %v", trips)
	}
	mu.Unlock()
}

// TestEchoingSSESplitEverywhere: the key split across two chunks at every
// offset never reaches the client.
func TestEchoingSSESplitEverywhere(t *testing.T) {
	split := 0
	up := echoUpstream(t, &split)
	f := newFixture(t, cfgFor(up.URL, "provider"))
	f.writeCred("provider", realKey)
	for split = 0; split <= len(realKey); split++ {
		// each trip revokes the task's grants: a fresh one per round
		resp := f.do("POST", "/v1/messages", f.key("sse"), `{"stream":true}`)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if bytes.Contains(b, []byte(realKey[:minPartial])) {
			t.Fatalf("split at %d: the key or a start of it reached the client: %q", split, b)
		}
		if err != nil {
			// this loopback stream was cut (seen on 2 shared cores, before
			// this change too): what came through is checked above; again
			f.lastTraffic()
			split--
			continue
		}
		if !bytes.Contains(b, []byte("message_stop")) {
			t.Fatalf("split at %d: %q (%v) %+v", split, b, err, f.lastTraffic())
		}
		if !bytes.Contains(b, []byte(strings.Repeat("*", len(realKey)))) {
			t.Fatalf("split at %d: the key was not masked in place: %q", split, b)
		}
		if f.lastTraffic().Tripwire != TripRealCredential {
			t.Fatalf("split at %d: no tripwire", split)
		}
	}
}

// TestScrubberBoundaries drives the scrubber with every chunking of a stream
// holding the key twice, and checks nothing else changes and only a possible
// start of the key is ever held back.
func TestScrubberBoundaries(t *testing.T) {
	key := []byte("sk-ant-api03-SECRET-abcdefghij")
	stream := []byte("data: sk-ant-x sk-\n\n" + string(key) + " mid sk-ant-api03-SECRE\n" + string(key) + "\n\nend s")
	want := bytes.ReplaceAll(stream, key, bytes.Repeat([]byte("*"), len(key)))
	for a := 0; a <= len(stream); a++ {
		for _, b := range []int{a, min(a+7, len(stream)), len(stream)} {
			chunks := [][]byte{stream[:a], stream[a:b], stream[b:]}
			hits := 0
			s := newScrubber(io.NopCloser(&chunkReader{chunks: chunks}), secretSet{key}, nil, func() { hits++ })
			got, err := io.ReadAll(s)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("cut at %d,%d: %q, %v", a, b, got, err)
			}
			if hits == 0 {
				t.Fatalf("cut at %d,%d: no hit reported", a, b)
			}
		}
	}
	// an SSE event ending in "\n\n" is passed at once, nothing held
	ev := []byte("event: x\ndata: {\"k\":\"sk\"}\n\n")
	s := newScrubber(io.NopCloser(&chunkReader{chunks: [][]byte{ev}}), secretSet{key}, nil, func() {})
	buf := make([]byte, 100)
	if n, _ := s.Read(buf); n != len(ev) {
		t.Fatalf("held back %d bytes of a complete event", len(ev)-n)
	}
}

// chunkReader returns one chunk per Read.
type chunkReader struct{ chunks [][]byte }

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.chunks) > 0 && len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	return n, nil
}

// TestForeignPlaceholder: another task's placeholder presented under this
// grant, in a header, the query or an editor body, trips the wire.
func TestForeignPlaceholder(t *testing.T) {
	up := newUpstream(t)
	cfg := cfgFor(up.srv.URL, "provider")
	cfg.Proxy.EditorUpstream = up.srv.URL
	f := newFixture(t, cfg)
	f.writeCred("provider", realKey)
	f.writeCred("editor", "key_REALEDITOR_1234567")
	var trips []string
	var mu sync.Mutex
	f.p.o.Tripwire = func(taskID, ref, what string) { mu.Lock(); trips = append(trips, ref+":"+what); mu.Unlock() }
	theirs := NewPlaceholder("api_key", "")
	g := *f.grants.Load()
	g2 := Grants{}
	for k, v := range g {
		g2[k] = v
	}
	g2[theirs] = Grant{Placeholder: theirs, TaskRef: "theirs", TaskID: strings.Repeat("b", 32), EnvVar: "ANTHROPIC_API_KEY"}
	f.grants.Store(&g2)

	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		body       string
	}{
		{"header", "/v1/messages", map[string]string{"x-api-key": "MINE", "x-extra": "k=" + theirs}, msgBody},
		{"second credential", "/v1/messages", map[string]string{"x-api-key": "MINE", "Authorization": "Bearer " + theirs}, msgBody},
		{"query", "/v1/messages?key=" + theirs, map[string]string{"x-api-key": "MINE"}, msgBody},
		{"editor body", "/_svc/cursor/EDITOR/v1/chat", nil, `{"apiKey":"` + theirs + `"}`},
	} {
		// a trip revokes the task's grants: fresh ones for each case
		mine := NewPlaceholder("api_key", "")
		f.grant(mine, "", "mine", "ANTHROPIC_API_KEY")
		myEditor := NewEditorPlaceholder()
		f.grant(myEditor, "", "mine", "CURSOR_API_KEY")
		if tc.hdr["x-api-key"] == "MINE" {
			tc.hdr["x-api-key"] = mine
		}
		tc.path = strings.Replace(tc.path, "EDITOR", myEditor, 1)
		resp := f.do("POST", tc.path, tc.hdr, tc.body)
		resp.Body.Close()
		tr := f.lastTraffic()
		if resp.StatusCode != 403 || tr.Tripwire != TripForeignPlaceholder || !strings.HasSuffix(tr.Line(), "tripwire: "+TripForeignPlaceholder) {
			t.Errorf("%s: status %d, line %s", tc.name, resp.StatusCode, tr.Line())
		}
	}
	if n := len(up.Requests()); n != 0 {
		t.Fatalf("%d requests with a foreign placeholder reached the upstream", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(trips) != 4 || trips[0] != "mine:"+TripForeignPlaceholder {
		t.Fatalf("tripwire calls: %v", trips)
	}
	// from the instant of the trip, the task's placeholders are dead
	resp := f.do("POST", "/v1/messages", map[string]string{"x-api-key": mineBefore(f)}, msgBody)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || f.lastTraffic().Refused != CauseUnknownPlaceholder {
		t.Fatalf("a tripped grant still works: %d", resp.StatusCode)
	}
	// and the agent hears why, not "its task ended" (it did not)
	if !strings.Contains(string(body), "tripped a wire") || strings.Contains(string(body), "task ended") {
		t.Fatalf("a tripped task's placeholder is refused with %s; want it to say the task tripped a wire", body)
	}
}

// TestTrafficLineCannotBeForged: a newline in a path or a claimed header
// stays on one line.
func TestTrafficLineCannotBeForged(t *testing.T) {
	up := newUpstream(t)
	f := newFixture(t, cfgFor(up.srv.URL, "none"))
	conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/x%%0Anet>%%20forged HTTP/1.1\r\nHost: %s\r\n\r\n", f.srv.Listener.Addr())
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	line := f.lastTraffic().Line()
	if strings.Contains(line, "\n") || !strings.Contains(line, "/v1/x%0Anet%3E%20forged") {
		t.Fatalf("line: %q", line)
	}
	resp = f.do("POST", "/v1/messages", map[string]string{"x-svc-task-id": "a\tb"}, msgBody)
	resp.Body.Close()
	if l := f.lastTraffic().Line(); strings.ContainsAny(l, "\t\n") {
		t.Fatalf("line: %q", l)
	}
}

// TestSlowBodyCut: a body trickled slower than the read timeout is cut with
// 408; the upstream never waits on it.
func TestSlowBodyCut(t *testing.T) {
	up, f := fallbackFixture(t)
	f.p.o.BodyReadTimeout = 300 * time.Millisecond
	key := f.key("slow")
	conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/messages HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nContent-Length: 1000\r\n\r\n{", f.srv.Listener.Addr(), key["x-api-key"])
	start := time.Now()
	go func() {
		for i := 0; i < 20; i++ {
			time.Sleep(100 * time.Millisecond)
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 408 || time.Since(start) > 1500*time.Millisecond {
		t.Fatalf("status %d after %s", resp.StatusCode, time.Since(start))
	}
	if len(up.Requests()) != 0 {
		t.Fatal("a trickled body reached the upstream")
	}
}

// TestReplayBudget: bodies held for fallback replay never exceed the total
// budget; a body beyond it still goes through, to the first target alone.
func TestReplayBudget(t *testing.T) {
	up, f := fallbackFixture(t)
	key := f.key("big")
	f.p.replay.Store(maxReplayTotal - 1) // as if other bodies held it all
	body := `{"pad":"` + strings.Repeat("x", 200<<10) + `"}`
	resp := f.do("POST", "/v1/messages", key, body)
	resp.Body.Close()
	f.lastTraffic() // published after the budget is given back
	if resp.StatusCode != 200 || len(up.Requests()) != 1 || len(up.Requests()[0].Body) != len(body) {
		t.Fatalf("a body over the budget must still go through whole: %d", resp.StatusCode)
	}
	if got := f.p.replay.Load(); got != maxReplayTotal-1 {
		t.Fatalf("replay budget leaked: %d", got-(maxReplayTotal-1))
	}
	f.p.replay.Store(0)
	resp = f.do("POST", "/v1/messages", key, body)
	resp.Body.Close()
	f.lastTraffic()
	if got := f.p.replay.Load(); got != 0 {
		t.Fatalf("replay budget not released: %d", got)
	}
}

// mineBefore is a placeholder of task "mine" granted before its last trip.
func mineBefore(f *fixture) string {
	for ph, g := range *f.grants.Load() {
		if g.TaskRef == "mine" && !isEditorGrant(&g) {
			return ph
		}
	}
	return ""
}

// fallbackFixture is a proxy whose primary has a fallback (so bodies are held
// for replay), with the real key in place.
func fallbackFixture(t *testing.T) (*upstream, *fixture) {
	up := newUpstream(t)
	cfg := cfgFor(up.srv.URL, "provider")
	cfg.Proxy.Fallback = []config.Fallback{{Upstream: up.srv.URL + "/fb", Credential: "provider"}}
	f := newFixture(t, cfg)
	f.writeCred("provider", realKey)
	return up, f
}

// TestRotationSeenAtOnce: every way of changing the credential file is seen
// by the very next request: in place at the same size, by rename, and
// through a symlinked path (where the directory watch cannot see the target,
// so the file is stat'ed every time).
func TestRotationSeenAtOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "provider")
	write := func(p, v string) {
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(path, "sk-ant-api03-AAAA")
	f := &CredentialFile{Path: path}
	for i, v := range []string{"sk-ant-api03-BBBB", "sk-ant-api03-CCCC", "sk-ant-api03-DDDD"} {
		if c, err := f.Load(); err != nil || (i == 0 && c.Value != "sk-ant-api03-AAAA") {
			t.Fatalf("load: %v %v", c, err)
		}
		if i%2 == 0 {
			write(path, v) // in place, same size
		} else {
			write(path+".new", v)
			if err := os.Rename(path+".new", path); err != nil {
				t.Fatal(err)
			}
		}
		if c, _ := f.Load(); c.Value != v {
			t.Fatalf("change %d not seen: %q", i, c.Value)
		}
	}
	// a symlinked credential: the target changes in another directory
	other := t.TempDir()
	target := filepath.Join(other, "real")
	write(target, "sk-ant-api03-EEEE")
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	g := &CredentialFile{Path: link}
	if c, _ := g.Load(); c.Value != "sk-ant-api03-EEEE" {
		t.Fatal(c.Value)
	}
	write(target, "sk-ant-api03-FFFFFF")
	if c, _ := g.Load(); c.Value != "sk-ant-api03-FFFFFF" {
		t.Fatalf("a symlinked credential's change not seen: %q", c.Value)
	}
}

// TestRotationSeenUnderConcurrentLoads: while goroutines load the
// credential all the time (most answers come without the lock), every
// rotation is seen by each Load that begins after it was written — also by
// one that begins while another Load is reading the file again.
func TestRotationSeenUnderConcurrentLoads(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "provider")
	value := func(i int) string { return fmt.Sprintf("sk-ant-api03-ROT%06d", i) }
	if err := os.WriteFile(path, []byte(value(0)), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &CredentialFile{Path: path}
	var written atomic.Int64 // the last rotation whose write returned
	stop := make(chan struct{})
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				min := written.Load() // written before this Load begins
				c, err := f.Load()
				var got int64
				if err == nil {
					_, err = fmt.Sscanf(c.Value, "sk-ant-api03-ROT%06d", &got)
				}
				if err != nil || got < min {
					errs <- fmt.Errorf("a Load begun after rotation %d answered %q (%v)", min, c.Value, err)
					return
				}
			}
		}()
	}
	for i := 1; i <= 300; i++ {
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(value(i)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		written.Store(int64(i))
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// FuzzMaskAll: maskAll masks what a scan by bytes.Index masks, whichever
// byte of a secret it scans for.
func FuzzMaskAll(f *testing.F) {
	f.Add([]byte("data: {\"t\":\"sk-ant-api03-AbQ0\"} sk-ant-api03-AbQ0sk-ant-api03-AbQ0"), []byte("sk-ant-api03-AbQ0"), []byte("Q"))
	f.Add([]byte("aaaa"), []byte("aa"), []byte(""))
	f.Add([]byte("xQxQQx"), []byte("QQ"), []byte("xQ"))
	f.Fuzz(func(t *testing.T, b, x, y []byte) {
		if len(x) == 0 {
			return
		}
		set := secretSet{x}
		if len(y) > 0 {
			set = append(set, y)
		}
		want := bytes.Clone(b)
		wantHit := false
		for _, s := range set {
			for off := 0; ; {
				i := bytes.Index(want[off:], s)
				if i < 0 {
					break
				}
				copy(want[off+i:], bytes.Repeat([]byte("*"), len(s)))
				off, wantHit = off+i+len(s), true
			}
		}
		got := bytes.Clone(b)
		if hit := set.maskAll(got); hit != wantHit || !bytes.Equal(got, want) {
			t.Fatalf("maskAll(%q, %q) = %q %v, want %q %v", b, set, got, hit, want, wantHit)
		}
	})
}

// BenchmarkMaskAll is a streamed reply's 4 KiB read scanned for three
// credentials of the providers' shapes (BenchmarkMaskAllIndex: the same by
// bytes.Index).
func BenchmarkMaskAll(b *testing.B)      { benchMaskAll(b, false) }
func BenchmarkMaskAllIndex(b *testing.B) { benchMaskAll(b, true) }

func benchMaskAll(b *testing.B, byIndex bool) {
	set := secretSet{
		[]byte("sk-ant-api03-" + strings.Repeat("Xy7_aBcD9eFgHiJ", 6) + "-AAAA"),
		[]byte("sk-proj-" + strings.Repeat("q1W2e3R4t5Y6u7I8", 9)),
		[]byte("AIzaSy" + strings.Repeat("Bc4_dE", 5) + "fGh"),
	}
	var buf bytes.Buffer
	for buf.Len() < 4096 {
		buf.WriteString(`event: response.output_text.delta` + "\n" + `data: {"type":"response.output_text.delta","sequence_number":7,"item_id":"msg_stub","output_index":0,"content_index":0,"delta":"this is some text the model says, with its usual words "}` + "\n\n")
	}
	chunk := buf.Bytes()[:4096]
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		if byIndex {
			for _, x := range set {
				if bytes.Contains(chunk, x) { // bytes.Index, as maskAll scanned before
					b.Fatal("a secret in the chunk")
				}
			}
		} else if set.maskAll(chunk) {
			b.Fatal("a secret in the chunk")
		}
	}
}
