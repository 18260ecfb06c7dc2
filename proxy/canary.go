package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	"lazy/canary"
)

// Canaries: every sandbox home holds decoy secrets (package canary). A
// decoy's distinctive part in anything a request carries out — its target,
// a header, its body as it streams — is refused before it leaves: the
// request line and headers are scanned before any upstream is chosen, and
// the body passes canary.Set.Reader, which fails the read before a byte of
// a decoy is handed on. Its first MiB is read (and so scanned) before the
// upstream request opens (readAhead): a model call's body is refused before
// the upstream hears of it; a longer body is cut before the decoy and the
// upstream never gets a whole request. The
// task whose socket (or grant) sent it trips the wire `canary`; a request
// of no task trips it on the task whose decoy it carried.
//
// Plain-HTTP egress streams use the same three calls: CanaryInHead on the
// request, CanaryBody on what flows out, TripCanary on a hit. A CONNECT
// tunnel is opaque (TLS): what travels inside it is not scanned.

// TripCanary is the tripwire of a decoy in an outbound request.
const TripCanary = "canary"

// canaryText is the refusal's message.
const canaryText = "lazy proxy: this request carries a decoy secret planted in the sandbox's home (a canary: an SSH key, cloud credentials, .netrc or a GitHub token that open nothing); nothing was sent, and the task's grant is revoked"

// errCanary is the transport's error for a body that carried a decoy.
var errCanary = &refusal{cause: CauseTripwire, msg: canaryText[len("lazy proxy: "):]}

// canaries is the decoys the proxy looks for now (never nil).
func (p *Proxy) canaries() *canary.Set {
	if p.o.Canaries == nil {
		return canary.Empty
	}
	if s := p.o.Canaries(); s != nil {
		return s
	}
	return canary.Empty
}

// CanaryInHead reports a decoy in what a request carries before its body:
// its target (path and query, as sent) and every header name and value.
func (p *Proxy) CanaryInHead(r *http.Request) (canary.Owner, bool) {
	set := p.canaries()
	if set.Len() == 0 {
		return canary.Owner{}, false
	}
	if o, ok := set.FindString(r.URL.EscapedPath()); ok {
		return o, true
	}
	if o, ok := set.FindString(r.URL.RawQuery); ok {
		return o, true
	}
	if o, ok := set.FindString(r.RequestURI); ok {
		return o, true
	}
	for k, vs := range r.Header {
		if o, ok := set.FindString(k); ok {
			return o, true
		}
		for _, v := range vs {
			if o, ok := set.FindString(v); ok {
				return o, true
			}
		}
	}
	return canary.Owner{}, false
}

// CanaryBody wraps a body going out: a read that would hand on a decoy
// fails (an error for which IsCanary holds) and onHit is told the decoy's
// owner, once, from the reading goroutine. A body is returned as is while
// no sandbox has decoys.
func (p *Proxy) CanaryBody(body io.ReadCloser, onHit func(canary.Owner)) io.ReadCloser {
	if body == nil || body == http.NoBody {
		return body
	}
	return p.canaries().ReadCloser(body, onHit)
}

// IsCanary reports an error of a CanaryBody read (or of a transport that
// read one).
func IsCanary(err error) bool { return errors.Is(err, canary.ErrFound) || errors.Is(err, errCanary) }

// TripCanary trips the wire on the task that sent a decoy (taskID, ref:
// the socket's or grant's task; empty: the decoy's owner): its
// placeholders are refused from now on and the daemon records the trip.
func (p *Proxy) TripCanary(taskID, ref string, owner canary.Owner) {
	if taskID == "" {
		taskID, ref = owner.TaskID, owner.Ref
	}
	p.tripOn(taskID, ref, TripCanary)
}

// canaryCheck scans a planned request's head and arms its body. It
// answers the refusal itself and returns false on a hit.
func (p *Proxy) canaryCheck(w http.ResponseWriter, r *http.Request, pl *plan) bool {
	if p.canaries().Len() == 0 {
		return true
	}
	if o, ok := p.CanaryInHead(r); ok {
		p.tripCanary(pl, o)
		p.refuseStatus(w, pl, http.StatusForbidden, "permission_error", CauseTripwire, canaryText)
		return false
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = p.canaries().ReadCloser(r.Body, func(o canary.Owner) { pl.canaryHit.Store(&o) })
	}
	return true
}

// scanAhead is how much of a body the proxy reads, and so scans, before
// it opens the upstream request (net/http sends a streamed body's headers
// first): a body that ends within it is refused before the upstream hears
// of it at all. A longer body, or one that arrives when the bodies read
// ahead hold maxReplayTotal, is scanned as it streams and cut before the
// decoy (the upstream gets its headers and a body that never completes).
const scanAhead = 1 << 20

// readAhead reads the start of a single-target request's body through the
// canary reader before anything is sent upstream; false: a decoy (or a
// broken body) was answered here.
func (p *Proxy) readAhead(w http.ResponseWriter, r *http.Request, pl *plan) bool {
	if r.Body == nil || r.Body == http.NoBody || p.canaries().Len() == 0 || pl.body != nil {
		return true
	}
	size := int64(scanAhead)
	if r.ContentLength >= 0 {
		size = min(size, r.ContentLength+1) // +1: see the end
	}
	if p.replay.Add(size) > maxReplayTotal {
		p.replay.Add(-size)
		return true // stream it, scanned
	}
	pl.reserved += size
	buf := pl.hold.take(size)
	n, err := io.ReadFull(r.Body, buf)
	switch {
	case p.canaryTripped(pl):
		p.refuseStatus(w, pl, http.StatusForbidden, "permission_error", CauseTripwire, canaryText)
		return false
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		// all of it, in memory: net/http sends it with the headers in one
		// write (the server closes the request's own body)
		r.Body = io.NopCloser(bytes.NewReader(buf[:n]))
	case err != nil:
		if pl.bodyTimedOut.Load() {
			writeAPIError(w, http.StatusRequestTimeout, "invalid_request_error", fmt.Sprintf("lazy proxy: the request body did not arrive within %s", p.bodyTimeout()), CauseBodyTimeout)
			return false
		}
		writeAPIError(w, http.StatusBadRequest, "invalid_request_error", "lazy proxy: could not read the request body: "+err.Error(), "")
		return false
	default:
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(buf[:n]), r.Body), r.Body}
	}
	return true
}

// tripCanary trips the wire for a decoy owned by o on this request.
func (p *Proxy) tripCanary(pl *plan, o canary.Owner) {
	if pl.tripwire != "" {
		return
	}
	pl.tripwire = TripCanary
	id, ref := pl.tripTask()
	if id == "" {
		id, ref = o.TaskID, o.Ref
	}
	p.tripOn(id, ref, TripCanary)
}

// canaryTripped reports (and trips, once) a decoy the body's reader saw.
func (p *Proxy) canaryTripped(pl *plan) bool {
	o := pl.canaryHit.Load()
	if o == nil {
		return false
	}
	p.tripCanary(pl, *o)
	return true
}
