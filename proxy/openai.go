package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"

	"lazy/api"
	"lazy/config"
)

// The OpenAI Responses route (POST /v1/responses, what the codex CLI calls,
// streamed as server-sent events). It has everything the Anthropic route
// has: the grant from the placeholder in "Authorization: Bearer", the
// [proxy.openai] upstream with [credentials.openai] injected (the origin map
// refuses a collision), refusals in OpenAI's error shape, the scrubber and
// its tripwire, canaries, usage from response.completed, budgets, the
// traffic line.

// OpenAIRoute is the OpenAI Responses path.
const OpenAIRoute = "/v1/responses"

// isOpenAIRoute reports the OpenAI Responses route.
func isOpenAIRoute(path string) bool { return path == OpenAIRoute }

// envOpenAIKey is the variable an OpenAI grant is minted for (the codex
// driver's OPENAI_API_KEY).
const envOpenAIKey = "OPENAI_API_KEY"

// isOpenAIGrant reports a grant minted for an OpenAI key: it is good on
// the OpenAI route only, and an Anthropic grant is not good there.
func isOpenAIGrant(g *Grant) bool { return g.EnvVar == envOpenAIKey }

// openAITarget is [proxy.openai] with its credential: "openai" when it
// takes [credentials.openai], else "none".
func openAITarget(cfg *config.Config) (target, error) {
	t := target{primary: true, credential: config.CredentialNone}
	org, err := config.Origin(cfg.Proxy.OpenAI.Upstream)
	if err != nil {
		return t, err
	}
	u, err := url.Parse(cfg.Proxy.OpenAI.Upstream)
	if err != nil {
		return t, err
	}
	t.url, t.origin = u, org
	if cfg.Proxy.OpenAI.Credential == config.CredentialProvider {
		t.credential = config.CredentialOpenAI
	}
	return t, nil
}

// planOpenAI resolves the grant of an OpenAI Responses call and plans its
// one target, [proxy.openai] (no fallbacks, no roles: both are Anthropic
// endpoints).
func (p *Proxy) planOpenAI(w http.ResponseWriter, r *http.Request, pl *plan) bool {
	if r.Method != http.MethodPost {
		writeAPIError(w, http.StatusMethodNotAllowed, "invalid_request_error", "lazy proxy: "+OpenAIRoute+" takes POST", "")
		return false
	}
	g, ok := p.grantOf(w, pl, presented(r.Header))
	if !ok {
		return false
	}
	pl.chain = []target{pl.rt.openai}
	if g == nil {
		// no grant: to [proxy.openai] with exactly what the client
		// presented, never with our key (or refused)
		pl.role, pl.taskRef = headerValue(r.Header, hdrSvcRole), headerValue(r.Header, hdrSvcTaskID)
		if pl.rt.noGrant == config.NoGrantRefuse {
			p.refuse(w, pl, CauseNoGrant, causeText[CauseNoGrant])
			return false
		}
		return true
	}
	if !isOpenAIGrant(g) {
		p.refuse(w, pl, CauseWrongGrantKind, causeText[CauseWrongGrantKind])
		return false
	}
	pl.openaiCred, ok = p.sectionKey(w, pl, g, pl.rt.openai.credential == config.CredentialOpenAI, pl.rt.openaiKey, CauseOpenAIMissing)
	return ok
}

// sectionKey ends the plan of a call on a route with its own key
// ([proxy.openai], [proxy.gemini]): a task over its budget is refused;
// when the target injects the section's key (inject) it is loaded, and a
// missing (cause missing) or expired key refuses the call.
func (p *Proxy) sectionKey(w http.ResponseWriter, pl *plan, g *Grant, inject bool, key *CredentialFile, missing string) (*Credential, bool) {
	if p.o.OverBudget != nil {
		if over, why := p.o.OverBudget(g.TaskID); over {
			p.refuseStatus(w, pl, http.StatusTooManyRequests, "rate_limit_error", CauseBudgetExceeded, "lazy proxy: "+why)
			return nil, false
		}
	}
	if !inject {
		return nil, true
	}
	c, err := key.Load()
	if err != nil {
		p.refuse(w, pl, missing, causeText[missing])
		return nil, false
	}
	if c.Expired(p.now()) {
		p.refuse(w, pl, CauseProviderExpired, causeText[CauseProviderExpired])
		return nil, false
	}
	return &c, true
}

// CauseOpenAIMissing: [credentials.openai] has no key on this machine.
const CauseOpenAIMissing = "openai_credential_missing"

// writeOpenAIError answers in OpenAI's error shape,
// {"error":{"message","type","param","code"}}: code is lazy's cause (a
// client shows it), type OpenAI's name for the kind of failure.
func writeOpenAIError(w http.ResponseWriter, status int, kind, msg, cause string) {
	w.Header().Set("Content-Type", "application/json")
	if cause != "" {
		w.Header().Set("x-lazy-refused", cause)
	}
	w.WriteHeader(status)
	var code any
	if cause != "" {
		code = cause
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"message": msg, "type": openAIErrorType(status, kind), "param": nil, "code": code}})
}

