package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	sse "github.com/tmaxmax/go-sse"
)

// FuzzSSEFeed: sseFeed, fed a stream in chunks of any size, dispatches the
// same events (type and data) as go-sse's Read of the whole stream.
func FuzzSSEFeed(f *testing.F) {
	f.Add([]byte("event: a\ndata: 1\n\n"), 1)
	f.Add([]byte("\xEF\xBB\xBFdata: x\r\ndata:y\r\n\r\n:c\r\nevent: z\r\rid\n\ndata"), 2)
	f.Add([]byte("data: {\"a\":1}\r\n\r\nevent: response.completed\ndata: {}\n\nid: \x00\n\nretry: 5\n\n"), 3)
	f.Add([]byte("data\n\ndata:\n\nevent\n\n"), 7)
	f.Fuzz(func(t *testing.T, b []byte, step int) {
		if step < 1 {
			step = 1
		}
		if got, want := lineEnd(b), bytes.IndexAny(b, "\r\n"); got != want {
			t.Fatalf("lineEnd(%q) = %d, want %d", b, got, want)
		}
		const max = 64
		var want []string
		for ev, err := range sse.Read(bytes.NewReader(b), &sse.ReadConfig{MaxEventSize: max}) {
			if err != nil {
				break
			}
			want = append(want, fmt.Sprintf("%q %q", ev.Type, ev.Data))
		}
		var got []string
		fd := sseFeed{max: max, onEvent: func(typ, data []byte) { got = append(got, fmt.Sprintf("%q %q", typ, data)) }}
		for i := 0; i < len(b); i += step {
			fd.feed(b[i:min(i+step, len(b))])
		}
		// go-sse stops at an event past its bound; sseFeed stops too, maybe
		// a line later or earlier: compare only streams within the bound
		if fd.dead || len(b) > max {
			return
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("step %d:\n got  %v\n want %v", step, got, want)
		}
	})
}

