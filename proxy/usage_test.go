package proxy

import (
	"io"
	"lazy/api"
	"strings"
	"testing"
)

// scanUsage reads body through the scanner in the given chunk sizes.
func scanUsage(t *testing.T, body string, chunks []int) (api.CallUsage, bool, string) {
	t.Helper()
	var u api.CallUsage
	var seen bool
	var b strings.Builder
	s := newUsageScanner(io.NopCloser(strings.NewReader("")), &u, &seen, new(bool))
	rest := body
	for _, n := range chunks {
		n = min(n, len(rest))
		b.WriteString(rest[:n])
		s.scan([]byte(rest[:n]))
		rest = rest[n:]
	}
	b.WriteString(rest)
	s.scan([]byte(rest))
	return u, seen, b.String()
}

const sseReply = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":7,\"cache_read_input_tokens\":3,\"output_tokens\":1}}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"the \\\"usage\\\": {\\\"output_tokens\\\": 0} is text\"}}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

func TestUsageFromSSEAnySplit(t *testing.T) {
	want := api.CallUsage{InputTokens: 25, OutputTokens: 15, CacheReadInputTokens: 3, CacheCreationInputTokens: 7}
	for i := 0; i <= len(sseReply); i++ {
		for _, step := range []int{1, 7} {
			chunks := []int{i}
			for k := 0; k < len(sseReply); k += step {
				chunks = append(chunks, step)
			}
			u, seen, _ := scanUsage(t, sseReply, chunks)
			if !seen || u != want {
				t.Fatalf("split at %d then every %d: %+v (seen %v), want %+v", i, step, u, seen, want)
			}
		}
	}
}

func TestUsageFromJSON(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       api.CallUsage
		seen       bool
	}{
		{"reply", `{"id":"m","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":12,"output_tokens":3}}`, api.CallUsage{InputTokens: 12, OutputTokens: 3}, true},
		// a tool's input may hold a "usage" key; the reply's own comes last
		{"tool input first", `{"content":[{"type":"tool_use","input":{"usage":{"input_tokens":0,"output_tokens":0}}}],"usage":{"input_tokens":40,"output_tokens":9}}`, api.CallUsage{InputTokens: 40, OutputTokens: 9}, true},
		{"usage as a value", `{"kind":"usage","note":["usage"],"usage" : {"input_tokens": 5, "output_tokens": 2}}`, api.CallUsage{InputTokens: 5, OutputTokens: 2}, true},
		{"count_tokens", `{"input_tokens":321}`, api.CallUsage{}, false},
		{"error", `{"type":"error","error":{"type":"overloaded_error","message":"usage is high"}}`, api.CallUsage{}, false},
		{"nested braces in strings", `{"usage":{"input_tokens":1,"note":"}{","output_tokens":2}}`, api.CallUsage{InputTokens: 1, OutputTokens: 2}, true},
	} {
		u, seen, passed := scanUsage(t, tc.body, []int{3, 5})
		if u != tc.want || seen != tc.seen {
			t.Errorf("%s: %+v seen %v, want %+v %v", tc.name, u, seen, tc.want, tc.seen)
		}
		if passed != tc.body {
			t.Errorf("%s: the body changed", tc.name)
		}
	}
}
