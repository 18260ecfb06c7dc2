package proxy

import (
	"encoding/json"
	"errors"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// Budgets that hold (CONTRACT §12): before a task's model call leaves, the
// proxy holds what the call may cost of the task's budget (Options.Reserve);
// the call's traffic event settles it with what the upstream said it cost.
// A call is let through only while the task's charged and held tokens are
// under its budget, so calls in flight together overrun it by at most the
// hold of the last one let through — as long as no reply costs more than
// its hold (see reservation for how a hold is sized).

// bytesPerToken sizes a call's input: a request body of n bytes is held as
// n/4 input tokens (about four bytes a token for English and code, and the
// body's JSON — keys, quotes, escapes, base64 images — only adds bytes).
// Text that tokenizes denser (digits, CJK) can cost more; the reply's own
// usage is charged in full then, past the hold.
const bytesPerToken = 4

// DefaultReserveOutput is the output held for a call whose max_tokens the
// proxy cannot read: a body too large to hold within the replay bounds, or
// one that names none.
const DefaultReserveOutput = 32_000

// maxReserve bounds one hold (a max_tokens of 1e300 is held as this).
const maxReserve = 1 << 40

// reservation is what a task's call may cost, held of its budget before it
// leaves: the request's max_tokens (the most output it may get) plus its
// body's bytes / bytesPerToken (its input). count_tokens and /api/hello
// cost no tokens. It reads the body whole to find max_tokens, within the
// replay bounds (the body is then sent from memory); one that does not fit
// is held at its length / bytesPerToken + DefaultReserveOutput and streamed.
func (p *Proxy) reservation(r *http.Request, pl *plan) int64 {
	maxKey := "max_tokens"
	switch {
	case r.URL.Path == "/v1/messages":
	case r.URL.Path == OpenAIRoute:
		maxKey = "max_output_tokens"
	case pl.gemini:
		maxKey = "" // generationConfig.maxOutputTokens is nested: the default hold
	default:
		return 0
	}
	if pl.body == nil && !pl.bodyRead && r.Body != nil && r.Body != http.NoBody {
		if err := p.bufferForReplay(r, pl); err != nil {
			pl.bodyErr = err
			return 0
		}
	}
	if pl.body == nil {
		n := r.ContentLength
		if n < 0 || r.Body != nil && r.Body != http.NoBody {
			n = max(n, maxReplayBody) // not held: it may be as long as that, or more
		}
		return min(n/bytesPerToken+DefaultReserveOutput, maxReserve)
	}
	b := pl.body.bytes()
	out, ok := int64(0), false
	if maxKey != "" {
		out, ok = maxTokensOf(b, maxKey)
	}
	if !ok {
		out = DefaultReserveOutput
	}
	return min((int64(len(b))+bytesPerToken-1)/bytesPerToken+out, maxReserve)
}

// bytes is the whole body in one slice.
func (b *replayBody) bytes() []byte {
	if len(b.chunks) == 1 {
		return b.chunks[0]
	}
	out := make([]byte, 0, b.n)
	for _, c := range b.chunks {
		out = append(out, c...)
	}
	return out
}

// charge is what the call counts against its task's budget: nothing when
// it never reached the upstream; the upstream's own input + output tokens
// when its reply was read to its end; else (the client hung up, the
// upstream or the proxy cut the reply) the most of the hold and what the
// reply had said so far: the upstream may have spent all it was allowed.
func (pl *plan) charge() int64 {
	var seen int64
	if pl.usageSeen {
		seen = pl.usage.Tokens()
	}
	switch {
	case !pl.left:
		return 0
	case pl.usageDone:
		return seen
	}
	return max(pl.held, seen)
}

// neverSent reports a transport error before the call could reach an
// upstream: a refusal while injecting, a connection never made.
func neverSent(err error) bool {
	var ref *refusal
	if errors.As(err, &ref) {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// maxTokensOf is the largest max_tokens at the top level of the JSON object
// b, and whether it names one. A key written with escapes counts, and so
// does a duplicate: whichever an upstream reads, the largest is held.
// Nested values are skipped whole, so text the agent wrote never counts.
func maxTokensOf(b []byte, name string) (int64, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return 0, false
	}
	var best int64
	found := false
	for i++; ; {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] == '}' {
			return best, found
		}
		if b[i] == ',' {
			i++
			continue
		}
		if b[i] != '"' {
			return best, found
		}
		end, ok := skipValue(b, i)
		if !ok {
			return best, found
		}
		key := b[i:end]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return best, found
		}
		i = skipSpace(b, i+1)
		vend, ok := skipValue(b, i)
		if !ok || vend <= i {
			return best, found
		}
		if isMaxTokensKey(key, name) {
			if n, ok := parseCount(string(b[i:vend])); ok {
				best, found = max(best, n), true
			}
		}
		i = vend
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// isMaxTokensKey reports the quoted key name ("max_tokens",
// "max_output_tokens"), however escaped.
func isMaxTokensKey(key []byte, name string) bool {
	if len(key) == len(name)+2 && string(key[1:len(key)-1]) == name {
		return true
	}
	if !strings.ContainsRune(string(key), '\\') {
		return false
	}
	var s string
	return json.Unmarshal(key, &s) == nil && s == name
}

// parseCount reads a token count: an integer, or a number rounded up.
func parseCount(v string) (int64, bool) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return min(max(n, 0), maxReserve), n >= 0
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || f < 0 {
		return 0, false
	}
	return int64(min(math.Ceil(f), maxReserve)), true
}
