package api

import (
	"testing"
	"time"
)

// TestTrafficLine pins the traffic line of CONTRACT §6 and §15 byte for
// byte (these lines are what the fmt-built line printed): fields made safe
// for one line, claimed attribution marked, usage, refusal, tripwire and
// error in their places; AppendLine appends the same after what b holds.
func TestTrafficLine(t *testing.T) {
	at := time.Date(2026, 11, 25, 18, 0, 1, 500, time.FixedZone("x", 3600))
	for _, c := range []struct {
		t    Traffic
		want string
	}{
		{Traffic{Time: at, TaskRef: "t1", Role: "fast", Method: "POST", Path: "/v1/messages", Status: 200, Upstream: "api.anthropic.com", Millis: 12, Usage: &CallUsage{InputTokens: 10, OutputTokens: 3}},
			"net> 2026-11-25T17:00:01Z t1 fast POST /v1/messages -> 200 api.anthropic.com 12ms tokens: 10 in / 3 out"},
		{Traffic{Time: at, Method: "GET", Path: "/a b/\x00\xffé", Status: 403, ClaimedRef: "x y", ClaimedRole: "r\n", Refused: "no grant", Tripwire: "canary", Error: "dial tcp:\n  refused\x7f  now", Usage: &CallUsage{CacheReadInputTokens: 5}},
			"net> 2026-11-25T17:00:01Z x%20y? r%0A? GET /a%20b/%00%FF%C3%A9 -> 403 - 0ms tokens: 0 in / 0 out (cache 5 read / 0 written) refused: no%20grant tripwire: canary error: dial tcp: refused now (attribution unverified: x-svc headers, no grant)"},
		{Traffic{Time: at, TaskRef: "t2", Method: "CONNECT", Path: "example.com:443", Status: 200, Egress: true, BytesUp: 100, BytesDown: 2000, Millis: 5},
			"net> 2026-11-25T17:00:01Z t2 - CONNECT example.com:443 -> 200 100/2000 5ms"},
		{Traffic{Time: at, TaskRef: "t3", ClaimedRole: "w", Method: "POST", Path: "/", Status: 499, Millis: -1, Usage: &CallUsage{InputTokens: 1, OutputTokens: 2, CacheCreationInputTokens: 7}},
			"net> 2026-11-25T17:00:01Z t3 w? POST / -> 499 - -1ms tokens: 1 in / 2 out (cache 0 read / 7 written) (attribution unverified: x-svc headers, no grant)"},
	} {
		if got := c.t.Line(); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
		if got := string(c.t.AppendLine([]byte("msg="))); got != "msg="+c.want {
			t.Errorf("appended: got %q", got)
		}
	}
}

// BenchmarkTrafficLine: one model call's line into a reused buffer.
func BenchmarkTrafficLine(b *testing.B) {
	tr := Traffic{Time: time.Now(), TaskRef: "t1", Role: "fast", Method: "POST", Path: "/v1/messages", Status: 200, Upstream: "api.anthropic.com", Millis: 12, Usage: &CallUsage{InputTokens: 10, OutputTokens: 3}}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for range b.N {
		buf = tr.AppendLine(buf[:0])
	}
}