// openAIErrorType is OpenAI's error type for a status: a spent budget is
// "insufficient_quota" (a client stops rather than retry), a refused key
// "invalid_request_error" as OpenAI answers one.
func openAIErrorType(status int, kind string) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "insufficient_quota"
	case status >= 500:
		return "server_error"
	case kind == "permission_error":
		return "permission_error"
	}
	return "invalid_request_error"
}

// maxOpenAIEvent bounds one event of a Responses stream the usage reader
// parses: response.completed repeats the whole answer, so it is large.
const maxOpenAIEvent = 16 << 20

// responsesUsage reads an OpenAI Responses reply as it streams past the
// client and takes the call's usage from it: the usage of
// response.completed (or .incomplete, .failed) in a stream, the top-level
// usage of a JSON reply. The bytes go on unchanged, as they come; a stream
// is parsed as it passes, in the reader's own goroutine (sseFeed: no pipe,
// no goroutine per call), a JSON reply is kept (up to maxOpenAIEvent) and
// read at its end. OpenAI's input_tokens count the cached ones
// (input_tokens_details.cached_tokens): they are recorded as
// cache_read_input_tokens and the rest as input_tokens, as the Anthropic
// route records them.
type responsesUsage struct {
	r      io.ReadCloser
	stream bool
	feed   sseFeed
	whole  []byte // a JSON reply so far (nil past maxOpenAIEvent)
	over   bool
	tx     EventParser
	// the last terminal event's usage, and whether one was seen
	got   openAIUsage
	found bool
	u     *api.CallUsage
	seen  *bool
	end   *bool // the reply was read to its end
	ended bool  // finish ran
}

// newResponsesUsage reads a reply of content type ct; tx (nil when no
// transcript is asked for) is handed each event, then ended after the
// usage is recorded.
func newResponsesUsage(r io.ReadCloser, ct string, u *api.CallUsage, seen, end *bool, tx EventParser) *responsesUsage {
	ru := &responsesUsage{r: r, u: u, seen: seen, end: end, tx: tx,
		stream: strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "text/event-stream")}
	ru.feed = sseFeed{max: maxOpenAIEvent, onEvent: ru.event}
	return ru
}

func (ru *responsesUsage) Read(b []byte) (int, error) {
	n, err := ru.r.Read(b)
	if n > 0 && !ru.ended {
		switch {
		case ru.stream:
			ru.feed.feed(b[:n])
		case !ru.over:
			if len(ru.whole)+n > maxOpenAIEvent {
				ru.whole, ru.over = nil, true
			} else {
				ru.whole = append(ru.whole, b[:n]...)
			}
		}
	}
	if err != nil {
		if err == io.EOF {
			ru.eof()
			*ru.end = true
		}
		ru.finish()
	}
	return n, err
}

// eof reads a JSON reply, whole.
func (ru *responsesUsage) eof() {
	if ru.stream || ru.over || ru.ended {
		return
	}
	ru.got, ru.found = responsesJSONUsage(bytes.NewReader(ru.whole))
	if ru.tx != nil {
		ru.tx.Whole(ru.whole)
	}
}

// event is one event of a stream: the transcript's, and its usage when it
// is a terminal one.
func (ru *responsesUsage) event(typ, data []byte) {
	if ru.tx != nil {
		ru.tx.Event(bytes.Clone(data))
	}
	if len(typ) == 0 && !bytes.Contains(data, []byte(`"response.`)) {
		return
	}
	if len(typ) != 0 && !isTerminalResponses(string(typ)) {
		return
	}
	if u, ok := responsesEventUsage(data); ok {
		ru.got, ru.found = u, true
	}
}

func isTerminalResponses(typ string) bool {
	return typ == "response.completed" || typ == "response.incomplete" || typ == "response.failed"
}

// finish records the usage found (before the call's traffic record reads
// it) and ends the transcript, once.
func (ru *responsesUsage) finish() {
	if ru.ended {
		return
	}
	ru.ended = true
	ru.whole = nil
	if ru.found {
		ru.got.apply(ru.u)
		*ru.seen = true
	}
	if ru.tx != nil {
		ru.tx.End()
	}
}

func (ru *responsesUsage) Close() error {
	ru.finish()
	return ru.r.Close()
}

