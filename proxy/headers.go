package proxy

import "net/http"

// The headers the proxy reads, strips and sets on every call, by their
// canonical names, used as map keys: http.Header's Get, Set and Del
// canonicalize a lower-case name (an allocation per call each) and check
// it byte by byte. A request's headers are always stored canonical here:
// net/http's server canonicalizes every name it reads, and a name it
// cannot canonicalize (a space, a byte outside a token) is another header.
// TestHeaderNamesCanonical holds each name to textproto's form.
const (
	hdrAPIKey         = "X-Api-Key"
	hdrAuthorization  = "Authorization"
	hdrGoogAPIKey     = "X-Goog-Api-Key"
	hdrSvcRole        = "X-Svc-Role"
	hdrSvcTaskID      = "X-Svc-Task-Id"
	hdrForwardedFor   = "X-Forwarded-For"
	hdrAcceptEncoding = "Accept-Encoding"
)

// headerValue is h.Get(name) for a canonical name.
func headerValue(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}
