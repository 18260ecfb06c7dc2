package httpapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"
)

// Who may drive the dashboard (CONTRACT §10). A local server answers any
// process and any web page the reviewer opens, so:
//
//   - every route but /assets/* needs a login: the session cookie that opening
//     the page with ?token=<dashboard token> sets (HttpOnly, SameSite=Strict),
//     as Jupyter does for a local server, or Authorization: Bearer <auth
//     token> (the CLI, the dev server, tests);
//   - a state-changing request that a browser marks as coming from another
//     site (Sec-Fetch-Site) or another origin (Origin) is refused before any
//     handler, whatever it carries;
//   - a form posted with the session cookie also carries the session's form
//     token (defence in depth).

// session is how a request was let in.
type session struct {
	bearer bool   // Authorization: Bearer <auth token>
	nonce  string // the cookie session's nonce ("" for bearer)
}

const sessionKey = "lazy.session"

// sameOriginKey marks a state-changing request that passed the same-origin
// check: only its form's text may be shown back on an error page.
const sameOriginKey = "lazy.sameorigin"

// cookieName is per port: cookies are scoped by host, not port, and two
// daemons (or a daemon and its dev server) on 127.0.0.1 must not overwrite
// each other's.
func cookieName(r *http.Request) string {
	_, port, err := net.SplitHostPort(r.Host)
	if err != nil || port == "" {
		port = "80"
	}
	return "lazy_session_" + port
}

func (h *handler) mac(parts ...string) string {
	m := hmac.New(sha256.New, []byte(h.d.DashboardToken))
	m.Write([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(m.Sum(nil))
}

// newSessionCookie is nonce.HMAC(token, nonce): checkable without state, so
// a session survives a daemon restart and ends when the token changes.
func (h *handler) newSessionCookie() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	nonce := hex.EncodeToString(b[:])
	return nonce + "." + h.mac("session", nonce)
}

func (h *handler) cookieOK(v string) bool {
	_, ok := h.validCookie(v)
	return ok
}

func (h *handler) validCookie(v string) (string, bool) {
	nonce, sig, ok := strings.Cut(v, ".")
	if !ok || len(nonce) != 32 || h.d.DashboardToken == "" {
		return "", false
	}
	return nonce, hmac.Equal([]byte(sig), []byte(h.mac("session", nonce)))
}

// FormToken is the session's token that its forms carry.
func (h *handler) formToken(nonce string) string { return h.mac("form", nonce)[:40] }

// csrfFor is the form token of the request's session ("" for bearer).
func (h *handler) csrfFor(c echo.Context) string {
	if s, ok := c.Get(sessionKey).(session); ok && s.nonce != "" {
		return h.formToken(s.nonce)
	}
	return ""
}

func (h *handler) bearerOK(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && h.d.Bearer != "" && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(h.d.Bearer)) == 1
}

func stateChanging(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

// sameSite refuses a state-changing request a browser sent from elsewhere.
func sameSite(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if !stateChanging(r.Method) {
			return next(c)
		}
		switch r.Header.Get("Sec-Fetch-Site") {
		case "cross-site", "same-site":
			return echo.NewHTTPError(http.StatusForbidden, "refused: this request came from another site (Sec-Fetch-Site); the dashboard accepts changes only from its own pages")
		}
		if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
			return echo.NewHTTPError(http.StatusForbidden, "refused: this request came from another origin ("+o+"); the dashboard accepts changes only from its own pages")
		}
		c.Set(sameOriginKey, true)
		return next(c)
	}
}

// maxFormBody bounds a review POST body.
const maxFormBody = 1 << 20

// errTooLarge is a body over a stated limit.
func errTooLarge(limit int) error {
	return echo.NewHTTPError(http.StatusRequestEntityTooLarge, fmt.Sprintf("too large (limit %d bytes): shorten it; nothing was saved", limit))
}

// authenticate lets in the bearer, the session cookie, or a ?token= login
// (which sets the cookie and drops the token from the address); anything else
// gets 401 and a page that names `lazy open`.
func (h *handler) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		p := r.URL.Path
		if strings.HasPrefix(p, "/assets/") || strings.HasPrefix(p, "/rpc/") {
			return next(c) // assets are public; the RPC checks its bearer itself
		}
		if h.bearerOK(r) {
			c.Set(sessionKey, session{bearer: true})
			return next(c)
		}
		if tok := r.URL.Query().Get("token"); tok != "" && !stateChanging(r.Method) {
			if h.d.DashboardToken == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(h.d.DashboardToken)) != 1 {
				return h.unauthorized(c, "that token is not this dashboard's (it changes when the state dir is reset)")
			}
			// a browser that is logged in already keeps its session: a new
			// one would make the form token of every page open in its
			// other tabs stale (opening the `lazy open` address again
			// broke their next submit)
			if ck, err := r.Cookie(cookieName(r)); err != nil || !h.cookieOK(ck.Value) {
				http.SetCookie(c.Response(), &http.Cookie{Name: cookieName(r), Value: h.newSessionCookie(), Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			}
			q := r.URL.Query()
			q.Del("token")
			u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
			return c.Redirect(http.StatusSeeOther, u.String())
		}
		if ck, err := r.Cookie(cookieName(r)); err == nil {
			if nonce, ok := h.validCookie(ck.Value); ok {
				c.Set(sessionKey, session{nonce: nonce})
				if stateChanging(r.Method) {
					if err := h.checkFormToken(c, nonce); err != nil {
						return err
					}
				}
				return next(c)
			}
		}
		return h.unauthorized(c, "")
	}
}

// checkFormToken: a state-changing request on a cookie session carries the
// session's form token (field csrf, or header X-Lazy-CSRF from the page's
// script).
func (h *handler) checkFormToken(c echo.Context, nonce string) error {
	r := c.Request()
	got := r.Header.Get("X-Lazy-CSRF")
	if got == "" && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		if err := readForm(c); err != nil {
			return err
		}
		got = r.PostForm.Get("csrf")
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(h.formToken(nonce))) != 1 {
		return echo.NewHTTPError(http.StatusForbidden, "Not sent: this page's session token is missing or stale (this browser logged in again since the page was loaded, or the page is from an older session). Reload the page and send it again; nothing was changed.")
	}
	return nil
}

func (h *handler) unauthorized(c echo.Context, why string) error {
	msg := "This is lazy's dashboard: open it with the address `lazy open` prints (it logs this browser in)."
	if why != "" {
		msg = why + ". " + msg
	}
	if wantsHTML(c) {
		return h.errorPage(c, http.StatusUnauthorized, msg, "In the project's directory run `lazy open`, or `lazy daemon status` for the open: line, and open that address in this browser.")
	}
	return echo.NewHTTPError(http.StatusUnauthorized, msg+" Or send Authorization: Bearer <contents of the state dir's auth-token>.")
}