// FuzzResponsesEventUsage: the usage read from a terminal event without
// decoding the rest is what encoding/json reads from valid JSON.
func FuzzResponsesEventUsage(f *testing.F) {
	f.Add([]byte(`{"type":"response.completed","response":{"id":"r","output":[{"text":"a \"usage\": {}"}],"usage":{"input_tokens":30,"input_tokens_details":{"cached_tokens":10},"output_tokens":7}}}`))
	f.Add([]byte(`{"response":{"usage":{"output_tokens":1}},"type":"response.failed"}`))
	f.Add([]byte(`{"type":"response.completed","Response":{"usage":{"output_tokens":1}}}`))
	f.Add([]byte(`{"type":"response.completed","response":{"usage":null}}`))
	f.Add([]byte(`{"type":"response.completed","response":{"usage":{"output_tokens":1}},"response":{}}`))
	f.Add([]byte(`{"type":"response.c\u006fmpleted","response":{"usage":{"output_tokens":2.5}}}`))
	// the usage's own object: as the API writes it, the details null, twice,
	// folded, not an object; a count folded, twice, a fraction
	f.Add([]byte(`{"type":"response.completed","response":{"usage":{"input_tokens":328,"input_tokens_details":{"cached_tokens":0},"output_tokens":52,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":380}}}`))
	f.Add([]byte(`{"type":"response.completed","response":{"usage":{"input_tokens":3,"input_tokens_details":null}}}`))
	f.Add([]byte(`{"type":"response.completed","response":{"usage":{"input_tokens_details":{"cached_tokens":1},"input_tokens_details":{"cached_tokens":2}}}}`))
	f.Add([]byte(`{"type":"response.completed","response":{"usage":{"Input_Tokens_Details":{"cached_tokens":1}}}}`))
	f.Add([]byte(`{"type":"response.completed","response":{"usage":{"INPUT_TOKENS":4}}}`))
	f.Add([]byte(`{"type":"response.completed","response":{"usage":{"input_tokens_details":[1],"output_tokens":2,"output_tokens":3}}}`))
	f.Add([]byte(`{"type":"response.completed","response":{"usage":{"input_tokens_details":{"cached_tokens":1.5,"Cached_Tokens":2}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := responsesEventUsage(b)
		if !json.Valid(b) {
			return
		}
		want, wok := responsesEventUsageSlow(b)
		if ok != wok || fmt.Sprint(usageText(got)) != fmt.Sprint(usageText(want)) {
			t.Fatalf("%s: got %v %v, encoding/json %v %v", b, usageText(got), ok, usageText(want), wok)
		}
	})
}

func usageText(u openAIUsage) string {
	v := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	c := "-"
	if u.InputTokensDetails != nil {
		c = v(u.InputTokensDetails.CachedTokens)
	}
	return v(u.InputTokens) + "/" + v(u.OutputTokens) + "/" + c
}

// FuzzGeminiUsageOf: the usageMetadata read without decoding the rest is
// what encoding/json reads from valid JSON.
func FuzzGeminiUsageOf(f *testing.F) {
	f.Add([]byte(`{"candidates":[{"content":{"parts":[{"text":"a \"usageMetadata\":{}"}]}}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":2,"thoughtsTokenCount":1,"cachedContentTokenCount":3}}`))
	f.Add([]byte(`{"UsageMetadata":{"promptTokenCount":5}}`))
	f.Add([]byte(`{"usageMetadata":{"promptTokenCount":5},"usageMetadata":{"candidatesTokenCount":1}}`))
	f.Add([]byte(`{"usageMetadata":null}`))
	// the counts' own object: case folding (the Kelvin sign is K), a count
	// twice, null, a fraction, an exponent, past int64, another key's value
	f.Add([]byte(`{"usageMetadata":{"prompttokencount":5,"candidatesTokenCount":2}}`))
	f.Add([]byte("{\"usageMetadata\":{\"promptTo\u212aenCount\":5}}"))
	f.Add([]byte(`{"usageMetadata":{"promptTokenCount":5,"promptTokenCount":6}}`))
	f.Add([]byte(`{"usageMetadata":{"promptTokenCount":null,"thoughtsTokenCount":-0}}`))
	f.Add([]byte(`{"usageMetadata":{"promptTokenCount":5.0}}`))
	f.Add([]byte(`{"usageMetadata":{"promptTokenCount":5e2}}`))
	f.Add([]byte(`{"usageMetadata":{"promptTokenCount":9223372036854775808}}`))
	f.Add([]byte(`{"usageMetadata":{"promptTokensDetails":[{"modality":"TEXT","tokenCount":9}],"totalTokenCount":14,"promptTokenCount":5}}`))
	f.Add([]byte(`{"usageMetadata":{"promptTokenCount":"5"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := geminiUsageOf(b)
		if !json.Valid(b) {
			return
		}
		want, wok := geminiUsageSlow(b)
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		if ok != wok || string(gj) != string(wj) {
			t.Fatalf("%s: got %s %v, encoding/json %s %v", b, gj, ok, wj, wok)
		}
	})
}

// BenchmarkGeminiUsageOf is one streamed response's usage, as the API
// writes it, read by geminiUsageOf and by encoding/json alone.
func BenchmarkGeminiUsageOf(b *testing.B) {
	ev := []byte(`{"candidates": [{"content": {"parts": [{"text": " the"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 812,"candidatesTokenCount": 41,"totalTokenCount": 853,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 812}]},"modelVersion": "gemini-2.5-pro","responseId": "mmWpaOTbMbvMz7IPsJ7W-Qg"}`)
	for _, r := range []struct {
		name string
		read func([]byte) (*geminiUsageMeta, bool)
	}{{"walked", geminiUsageOf}, {"encoding-json", geminiUsageSlow}} {
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if um, ok := r.read(ev); !ok || *um.Prompt != 812 {
					b.Fatal("no usage read")
				}
			}
		})
	}
}

// BenchmarkSSEFeed is a Responses stream of 40 deltas (as the API writes
// them) fed in 4 KiB reads, as a reply passes through the proxy.
func BenchmarkSSEFeed(b *testing.B) {
	var s bytes.Buffer
	for i := range 40 {
		fmt.Fprintf(&s, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":%d,\"item_id\":\"msg_68a9f2c1d0e48191a3b2c4d5e6f70812\",\"output_index\":0,\"content_index\":0,\"delta\":\" word%d\",\"logprobs\":[],\"obfuscation\":\"aB3dE5\"}\n\n", i, i)
	}
	stream := s.Bytes()
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	events := 0
	fd := sseFeed{max: 1 << 20, onEvent: func(_, _ []byte) { events++ }}
	for b.Loop() {
		for i := 0; i < len(stream); i += 4096 {
			fd.feed(stream[i:min(i+4096, len(stream))])
		}
	}
	if events == 0 {
		b.Fatal("no events")
	}
}

// BenchmarkResponsesEventUsage is a response.completed event's usage (the
// event repeating a short answer), read by responsesEventUsage and by
// encoding/json alone.
func BenchmarkResponsesEventUsage(b *testing.B) {
	ev := []byte(`{"type":"response.completed","sequence_number":14,"response":{"id":"resp_68a9f2c1","object":"response","created_at":1756000000,"status":"completed","model":"gpt-5","output":[{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"one two three four five six seven eight nine ten","annotations":[]}]}],"usage":{"input_tokens":328,"input_tokens_details":{"cached_tokens":128},"output_tokens":52,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":380}}}`)
	for _, r := range []struct {
		name string
		read func([]byte) (openAIUsage, bool)
	}{{"walked", responsesEventUsage}, {"encoding-json", responsesEventUsageSlow}} {
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if u, ok := r.read(ev); !ok || *u.InputTokensDetails.CachedTokens != 128 {
					b.Fatal("no usage read")
				}
			}
		})
	}
}
