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

	"lazy/review"
)

// Post/Redirect/Get: every form POST of the pages answers 303 to a GET page,
// so a reload never sends the form again. What the POST has to say — a
// notice, a refused accept with its remedy, the text the reviewer typed —
// travels as a flash: kept here, in memory, under a random id that the
// redirect's address carries (?flash=<id>), bound to the session that made
// it. A flash shows only to the session that posted the form: an id in a
// link from anyone else (another browser, another page that learnt it from
// a shared screen or history) shows nothing, so no one can put words in the
// page's banner or in the reviewer's forms. The text is rendered by
// html/template like any other data.
//
// A form handler ends with one call:
//
//	return h.seeOther(c, "/review/"+id, Flash{Notice: "Synced."})
//
// and, on a refusal a person can act on (any 4xx), keeps what was typed:
//
//	return h.refused(c, "/review/"+ref, err, Flash{Notice: "Not unblocked: " + err.Error(), Fields: typed(c, "feedback")})
//
// The GET handler reads it back with h.flash(c).

// Flash is what a form POST leaves for the page it redirects to.
type Flash struct {
	// Notice is the banner's sentence; Alert marks it a refusal (role=alert)
	Notice string
	Alert  bool
	// Refusal is a refused accept with its remedy (the review page's panel)
	Refusal *review.Refusal
	// Fields are form values to put back, by field name ("reason",
	// "feedback", "body", "head", ...): what the reviewer typed is never lost
	Fields map[string]string
}

// Field is one kept form value ("" when none).
func (f Flash) Field(name string) string { return f.Fields[name] }

const (
	flashTTL = 15 * time.Minute // long enough to read, reload and copy
	// bounds on memory whatever posts (a form is up to 1 MiB): the oldest
	// flashes go first
	flashMax      = 1024
	flashMaxBytes = 32 << 20
)

type flashEntry struct {
	owner string // the session that posted: its cookie nonce, or "bearer"
	at    time.Time
	size  int
	f     Flash
}

// size is about what f holds in memory.
func (f Flash) size() int {
	n := len(f.Notice) + 64
	if f.Refusal != nil {
		n += len(f.Refusal.Message) + 256
		if r := f.Refusal.Remedy; r != nil {
			n += len(r.Next) + len(r.Command)
			for _, s := range r.Files {
				n += len(s)
			}
			for _, s := range r.Commits {
				n += len(s)
			}
		}
	}
	for k, v := range f.Fields {
		n += len(k) + len(v)
	}
	return n
}

// flashes is the server side of the carrier: short-lived, in memory (a
// daemon restart loses them: the page then shows as it is, without notice).
type flashes struct {
	mu    sync.Mutex
	m     map[string]flashEntry
	order []string // ids, oldest first
	bytes int      // the sizes of the flashes in m
}

func (s *flashes) put(owner string, f Flash, now time.Time) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]flashEntry{}
	}
	size := f.size()
	for len(s.order) > 0 {
		old := s.order[0]
		e, ok := s.m[old]
		if ok && now.Sub(e.at) < flashTTL && len(s.m) < flashMax && s.bytes+size <= flashMaxBytes {
			break
		}
		delete(s.m, old)
		s.bytes -= e.size
		s.order = s.order[1:]
	}
	s.m[id] = flashEntry{owner: owner, at: now, size: size, f: f}
	s.bytes += size
	s.order = append(s.order, id)
	return id
}

// get is the flash id names when owner posted it and it is fresh. It can be
// read again (a reload shows the same notice and keeps the same text) until
// it expires.
func (s *flashes) get(owner, id string, now time.Time) (Flash, bool) {
	if owner == "" || id == "" {
		return Flash{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[id]
	if !ok || e.owner != owner || now.Sub(e.at) >= flashTTL {
		return Flash{}, false
	}
	return e.f, true
}

// owner is who a flash of this request belongs to ("" when not logged in).
func owner(c echo.Context) string {
	s, ok := c.Get(sessionKey).(session)
	switch {
	case !ok:
		return ""
	case s.bearer:
		return "bearer"
	}
	return "session:" + s.nonce
}

// seeOther ends a form POST: 303 to target (a path, with a query or a
// #fragment if it likes) carrying f when it has anything to say.
func (h *handler) seeOther(c echo.Context, target string, f Flash) error {
	if f.Notice != "" || f.Refusal != nil || len(f.Fields) > 0 {
		if o := owner(c); o != "" {
			id := h.flashes.put(o, f, time.Now())
			path, frag, _ := strings.Cut(target, "#")
			sep := "?"
			if strings.Contains(path, "?") {
				sep = "&"
			}
			target = path + sep + "flash=" + id
			if frag != "" {
				target += "#" + frag
			}
		}
	}
	return c.Redirect(http.StatusSeeOther, target)
}

// refused ends a form POST that the daemon refused: a refusal a person can
// act on (a 4xx, or a rule of review) goes back to target as an alert with
// what they typed; a 404 (no such task: no page to go back to) or a 5xx (the
// daemon failed) goes to the error handler, which answers a browser with a
// page that shows the typed text back. f.Notice defaults to
// the error's own sentence.
func (h *handler) refused(c echo.Context, target string, err error, f Flash) error {
	var rule *review.RuleError
	if code := Status(err); !errors.As(err, &rule) && (code >= 500 || code == http.StatusNotFound) {
		return err // no page to go back to, or the daemon failed
	}
	if f.Notice == "" {
		f.Notice = err.Error()
		if rule != nil {
			f.Notice = rule.Reason
		}
	}
	f.Alert = true
	return h.seeOther(c, target, f)
}

// flash is the request's flash when its own session left it.
func (h *handler) flash(c echo.Context) Flash {
	f, _ := h.flashes.get(owner(c), c.QueryParam("flash"), time.Now())
	return f
}

// typed collects the named form fields that are not empty.
func typed(c echo.Context, names ...string) map[string]string {
	m := map[string]string{}
	for _, n := range names {
		if v := c.FormValue(n); v != "" {
			m[n] = v
		}
	}
	return m
}

// reviewPath is the review page of a task ref.
func reviewPath(ref string) string { return "/review/" + url.PathEscape(ref) }
