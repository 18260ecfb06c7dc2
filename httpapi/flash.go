package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"lazy/views"
)

// Post/Redirect/Get for the dashboard's forms: a form POST, done or
// refused, answers 303 to a GET page. What that page must say (the notice,
// a refusal or not) and what the reviewer typed (the form's fields, so a
// refusal loses nothing) wait in a flash: kept in memory for flashTTL under
// a random id that the redirect carries as ?flash=, readable only by the
// session that posted it. A reload within the time shows the same notice
// and draft; an unknown, expired or foreign id shows nothing.

const (
	flashTTL = 10 * time.Minute
	maxFlash = 512 // the oldest goes first past this many
)

// flash is what a redirected form leaves for its page.
type flash struct {
	Notice  string
	Refused bool              // the form did nothing: the notice says why
	Fields  map[string]string // what the form held, by field name
	session string
	at      time.Time
}

// Field is a kept form field ("" when none).
func (f *flash) Field(name string) string {
	if f == nil {
		return ""
	}
	return f.Fields[name]
}

// flashes is the bounded in-memory flash store.
type flashes struct {
	mu    sync.Mutex
	m     map[string]*flash
	order []string
	now   func() time.Time
}

func newFlashes() *flashes { return &flashes{m: map[string]*flash{}, now: time.Now} }

func (s *flashes) put(f flash) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	f.at = now
	// expired ones and, past the bound, the oldest leave first
	for len(s.order) > 0 && (len(s.order) >= maxFlash || now.Sub(s.m[s.order[0]].at) > flashTTL) {
		delete(s.m, s.order[0])
		s.order = s.order[1:]
	}
	s.m[id] = &f
	s.order = append(s.order, id)
	return id
}

func (s *flashes) get(id, session string) *flash {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.m[id]
	if !ok || f.session != session || s.now().Sub(f.at) > flashTTL {
		return nil
	}
	return f
}

// sessionID names the request's login for its flashes.
func sessionID(c echo.Context) string {
	s, ok := c.Get(sessionKey).(session)
	switch {
	case !ok:
		return ""
	case s.bearer:
		return "bearer"
	}
	return "cookie:" + s.nonce
}

// redirectFlash answers a form POST with 303 to path, carrying f.
func (h *handler) redirectFlash(c echo.Context, path string, f flash) error {
	f.session = sessionID(c)
	id := h.flashes.put(f)
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	frag := ""
	if i := strings.IndexByte(path, '#'); i >= 0 {
		path, frag = path[:i], path[i:]
	}
	return c.Redirect(http.StatusSeeOther, path+sep+"flash="+url.QueryEscape(id)+frag)
}

// refuseForm sends a refused form back to path with why and what it held.
// An unexpected failure (a 5xx) is said as the error handler says it: its
// error id, logged with the cause, and never its internal text.
func (h *handler) refuseForm(c echo.Context, path, what string, err error, fields map[string]string) error {
	msg := err.Error()
	var he *echo.HTTPError
	if errors.As(err, &he) {
		if s, ok := he.Message.(string); ok {
			msg = s
		}
	}
	if Status(err) >= 500 {
		ref := errorID()
		h.d.Log.Error("form failed", "method", c.Request().Method, "path", c.Request().URL.Path, "error_id", ref, "err", err)
		msg = "internal error " + ref + ": the daemon could not complete this; the daemon log has the details under error_id=" + ref
		if h.d.LogPath != "" {
			msg += " (" + h.d.LogPath + ")"
		}
	}
	return h.redirectFlash(c, path, flash{Notice: what + msg, Refused: true, Fields: fields})
}

// takeFlash is the flash the request's address names, or nil.
func (h *handler) takeFlash(c echo.Context) *flash {
	id := c.QueryParam("flash")
	if id == "" {
		return nil
	}
	return h.flashes.get(id, sessionID(c))
}

// noticeFrom puts a flash's notice on a page, or else a signed ?notice=.
func (h *handler) noticeFrom(c echo.Context, p *views.Page, f *flash) {
	if f != nil {
		p.Notice, p.Refused = f.Notice, f.Refused
		return
	}
	p.Notice = h.notice(c)
}
