package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"lazy/config"
)

// The Gemini routes (CONTRACT §16): POST /v1beta/models/<model>:generateContent,
// :streamGenerateContent (?alt=sse) and :countTokens, as the gemini CLI
// sends them with an API key. Everything the Anthropic route has holds:
// the grant is found from the key the client presents (x-goog-api-key),
// the real Gemini key ([credentials.gemini]) replaces it on the way to
// proxy.gemini.upstream and nowhere else, refusals come in Google's error
// shape, replies are scrubbed of the real key (an echo trips the wire),
// canaries and budgets apply, and usage is read from usageMetadata.
//
// The key is never taken from, nor put into, the URL: the API also takes
// it as ?key=, but a URL ends up in logs (the client's, an upstream's,
// any gateway's), so a request with a key parameter is refused whatever
// it holds, and the only query kept is alt.

// CauseKeyInQuery: the client put a key in the URL's query (refused: a
// URL is logged).
const CauseKeyInQuery = "key_in_query"

// geminiMethods are the model methods the route forwards.
var geminiMethods = map[string]bool{"generateContent": true, "streamGenerateContent": true, "countTokens": true}

// isGeminiRoute reports a path under the Gemini API's version prefix.
func isGeminiRoute(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/v1beta/") }

// ParseGeminiRoute splits /v1beta/models/<model>:<method>. The model name
// is the agent's input: 1 to 128 characters of [A-Za-z0-9._-] starting
// with a letter or digit, and the method one of geminiMethods.
func ParseGeminiRoute(path string) (model, method string, ok bool) {
	rest, found := strings.CutPrefix(path, "/v1beta/models/")
	if !found {
		return "", "", false
	}
	model, method, found = strings.Cut(rest, ":")
	if !found || !geminiMethods[method] || len(model) == 0 || len(model) > 128 {
		return "", "", false
	}
	for i := 0; i < len(model); i++ {
		c := model[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case (c == '.' || c == '-' || c == '_') && i > 0:
		default:
			return "", "", false
		}
	}
	return model, method, true
}

// isGeminiGrant reports a grant minted for a Gemini key (GEMINI_API_KEY).
func isGeminiGrant(g *Grant) bool { return strings.HasPrefix(g.Placeholder, GeminiKeyPrefix+"svc-") }

// geminiStatus is Google's status name of an HTTP status.
func geminiStatus(code int) string {
	switch code {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusMethodNotAllowed:
		return "UNIMPLEMENTED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	return "INTERNAL"
}

// writeGeminiError answers in Google's error shape,
// {"error": {"code", "message", "status", "details"}}, the cause (if any)
// as a google.rpc.ErrorInfo reason in the details and in x-lazy-refused.
func writeGeminiError(w http.ResponseWriter, status int, msg, cause string) {
	w.Header().Set("Content-Type", "application/json")
	if cause != "" {
		w.Header().Set("x-lazy-refused", cause)
	}
	if cause == CauseBudgetExceeded {
		// the gemini client retries a 429 unless its message says no quota
		// is left ("limit: 0"), which is what a used budget is
		msg += " (remaining limit: 0)"
	}
	w.WriteHeader(status)
	e := map[string]any{"code": status, "message": msg, "status": geminiStatus(status)}
	if cause != "" {
		e["details"] = []any{map[string]string{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": cause, "domain": "lazy"}}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"error": e})
}

// geminiPresented is every key the client sent on a Gemini route: the
// x-goog-api-key header, and what presented reads (x-api-key, the token
// of Authorization), so a placeholder is found wherever it was put.
func geminiPresented(h http.Header) []string {
	var out []string
	for _, v := range h[hdrGoogAPIKey] {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return append(out, presented(h)...)
}

// planGemini handles the Gemini routes: the route and query checked, the
// grant found, the budget, the target and its credential.
func (p *Proxy) planGemini(w http.ResponseWriter, r *http.Request, pl *plan) bool {
	if _, _, ok := ParseGeminiRoute(r.URL.Path); !ok || r.Method != http.MethodPost {
		writeGeminiError(w, http.StatusNotFound, "lazy proxy: "+r.Method+" "+r.URL.EscapedPath()+" is not a proxied Gemini route (only POST /v1beta/models/<model>:generateContent, :streamGenerateContent and :countTokens, the model 1-128 characters of [A-Za-z0-9._-])", "")
		return false
	}
	q := r.URL.Query()
	if q.Has("key") {
		p.refuseStatus(w, pl, http.StatusBadRequest, "", CauseKeyInQuery, "lazy proxy: the API key is taken from the x-goog-api-key header only, never the URL (a URL is logged); set GEMINI_API_KEY and let the client send it")
		return false
	}
	for k := range q {
		if k != "alt" {
			writeGeminiError(w, http.StatusBadRequest, "lazy proxy: the query parameter "+k+" is not forwarded on the Gemini routes (only alt)", "")
			return false
		}
	}
	g, ok := p.grantOf(w, pl, geminiPresented(r.Header))
	if !ok {
		return false
	}
	pl.chain = []target{pl.rt.gemini}
	if g == nil {
		pl.role, pl.taskRef = headerValue(r.Header, hdrSvcRole), headerValue(r.Header, hdrSvcTaskID)
		if pl.rt.noGrant == config.NoGrantRefuse {
			p.refuse(w, pl, CauseNoGrant, causeText[CauseNoGrant])
			return false
		}
		return true // as presented, nothing of ours added
	}
	if !isGeminiGrant(g) || g.Local {
		p.refuse(w, pl, CauseWrongGrantKind, causeText[CauseWrongGrantKind])
		return false
	}
	pl.geminiCred, ok = p.sectionKey(w, pl, g, pl.rt.gemini.credential == config.CredentialGemini, pl.rt.geminiKey, CauseGeminiMissing)
	return ok
}

// CauseGeminiMissing: the real Gemini key's file is missing.
const CauseGeminiMissing = "gemini_credential_missing"

// geminiUsage reads a Gemini reply as it passes, in the reader's own
// goroutine: an SSE stream (alt=sse) parsed as it comes (sseFeed, as
// go-sse reads it), each event's usageMetadata kept (a stream's counts are
// totals so far), or one JSON object (or the JSON array of a stream
// without alt=sse), kept up to maxGeminiJSON and read at its end. The
// client's bytes are passed on as they come; the parser only copies them.
type geminiUsage struct {
	r      io.ReadCloser
	pl     *plan
	stream bool
	feed   sseFeed
	whole  []byte // a JSON reply so far
	over   bool   // past maxGeminiJSON: not read
	tx     EventParser
	ended  bool
}

// maxGeminiJSON bounds a JSON reply read for its usage (an SSE event is
// bounded by maxGeminiEvent); past it the usage is not read.
const (
	maxGeminiJSON  = 32 << 20
	maxGeminiEvent = 4 << 20
)

// newGeminiUsage reads a reply; tx (nil when no transcript is asked for)
// is handed each response (an SSE chunk, an element of a JSON array, the
// JSON reply), then ended after the usage is recorded.
func newGeminiUsage(body io.ReadCloser, pl *plan, eventStream bool, tx EventParser) *geminiUsage {
	u := &geminiUsage{r: body, pl: pl, stream: eventStream, tx: tx}
	u.feed = sseFeed{max: maxGeminiEvent, onEvent: func(_, data []byte) { u.each(data) }}
	return u
}

// each is one response of the reply: its usage, and the transcript's.
func (u *geminiUsage) each(b []byte) {
	u.record(b)
	if u.tx != nil {
		u.tx.Event(bytes.Clone(b))
	}
}

// whole reads a JSON reply at its end.
func (u *geminiUsage) wholeReply() {
	b := bytes.TrimSpace(u.whole)
	if len(b) > 0 && b[0] == '[' {
		var chunks []json.RawMessage
		if json.Unmarshal(b, &chunks) == nil {
			for _, c := range chunks {
				u.each(c)
			}
		}
		return
	}
	u.each(b)
}

// geminiUsageMeta is a response's usageMetadata.
type geminiUsageMeta struct {
	Prompt     *int64 `json:"promptTokenCount"`
	Candidates *int64 `json:"candidatesTokenCount"`
	Cached     *int64 `json:"cachedContentTokenCount"`
	Thoughts   *int64 `json:"thoughtsTokenCount"`
}

// geminiUsageOf is the usageMetadata of a response (b, a JSON object), as
// json.Unmarshal reads it, without decoding the candidates' text: the
// object's keys are walked and only the usage decoded; encoding/json reads
// the whole of a response whose keys it cannot walk so (escaped, in
// another case, twice).
func geminiUsageOf(b []byte) (*geminiUsageMeta, bool) {
	var raw []byte
	dup := false
	if jsonFields(b, func(key, value []byte) bool {
		if string(key) == "usageMetadata" {
			dup, raw = dup || raw != nil, value
		}
		return true
	}, "usageMetadata") && !dup {
		if raw == nil {
			return nil, false
		}
		if um, ok := fastUsageMeta(raw); ok {
			return um, true
		}
		var um *geminiUsageMeta
		if json.Unmarshal(raw, &um) != nil || um == nil {
			return nil, false
		}
		return um, true
	}
	return geminiUsageSlow(b)
}

// geminiCountKeys are geminiUsageMeta's keys, in the order of its fields.
var geminiCountKeys = []string{"promptTokenCount", "candidatesTokenCount", "cachedContentTokenCount", "thoughtsTokenCount"}

// fastUsageMeta reads a usageMetadata object as json.Unmarshal reads it
// into a *geminiUsageMeta, in one allocation and without reflection
// (countsObject). Every streamed chunk carries one, and encoding/json
// spent more on them than the rest of the route's own work. What it does
// not take is left to encoding/json (ok false); FuzzGeminiUsageOf holds
// the two to the same reading.
func fastUsageMeta(raw []byte) (*geminiUsageMeta, bool) {
	v := new(struct {
		meta   geminiUsageMeta
		counts [4]int64
	})
	l := lite{b: raw}
	ok := l.countsObject(geminiCountKeys, []**int64{&v.meta.Prompt, &v.meta.Candidates, &v.meta.Cached, &v.meta.Thoughts}, v.counts[:], nil)
	return &v.meta, ok && l.atEnd()
}

// countsObject reads an object as json.Unmarshal reads it into a struct
// of *int64 fields: the count under names[i] into slots[i], *fields[i]
// pointed at it (left nil for null); other keys skipped, or read by other
// when it knows them (the key it reports as a name of its own). It fails,
// for encoding/json to read the object instead, at a key twice, a key
// encoding/json would match to a name by case folding, a count that is a
// fraction, an exponent or past int64, or anything but an object.
func (l *lite) countsObject(names []string, fields []**int64, slots []int64, other func(key []byte) (mine, ok bool)) bool {
	var seen [8]bool // a name's key read (a caller has at most 8 names)
	return l.object(func(key []byte) bool {
		for i, name := range names {
			if string(key) == name {
				return once(&seen[i]) && l.count(fields[i], &slots[i])
			}
		}
		if other != nil {
			if mine, ok := other(key); mine {
				return ok
			}
		}
		for _, c := range key {
			if c >= utf8.RuneSelf {
				return false // encoding/json's case folding is not quite strings.EqualFold's beyond ASCII
			}
		}
		for _, name := range names {
			if strings.EqualFold(string(key), name) {
				return false
			}
		}
		return l.skip()
	})
}

// count reads an integer into *slot, pointed at by *field, or null (the
// field left nil).
func (l *lite) count(field **int64, slot *int64) bool {
	if l.null() {
		return true
	}
	start := l.i
	if !l.number() {
		return false
	}
	n, err := strconv.ParseInt(string(l.b[start:l.i]), 10, 64) // a fraction or an exponent fails here, as in encoding/json
	if err != nil {
		return false
	}
	*slot, *field = n, slot
	return true
}

// geminiUsageSlow is geminiUsageOf by encoding/json.
func geminiUsageSlow(b []byte) (*geminiUsageMeta, bool) {
	var m struct {
		UsageMetadata *geminiUsageMeta `json:"usageMetadata"`
	}
	if json.Unmarshal(b, &m) != nil || m.UsageMetadata == nil {
		return nil, false
	}
	return m.UsageMetadata, true
}

// record keeps the usage one response (or chunk) reports. Google counts
// cached tokens inside promptTokenCount and bills thoughts as output:
// input_tokens is the prompt less the cache read, output_tokens the
// candidates and the thoughts.
func (u *geminiUsage) record(b []byte) {
	um, ok := geminiUsageOf(b)
	if !ok {
		return
	}
	val := func(v *int64) int64 {
		if v == nil || *v < 0 {
			return 0
		}
		return *v
	}
	if um.Prompt == nil && um.Candidates == nil && um.Cached == nil && um.Thoughts == nil {
		return
	}
	cached := val(um.Cached)
	u.pl.usage.InputTokens = max(val(um.Prompt)-cached, 0)
	u.pl.usage.CacheReadInputTokens = cached
	u.pl.usage.OutputTokens = val(um.Candidates) + val(um.Thoughts)
	u.pl.usageSeen = true
}

func (u *geminiUsage) Read(p []byte) (int, error) {
	n, err := u.r.Read(p)
	if n > 0 && !u.ended {
		switch {
		case u.stream:
			u.feed.feed(p[:n])
		case !u.over:
			if len(u.whole)+n > maxGeminiJSON {
				u.whole, u.over = nil, true
			} else {
				u.whole = append(u.whole, p[:n]...)
			}
		}
	}
	if err == io.EOF {
		if !u.stream && !u.over && !u.ended {
			u.wholeReply()
		}
		u.finish()
		u.pl.usageDone = true
	}
	return n, err
}

// finish ends the transcript, once: the usage is known when Read returns
// EOF or Close returns.
func (u *geminiUsage) finish() {
	if u.ended {
		return
	}
	u.ended, u.whole = true, nil
	if u.tx != nil {
		u.tx.End()
	}
}

func (u *geminiUsage) Close() error {
	u.finish()
	return u.r.Close()
}
