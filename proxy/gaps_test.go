package proxy

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"testing"
)

// The scrubber's gaps (issue 24): an upstream that echoes the credential
// it was sent through a trailer, a 1xx informational response, or a body
// under stacked content codings. Each bypass has its test here and a seed
// in FuzzEchoingUpstream.

// gapEcho is what the echoing upstream does beside its plain body.
type gapEcho struct {
	declared   bool     // a trailer announced in a Trailer header, holding the key
	undeclared bool     // trailers never announced: one holding the key, one named by it
	early      bool     // a 103 Early Hints whose headers hold the key, before the answer
	encodings  []string // Content-Encoding header lines; the body is coded by each gzip among them
}

// serveGapEcho answers with the key it was sent, as g says.
func serveGapEcho(w http.ResponseWriter, key string, g gapEcho) {
	serveEcho(w, key, []byte(`{"you_sent":"`+key+`"}`), 0, g)
}

// serveEcho answers body, written in two parts cut at split, as g says.
func serveEcho(w http.ResponseWriter, key string, body []byte, split int, g gapEcho) {
	if g.early {
		w.Header().Set("Link", "</?k="+key+">; rel=preload")
		w.Header().Set("X-Early", key)
		w.WriteHeader(http.StatusEarlyHints)
		clear(w.Header())
	}
	if g.declared {
		w.Header().Set("Trailer", "X-Declared")
	}
	for _, e := range g.encodings {
		w.Header().Add("Content-Encoding", e)
	}
	for i := len(g.encodings) - 1; i >= 0; i-- {
		if strings.Contains(g.encodings[i], "gzip") {
			body = gzipped(body)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	at := 0
	if len(body) > 0 {
		at = ((split % len(body)) + len(body)) % len(body)
	}
	_, _ = w.Write(body[:at])
	w.(http.Flusher).Flush() // chunked: room for trailers
	_, _ = w.Write(body[at:])
	if g.declared {
		w.Header().Set("X-Declared", "got "+key)
	}
	if g.undeclared {
		w.Header().Set(http.TrailerPrefix+"X-Undeclared", "got "+key)
		w.Header().Set(http.TrailerPrefix+key, "named by the key")
	}
}

func gzipped(b []byte) []byte {
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return zb.Bytes()
}

// clientView is everything a client got for one call: the 1xx header
// blocks, the final headers, the body and the trailers, as one text.
type clientView struct {
	status int
	text   string
	body   []byte
}

// gapClient is the clients' transport: it keeps its connections (a fuzz run
// would use up the loopback's ports otherwise) and decodes nothing.
var gapClient = &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 8}

// callThrough sends one model call to the proxy at base with header hdr,
// as a real client over loopback, and gathers what came back.
func callThrough(t testing.TB, base string, hdr map[string]string, body string) clientView {
	t.Helper()
	var mu sync.Mutex
	var early []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		mu.Lock()
		early = append(early, fmt.Sprint(code, h))
		mu.Unlock()
		return nil
	}}
	req, err := http.NewRequest("POST", base+"/v1/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := gapClient.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	return clientView{status: resp.StatusCode, body: b,
		text: strings.Join(early, " ") + fmt.Sprint(resp.Header) + string(b) + fmt.Sprint(resp.Trailer)}
}

// holds reports whether the view carries the key, in any case (a header
// name comes back canonicalised: Sk-Ant-Api03-...).
func (v clientView) holds(key string) bool {
	return strings.Contains(strings.ToLower(v.text), strings.ToLower(key))
}

// gapFixture is a proxy in front of an upstream answering as g says.
func gapFixture(t *testing.T, g gapEcho) (*fixture, *[]string) {
	up := newEchoServer(t, func(w http.ResponseWriter, r *http.Request) { serveGapEcho(w, r.Header.Get("x-api-key"), g) })
	f := newFixture(t, cfgFor(up, "provider"))
	f.writeCred("provider", realKey)
	var mu sync.Mutex
	trips := &[]string{}
	f.p.o.Tripwire = func(taskID, ref, what string) {
		mu.Lock()
		*trips = append(*trips, ref+":"+what)
		mu.Unlock()
	}
	return f, trips
}

