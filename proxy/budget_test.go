package proxy

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// TestMaxTokensOf: max_tokens is read at the top level only, escaped or
// duplicated keys held at their largest; text inside values never counts.
func TestMaxTokensOf(t *testing.T) {
	for _, tc := range []struct {
		body string
		want int64
		ok   bool
	}{
		{`{"model":"m","max_tokens":1000,"messages":[]}`, 1000, true},
		{`{"messages":[{"content":"\"max_tokens\":1"}],"max_tokens": 32000}`, 32000, true},
		{`{"max_tokens":10,"max_tokens":900}`, 900, true},
		{`{"max\u005ftokens":700}`, 700, true},
		{`{"max_tokens":1.5e3}`, 1500, true},
		{`{"meta":{"max_tokens":99}}`, 0, false},
		{`{"max_tokens":-4}`, 0, false},
		{`{"max_tokens":"lots"}`, 0, false},
		{`[1,2]`, 0, false},
		{`{"max_tokens":`, 0, false},
	} {
		if got, ok := maxTokensOf([]byte(tc.body), "max_tokens"); got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %d %v, want %d %v", tc.body, got, ok, tc.want, tc.ok)
		}
	}
}

// TestHoldAndSettle: what the proxy holds for each route, and what it
// charges: nothing for a call that never reached an upstream, the usage
// for a reply read to its end.
func TestHoldAndSettle(t *testing.T) {
	up := newUpstream(t)
	f := newFixture(t, cfgFor(up.srv.URL, "provider"))
	f.writeCred("provider", realKey)
	var mu sync.Mutex
	var asked []int64
	f.p.o.Reserve = func(taskID string, estimate func() int64) (int64, string) {
		n := estimate()
		mu.Lock()
		asked = append(asked, n)
		mu.Unlock()
		return max(n, 1), ""
	}
	key := f.key("hold")
	resp := f.do("POST", "/v1/messages", key, msgBody)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	tr := f.lastTraffic()
	if want := int64((len(msgBody)+3)/4 + 5); tr.Reserved != want || tr.Usage == nil || tr.Charged != tr.Usage.Tokens() {
		t.Errorf("a whole reply: held %d (want %d), charged %d, usage %+v", tr.Reserved, want, tr.Charged, tr.Usage)
	}
	resp = f.do("POST", "/v1/messages/count_tokens", key, msgBody)
	resp.Body.Close()
	if tr := f.lastTraffic(); tr.Reserved != 1 || tr.Charged != 0 {
		t.Errorf("count_tokens: %+v", tr)
	}
	// an upstream that cannot be reached never had the call
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	g := newFixture(t, cfgFor("http://"+dead, "provider"))
	g.writeCred("provider", realKey)
	g.p.o.Reserve = func(string, func() int64) (int64, string) { return 77, "" }
	resp = g.do("POST", "/v1/messages", g.key("dead"), strings.Replace(msgBody, `"max_tokens":5`, `"max_tokens":50000`, 1))
	resp.Body.Close()
	if tr := g.lastTraffic(); resp.StatusCode != 502 || tr.Reserved != 77 || tr.Charged != 0 {
		t.Errorf("unreachable upstream: %d %+v", resp.StatusCode, tr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || asked[1] != 0 {
		t.Errorf("holds asked: %v (count_tokens holds nothing)", asked)
	}
}
