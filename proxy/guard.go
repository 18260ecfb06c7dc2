package proxy

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The response side: every response from an upstream is scrubbed of the real
// credentials before a byte reaches the client, whatever the upstream sent.

// secretsMaxAge bounds how stale the scrubber's copy of a credential that
// this request did not read may be (a rotated key is scanned for within it).
const secretsMaxAge = time.Second

// secrets are the real credentials: the ones this request injected, as read
// for it, and the others as read within secretsMaxAge.
func (p *Proxy) secrets(pl *plan) secretSet {
	var s secretSet
	add := func(c *Credential, f *CredentialFile) {
		if c == nil {
			if got, err := f.Recent(secretsMaxAge); err == nil {
				c = &got
			}
		}
		if c != nil && c.Value != "" {
			s = append(s, c.bytes)
		}
	}
	add(pl.cred, pl.rt.provider)
	add(pl.editorCred, pl.rt.editorKey)
	add(pl.openaiCred, pl.rt.openaiKey)
	add(pl.geminiCred, pl.rt.geminiKey)
	return s
}

// encodingError is a response encoded in a way the scrubber cannot read.
type encodingError struct{ enc string }

func (e *encodingError) Error() string {
	if strings.HasPrefix(e.enc, "101 ") {
		return "the upstream answered " + strconv.Quote(e.enc) + "; the proxy scans every response for credentials and forwards no tunnel, so it refuses this answer"
	}
	return fmt.Sprintf("the upstream answered with Content-Encoding %q although identity was asked; the proxy scans every response for credentials and reads exactly one coding (gzip or identity), so it refuses this answer", e.enc)
}

// contentCoding is the one content coding a response declares, lowercased
// ("" for none), and whether it is one: more than one Content-Encoding line,
// or a list of codings on one, is not, whatever the codings (identity then
// gzip is a gzip body a reader of the first line takes for plain).
func contentCoding(vs []string) (string, bool) {
	switch len(vs) {
	case 0:
		return "", true
	case 1:
		v := strings.ToLower(strings.TrimSpace(vs[0]))
		return v, !strings.Contains(v, ",")
	}
	return strings.Join(vs, ", "), false
}

// modifyResponse scrubs headers, decodes gzip (which the scrubber cannot
// read) and wraps the body in the scrubber.
func (p *Proxy) modifyResponse(resp *http.Response) error {
	pl := resp.Request.Context().Value(planKey{}).(*plan)
	pl.stopWatchdog() // the body is sent: stop the watchdog
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// the reverse proxy would make the call a raw tunnel, past the
		// scrubber; no route here ever switches protocols
		return &encodingError{enc: "101 Switching Protocols to " + resp.Header.Get("Upgrade")}
	}
	if pl.grant != nil && !pl.editor {
		// a task's model call: read what it cost as the reply passes (over
		// the decoded, scrubbed reply; masking never touches a usage object)
		defer func() {
			// the OpenAI and Gemini readers hand their decoded events to
			// the call's transcript, if one is asked for (transcript_events.go)
			if pl.openai { // OpenAI Responses: its events, parsed (openai.go)
				resp.Body = newResponsesUsage(resp.Body, resp.Header.Get("Content-Type"), &pl.usage, &pl.usageSeen, &pl.usageDone, p.transcriptEvents(resp, pl))
				return
			} else if pl.gemini { // Gemini: its SSE or JSON, parsed (gemini.go)
				resp.Body = newGeminiUsage(resp.Body, pl, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"), p.transcriptEvents(resp, pl))
				return
			}
			pl.usageScan.reset(resp.Body, &pl.usage, &pl.usageSeen, &pl.usageDone)
			resp.Body = &pl.usageScan
			p.transcriptBody(resp, pl) // over the scrubbed reply, its usage read
		}()
	}
	secrets := p.secrets(pl)
	if len(secrets) == 0 {
		return nil
	}
	hit := func() { p.trip(pl, TripRealCredential) }
	if secrets.maskHeader(resp.Header) {
		hit()
	}
	enc, one := contentCoding(resp.Header.Values("Content-Encoding"))
	if !one {
		return &encodingError{enc: enc}
	}
	switch enc {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			return &encodingError{enc: enc + " (corrupt)"}
		}
		resp.Body = struct {
			io.Reader
			io.Closer
		}{zr, resp.Body}
		resp.Header.Del("Content-Encoding")
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
		resp.Uncompressed = true
	default:
		return &encodingError{enc: enc}
	}
	// the trailers known by now — the ones announced, and any the gzip
	// reader's read-ahead already met at the end of a short body: the
	// reverse proxy announces their names to the client before the body
	if secrets.maskHeader(resp.Trailer) {
		hit()
	}
	resp.Body = newScrubber(resp.Body, secrets, resp, hit)
	return nil
}

// grantIndex finds grants by the random part of their placeholder, so a
// placeholder is recognised wherever it sits in a header, query or body.
type grantIndex struct {
	snap   *Grants
	byRand map[string]*Grant
}

const randLen = 32 // base64url of 192 bits

// markLen is how much of the random part after the marker identifies a
// placeholder: the 31 characters a Gemini key's fixed length leaves (the
// others have 32; 186 bits still never collide).
const markLen = 31

// randMark is the identifying part of placeholder k: the markLen
// characters after its first "svc-" or "svc_" marker (the random part may
// hold another).
func randMark(k string) (string, bool) {
	i := strings.Index(k, "svc")
	if i < 0 || len(k)-(i+4) < markLen || (k[i+3] != '-' && k[i+3] != '_') {
		return "", false
	}
	return k[i+4 : i+4+markLen], true
}

func (p *Proxy) grantsByRand() map[string]*Grant {
	snap := p.o.Grants.Load()
	if ix := p.index.Load(); ix != nil && ix.snap == snap {
		return ix.byRand
	}
	ix := &grantIndex{snap: snap, byRand: map[string]*Grant{}}
	if snap != nil {
		for k, g := range *snap {
			if m, ok := randMark(k); ok {
				g := g
				ix.byRand[m] = &g
			}
		}
	}
	p.index.Store(ix)
	return ix.byRand
}

// foreignToken finds a live placeholder of another task than own in s. The
// index is built only when s carries the marker.
func (p *Proxy) foreignToken(s string, own *Grant) *Grant {
	var byRand map[string]*Grant
	for off := 0; ; {
		i := strings.Index(s[off:], "svc")
		if i < 0 {
			return nil
		}
		i += off + 4 // past "svc-" or "svc_"
		off = i - 3
		if i+markLen > len(s) {
			return nil
		}
		if byRand == nil {
			byRand = p.grantsByRand()
		}
		if g, ok := byRand[s[i:i+markLen]]; ok && g.TaskID != own.TaskID {
			return g
		}
	}
}

// foreignIn looks for another task's placeholder in the request's headers and
// query: an agent presenting one is using what is not its own.
func (p *Proxy) foreignIn(r *http.Request, own *Grant) *Grant {
	if g := p.foreignToken(r.URL.RawQuery, own); g != nil {
		return g
	}
	for _, vs := range r.Header {
		for _, v := range vs {
			if g := p.foreignToken(v, own); g != nil {
				return g
			}
		}
	}
	return nil
}

// foreignInBytes is foreignIn for a body the proxy read (the editor route).
func (p *Proxy) foreignInBytes(b []byte, own *Grant) *Grant {
	if !bytes.Contains(b, []byte("svc")) {
		return nil
	}
	return p.foreignToken(string(b), own)
}