func newEchoServer(t *testing.T, h http.HandlerFunc) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestTrailerEchoScrubbed: a trailer holding the key, declared in a Trailer
// header or sent unannounced, and a trailer named by the key, reach the
// client masked or not at all, and the wire trips.
func TestTrailerEchoScrubbed(t *testing.T) {
	// a gzip body of a few bytes: the decoder's read-ahead meets the end of
	// the body, and its trailers, before the reverse proxy announces them
	for _, g := range []gapEcho{{declared: true}, {undeclared: true}, {undeclared: true, encodings: []string{"gzip"}}} {
		t.Run(fmt.Sprintf("declared=%v,%v", g.declared, g.encodings), func(t *testing.T) {
			f, trips := gapFixture(t, g)
			v := callThrough(t, f.srv.URL, f.key("trailer"), msgBody)
			if v.holds(realKey) {
				t.Fatalf("the real key reached the client: %s", v.text)
			}
			if v.status != 200 || !strings.Contains(v.text, strings.Repeat("*", len(realKey))) {
				t.Errorf("want the answer with the key masked in place: %d %s", v.status, v.text)
			}
			if tr := f.lastTraffic(); tr.Tripwire != TripRealCredential || len(*trips) != 1 {
				t.Errorf("no tripwire: %s %v", tr.Line(), *trips)
			}
		})
	}
}

// TestEarlyHintsEchoScrubbed: a 103 whose headers hold the key is
// forwarded with the key masked, and the wire trips.
func TestEarlyHintsEchoScrubbed(t *testing.T) {
	f, trips := gapFixture(t, gapEcho{early: true})
	v := callThrough(t, f.srv.URL, f.key("early"), msgBody)
	if v.holds(realKey) {
		t.Fatalf("the real key reached the client: %s", v.text)
	}
	if v.status != 200 {
		t.Errorf("status %d", v.status)
	}
	tr := f.lastTraffic()
	if tr.Tripwire != TripRealCredential || len(*trips) != 1 {
		t.Errorf("no tripwire: %s %v", tr.Line(), *trips)
	}
	if tr.Status != 200 {
		t.Errorf("the traffic line must carry the final status, not the 1xx: %s", tr.Line())
	}
}

// TestStackedEncodingsRefused: a Content-Encoding that is not exactly one
// coding the scrubber reads (identity then gzip, gzip twice, on one line or
// two) is answered 502, and none of the body passes.
func TestStackedEncodingsRefused(t *testing.T) {
	for _, encs := range [][]string{{"identity", "gzip"}, {"gzip", "gzip"}, {"gzip, gzip"}, {"gzip", "identity"}, {"", "gzip"}, {"br"}} {
		t.Run(strings.Join(encs, "+"), func(t *testing.T) {
			f, _ := gapFixture(t, gapEcho{encodings: encs})
			v := callThrough(t, f.srv.URL, f.key("enc"), msgBody)
			if v.holds(realKey) || bytes.Contains(v.body, gzipped([]byte(`{"you_sent":"`))[:10]) {
				t.Fatalf("the body passed: %s", v.text)
			}
			if v.status != http.StatusBadGateway || !strings.Contains(v.text, "Content-Encoding") {
				t.Errorf("want 502 naming the encoding: %d %s", v.status, v.text)
			}
		})
	}
	// exactly one coding the scrubber reads passes, scanned
	for _, encs := range [][]string{{"gzip"}, {"identity"}, {"x-gzip"}} {
		f, _ := gapFixture(t, gapEcho{encodings: encs})
		v := callThrough(t, f.srv.URL, f.key("enc"), msgBody)
		if v.status != 200 || v.holds(realKey) || !strings.Contains(v.text, strings.Repeat("*", len(realKey))) {
			t.Errorf("%v: %d %s", encs, v.status, v.text)
		}
	}
}