// openAIUsage is the usage object of a Responses reply.
type openAIUsage struct {
	InputTokens        *int64 `json:"input_tokens"`
	OutputTokens       *int64 `json:"output_tokens"`
	InputTokensDetails *struct {
		CachedTokens *int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

// apply records u the way lazy counts: input without the cached part.
func (o openAIUsage) apply(u *api.CallUsage) {
	var cached int64
	if d := o.InputTokensDetails; d != nil && d.CachedTokens != nil && *d.CachedTokens > 0 {
		cached = *d.CachedTokens
	}
	if o.InputTokens != nil && *o.InputTokens >= 0 {
		u.InputTokens = max(*o.InputTokens-cached, 0)
		u.CacheReadInputTokens = min(cached, *o.InputTokens)
	}
	if o.OutputTokens != nil && *o.OutputTokens >= 0 {
		u.OutputTokens = *o.OutputTokens
	}
}

// responsesJSONUsage reads the top-level usage of a JSON (not streamed)
// Responses reply.
func responsesJSONUsage(r io.Reader) (openAIUsage, bool) {
	var body struct {
		Usage *openAIUsage `json:"usage"`
	}
	if json.NewDecoder(r).Decode(&body) != nil || body.Usage == nil {
		return openAIUsage{}, false
	}
	return *body.Usage, true
}

// responsesEventUsage is the usage of a terminal Responses event (and
// whether it is one that carries a usage), as json.Unmarshal of
// {type, response: {usage}} reads it, without decoding the rest: the
// event repeats the whole answer, which is only skipped here. An event it
// cannot read so (a key written with escapes or in another case, an
// escaped type, JSON it cannot walk) is handed to json.Unmarshal.
func responsesEventUsage(data []byte) (openAIUsage, bool) {
	var typ, resp []byte
	dup := false // a key twice: encoding/json merges the objects
	if !jsonFields(data, func(key, value []byte) bool {
		switch string(key) {
		case "type":
			dup, typ = dup || typ != nil, value
		case "response":
			dup, resp = dup || resp != nil, value
		}
		return true
	}, "type", "response") || dup || bytes.IndexByte(typ, '\\') >= 0 {
		return responsesEventUsageSlow(data)
	}
	var usage []byte
	if len(resp) > 0 && resp[0] == '{' {
		if !jsonFields(resp, func(key, value []byte) bool {
			if string(key) == "usage" {
				dup, usage = dup || usage != nil, value
			}
			return true
		}, "usage") || dup {
			return responsesEventUsageSlow(data)
		}
	}
	if len(typ) < 2 || typ[0] != '"' || !isTerminalResponses(string(typ[1:len(typ)-1])) || usage == nil {
		return openAIUsage{}, false
	}
	if u, ok := fastOpenAIUsage(usage); ok {
		return u, true
	}
	var u *openAIUsage
	if json.Unmarshal(usage, &u) != nil || u == nil {
		return openAIUsage{}, false
	}
	return *u, true
}

// fastOpenAIUsage reads a Responses usage object as json.Unmarshal reads
// it into a *openAIUsage, in one allocation and without reflection
// (countsObject; input_tokens_details an object of its own, or null).
// What it does not take is left to encoding/json (ok false);
// FuzzResponsesEventUsage holds the two to the same reading.
func fastOpenAIUsage(raw []byte) (openAIUsage, bool) {
	const detailsKey = "input_tokens_details"
	v := new(struct {
		details struct {
			CachedTokens *int64 `json:"cached_tokens"`
		}
		counts [3]int64
	})
	var u openAIUsage
	details := false
	l := lite{b: raw}
	ok := l.countsObject([]string{"input_tokens", "output_tokens"}, []**int64{&u.InputTokens, &u.OutputTokens}, v.counts[:2], func(key []byte) (mine, ok bool) {
		if string(key) != detailsKey {
			return strings.EqualFold(string(key), detailsKey), false // folded: left to encoding/json
		}
		if details {
			return true, false // twice: left to encoding/json
		}
		details = true
		if l.null() {
			return true, true
		}
		if !l.countsObject([]string{"cached_tokens"}, []**int64{&v.details.CachedTokens}, v.counts[2:], nil) {
			return true, false
		}
		u.InputTokensDetails = &v.details
		return true, true
	})
	return u, ok && l.atEnd()
}

// responsesEventUsageSlow is responsesEventUsage by encoding/json.
func responsesEventUsageSlow(data []byte) (openAIUsage, bool) {
	var e struct {
		Type     string `json:"type"`
		Response *struct {
			Usage *openAIUsage `json:"usage"`
		} `json:"response"`
	}
	if json.Unmarshal(data, &e) != nil || e.Response == nil || e.Response.Usage == nil || !isTerminalResponses(e.Type) {
		return openAIUsage{}, false
	}
	return *e.Response.Usage, true
}

// jsonFields hands each key (unquoted) and raw value of the JSON object b
// to visit; false when b is not an object it can walk, or a key is written
// with escapes or matches one of names in another case (what encoding/json
// would match too).
func jsonFields(b []byte, visit func(key, value []byte) bool, names ...string) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	for i++; ; {
		i = skipSpace(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case '}':
			return true
		case ',':
			i++
			continue
		case '"':
		default:
			return false
		}
		end, ok := skipValue(b, i)
		if !ok || end-i < 2 {
			return false
		}
		key := b[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			return false
		}
		for _, n := range names {
			if string(key) != n && strings.EqualFold(string(key), n) {
				return false
			}
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		vend, ok := skipValue(b, i)
		if !ok || vend <= i {
			return false
		}
		if !visit(key, b[i:vend]) {
			return true
		}
		i = vend
	}
}