// TestEditorKeyOnlyWhereItsClientCarriesIt: the editor route puts the real
// editor key in "Authorization: Bearer" alone; the placeholder in a
// cookie, a Referer, another header, the query or a body field — read
// whole, or streamed past 64 KiB — trips the wire (misplaced_placeholder),
// and the upstream never sees the real key there.
func TestEditorKeyOnlyWhereItsClientCarriesIt(t *testing.T) {
	var mu sync.Mutex
	var seen []string // everything the editor upstream got, one text per request
	editor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.URL.String()+fmt.Sprint(r.Header)+string(b))
		mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(editor.Close)
	up := newUpstream(t)
	cfg := cfgFor(up.srv.URL, "none")
	cfg.Proxy.EditorUpstream = editor.URL
	f := newFixture(t, cfg)
	const realEditor = "key_REALEDITOR_placement_0123456789"
	f.writeCred("editor", realEditor)
	var trips []string
	f.p.o.Tripwire = func(taskID, ref, what string) { mu.Lock(); trips = append(trips, what); mu.Unlock() }
	pad := strings.Repeat("x", MaxSubstituteBody)
	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		body       string
	}{
		{"cookie", "/v1/chat", map[string]string{"Cookie": "session=PH"}, `{}`},
		{"referer", "/v1/chat", map[string]string{"Referer": "https://hooks.example/?k=PH"}, `{}`},
		{"another header", "/v1/chat", map[string]string{"X-Webhook-Auth": "PH"}, `{}`},
		{"basic scheme", "/v1/chat", map[string]string{"Authorization": "Basic PH"}, `{}`},
		{"query", "/v1/chat?k=PH", nil, `{}`},
		{"path", "/v1/PH/chat", nil, `{}`},
		{"body field", "/v1/chat", nil, `{"webhook":"https://hooks.example/?k=PH"}`},
		{"streamed body field", "/v1/chat", nil, `{"pad":"` + pad + `","webhook":"https://hooks.example/?k=PH"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ph := NewEditorPlaceholder() // a trip revokes the grant: a fresh one each
			f.grant(ph, "", "ed", "CURSOR_API_KEY")
			hdr := map[string]string{"Authorization": "Bearer " + ph}
			for k, v := range tc.hdr {
				hdr[k] = strings.ReplaceAll(v, "PH", ph)
			}
			mu.Lock()
			seen, trips = nil, nil
			mu.Unlock()
			resp := f.do("POST", "/_svc/cursor/"+ph+strings.ReplaceAll(tc.path, "PH", ph), hdr, strings.ReplaceAll(tc.body, "PH", ph))
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			tr := f.lastTraffic()
			mu.Lock()
			defer mu.Unlock()
			if tr.Tripwire != TripMisplacedPlaceholder || len(trips) != 1 || trips[0] != TripMisplacedPlaceholder {
				t.Errorf("want the wire tripped: %d %s %v", resp.StatusCode, tr.Line(), trips)
			}
			for _, s := range seen {
				if strings.Count(s, realEditor) > 1 || (strings.Contains(s, realEditor) && !strings.Contains(s, "Authorization:[Bearer "+realEditor+"]")) {
					t.Errorf("the real key reached the upstream outside Authorization: %.300s", s)
				}
				if strings.Contains(s, ph[len(ph)-randLen:]) {
					t.Errorf("the placeholder reached the upstream: %.300s", s)
				}
			}
			if tc.name != "streamed body field" && (resp.StatusCode != 403 || len(seen) != 0) {
				t.Errorf("want 403 before any byte leaves: %d, upstream saw %d", resp.StatusCode, len(seen))
			}
		})
	}
	// where its client carries it, the key is put, and nothing trips
	ph := NewEditorPlaceholder()
	f.grant(ph, "", "ed", "CURSOR_API_KEY")
	mu.Lock()
	seen, trips = nil, nil
	mu.Unlock()
	resp := f.do("POST", "/_svc/cursor/"+ph+"/auth/exchange_user_api_key", map[string]string{"Authorization": "Bearer " + ph}, `{}`)
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if resp.StatusCode != 200 || len(seen) != 1 || !strings.Contains(seen[0], "Authorization:[Bearer "+realEditor+"]") || len(trips) != 0 {
		t.Fatalf("the key exchange: %d %v %v", resp.StatusCode, seen, trips)
	}
}

// TestUpgradeRefused: an upstream that switches protocols (101) would turn
// the call into a raw tunnel past the scrubber: it is answered 502, and
// nothing it sends after reaches the client.
func TestUpgradeRefused(t *testing.T) {
	up := newEchoServer(t, func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("x-api-key")
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n" + key)
		brw.Flush()
	})
	f := newFixture(t, cfgFor(up, "provider"))
	f.writeCred("provider", realKey)
	hdr := f.key("up")
	hdr["Connection"], hdr["Upgrade"] = "Upgrade", "websocket"
	v := callThrough(t, f.srv.URL, hdr, msgBody)
	if v.holds(realKey) || v.status != http.StatusBadGateway {
		t.Fatalf("want 502 and nothing of the tunnel: %d %s", v.status, v.text)
	}
}

// originForm makes a request built from an absolute URL look as a server
// hands it to a handler for "POST /path HTTP/1.1" with that Host: the URL
// without scheme and host (an absolute-form request is egress, egress.go).
func originForm(r *http.Request) *http.Request {
	r.Host = r.URL.Host
	r.URL.Scheme, r.URL.Host = "", ""
	r.RequestURI = r.URL.RequestURI()
	return r
}
