// Package httpapi is the daemon's HTTP surface on echo: the dashboard pages,
// the review routes, their JSON API, the RPC the CLI and the dev web server
// use, /api/actors and /metrics. Handlers are thin: parse, one call to an
// interface declared here, render. It never touches git, locks or storage
// writes itself. Only loopback Host names are answered.
package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"lazy/api"
	"lazy/errkind"
	"lazy/review"
	"lazy/task"
	"lazy/version"
	"lazy/views"
)

// Deps are the handler's collaborators.
type Deps struct {
	// Call runs the commands the pages call: the same typed commands
	// (api.Cmd) the CLI calls, through the daemon's own table in process
	// (Commands, no JSON between) or its RPC (client.Conn, the dev server).
	// Nil: no pages but the login and the assets; every review route
	// answers 503.
	Call api.Caller
	// RawFiles serves the review's "raw file" link (nil: the route says to
	// open the daemon's own dashboard).
	RawFiles RawFiles
	Views    *views.Views
	// Storage serves the storage.<op> RPC (the remote store's server side,
	// store.Serve over the daemon's store); nil serves none.
	Storage func(ctx context.Context, op string, raw []byte) (any, error)
	Log     *slog.Logger
	Token   string // RPC bearer token; "" disables the RPC (dev server)
	// Bearer is accepted as Authorization: Bearer on every route (the auth
	// token); DashboardToken logs a browser in with ?token= (CONTRACT §10).
	// With neither, nothing but /assets/* is served.
	Bearer         string
	DashboardToken string
	Gatherer       prometheus.Gatherer
	Info           func() api.DaemonInfo
	// Commands is the RPC dispatch table (nil: no commands, as in the dev
	// server, which serves no RPC)
	Commands Commands
	// Stopping is closed when the daemon begins to stop: watch streams end
	// at once with a daemon_stopped event, so a stop never waits on them.
	Stopping <-chan struct{}
	LogPath  string
	// CSS returns the stylesheet; nil serves the embedded parts composed once.
	CSS func() ([]byte, error)
	// NoStoreCSS marks the stylesheet Cache-Control: no-store (dev server).
	NoStoreCSS bool
	// SyncWait bounds how long the sync form waits for the merge before it
	// answers "queued" (0: 20 s).
	SyncWait time.Duration
}

// StatusError lets an error choose its HTTP status.
type StatusError interface{ HTTPStatus() int }

// New builds the echo handler.
func New(d Deps) (*echo.Echo, error) {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Views == nil {
		v, err := views.New()
		if err != nil {
			return nil, err
		}
		d.Views = v
	}
	if d.CSS == nil {
		css, err := views.ComposeCSS(views.CSSFS())
		if err != nil {
			return nil, err
		}
		d.CSS = func() ([]byte, error) { return css, nil }
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	h := &handler{d: d, syncWait: d.SyncWait}
	if h.syncWait <= 0 {
		h.syncWait = 20 * time.Second
	}
	e.HTTPErrorHandler = h.errorHandler
	e.Pre(headAsGet)
	if d.Gatherer != nil {
		// every answer counted by route and status, the error handler's
		// included: what the dashboard was asked (a reload that posted a
		// form again would show here)
		reg := prometheus.NewRegistry()
		h.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lazy_http_requests_total",
			Help: "Dashboard and RPC requests since the daemon started, by method, route and status."}, []string{"method", "route", "code"})
		reg.MustRegister(h.requests)
		d.Gatherer = prometheus.Gatherers{d.Gatherer, reg}
		e.Use(h.count)
	}
	// a handler that panics answers 500 with an error id (in the log with
	// its stack) instead of taking the connection down
	e.Use(recoverPanics)
	// gzip for a client that takes it, never for a stream (compress.go)
	e.Use(compress)
	e.Use(securityHeaders, loopbackOnly, sameSite, h.authenticate)

	e.GET("/", h.tasksPage)
	e.GET("/tasks/:id", h.taskPage)
	e.GET("/api/tasks", h.apiTasks)
	e.GET("/api/actors", h.apiActors)
	if d.Gatherer != nil {
		e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(d.Gatherer, promhttp.HandlerOpts{})))
	}
	e.GET("/assets/app.css", h.css)
	e.StaticFS("/assets", views.Static())
	h.reviewRoutes(e)
	h.taskRoutes(e)
	h.dashboardRoutes(e)
	e.POST("/rpc/:cmd", h.rpc)
	return e, nil
}

type handler struct {
	d       Deps
	flashes flashes // what a form POST leaves for the page it redirects to
	// syncWait bounds how long a sync form waits for the merge before it
	// redirects with "queued"
	syncWait time.Duration
	requests *prometheus.CounterVec
}

// headAsGet answers HEAD on every GET route: the request is routed as a GET
// and net/http sends the headers alone.
func headAsGet(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Request().Method == http.MethodHead {
			c.Request().Method = http.MethodGet
		}
		return next(c)
	}
}

// loopbackOnly answers only Host names that mean this machine: a cheap guard
// against DNS rebinding on a surface with no authentication.
func loopbackOnly(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !LoopbackHost(c.Request().Host) {
			return echo.NewHTTPError(http.StatusForbidden, "this dashboard answers only loopback host names (127.0.0.1, localhost, [::1])")
		}
		return next(c)
	}
}

// LoopbackHost reports whether a Host header names the loopback interface.
func LoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		// same-origin, not no-referrer: with no-referrer a browser sends Origin:
		// null on its own form posts, which the cross-site check refuses
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		return next(c)
	}
}

// errorBody is every error answer: what went wrong and, on a refused
// accept, the remedy.
type errorBody struct {
	Error string `json:"error"`
	// Kind is the error's kind (errkind) when it is a domain error: the
	// client and the remote store read it instead of guessing from the status
	Kind   errkind.Kind `json:"kind,omitempty"`
	Remedy any          `json:"remedy,omitempty"`
}

// Status maps an error to its HTTP status: an echo error keeps its own,
// a domain error answers by its kind (errkind, the one list the cluster
// codec and the client read too), a relayed one (the dev server's RPC
// client) keeps the status it came with.
func Status(err error) int {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return he.Code
	}
	if code, ok := kindStatus[errkind.Of(err)]; ok {
		return code
	}
	var se StatusError
	if errors.As(err, &se) {
		return se.HTTPStatus()
	}
	return http.StatusInternalServerError
}

// kindStatus is the HTTP status of each domain error kind: the domain's
// packages know nothing of HTTP. Every kind of errkind.All has one (a test
// holds it).
var kindStatus = map[errkind.Kind]int{
	errkind.Wait:            http.StatusTooManyRequests, // guessing the passphrase must wait
	errkind.WrongPassphrase: http.StatusForbidden,
	errkind.Refusal:         http.StatusConflict, // refused by the task's state or a rule
	errkind.Rule:            http.StatusConflict,
	errkind.Busy:            http.StatusConflict,
	errkind.TooLarge:        http.StatusRequestEntityTooLarge,
	errkind.NotFound:        http.StatusNotFound,
	errkind.Ambiguous:       http.StatusConflict,
	errkind.Ended:           http.StatusConflict,
	errkind.Locked:          http.StatusConflict,
	errkind.Conflict:        http.StatusConflict,
	errkind.Unavailable:     http.StatusServiceUnavailable, // the store does not answer: the message says what to check
	errkind.BadCall:         http.StatusBadRequest,
	errkind.ReadOnly:        http.StatusForbidden,
}

func (h *handler) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code := Status(err)
	msg := err.Error()
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg = fmt.Sprint(he.Message)
	}
	ref := ""
	if code >= 500 {
		ref = errorID()
		h.d.Log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "error_id", ref, "err", err)
	}
	if code == http.StatusInternalServerError {
		// an unexpected failure: its text may hold internals, so the client
		// gets where to look instead (a 503 or 502 says what to do)
		msg = "internal error " + ref + ": the daemon could not complete this request; the daemon log has the details under error_id=" + ref
		if h.d.LogPath != "" {
			msg += " (" + h.d.LogPath + ")"
		}
	}
	body := errorBody{Error: msg, Kind: errkind.Of(err)}
	var rb interface{ RemedyBody() any }
	if errors.As(err, &rb) {
		body.Remedy = rb.RemedyBody()
	}
	if wantsHTML(c) {
		_ = h.errorPage(c, code, msg, "")
		return
	}
	_ = c.JSON(code, body)
}

// wantsHTML reports a browser that gets an error as a page: a page load, a
// form it posted, or a request that asks for HTML. The RPC, /api/*, a JSON
// body and a request that asks for JSON (the page's script) get JSON.
func wantsHTML(c echo.Context) bool {
	r := c.Request()
	p := r.URL.Path
	if strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/rpc/") || p == "/metrics" {
		return false
	}
	accept := r.Header.Get("Accept")
	switch {
	case strings.Contains(accept, "text/html"):
		return true
	case strings.Contains(accept, "application/json"), isJSON(c):
		return false
	case r.Method == http.MethodGet:
		return true
	}
	return isForm(r)
}

// isForm reports a request that carries an HTML form.
func isForm(r *http.Request) bool {
	ct := r.Header.Get(echo.HeaderContentType)
	return strings.HasPrefix(ct, echo.MIMEApplicationForm) || strings.HasPrefix(ct, echo.MIMEMultipartForm)
}

// errorPage answers a browser whose request failed: what went wrong, what
// to do (fix, or the message's own sentence), a link back to the page the
// form was on, and what the form carried that a person typed, so a refusal
// never loses it. The typed text is shown only for a request that passed
// the same-origin check (sameOriginKey): a page elsewhere cannot make the
// dashboard show words of its choosing.
func (h *handler) errorPage(c echo.Context, code int, msg, fix string) error {
	p := views.ErrorPage{Page: h.page(c), Status: code, Message: msg, Fix: fix}
	p.Title, p.Heading = errorHeading(code), errorHeading(code)
	p.Back, p.BackLabel = backOf(c.Request())
	p.Kept = keptOf(c)
	b, err := h.d.Views.RenderBytes("error", p)
	if err != nil {
		h.d.Log.Error("render failed", "page", "error", "err", err)
		return c.HTML(code, "<!doctype html><title>Error</title><p>"+html.EscapeString(msg)+"</p><p><a href=\"/\">Back to tasks</a></p>")
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.HTMLBlob(code, b)
}

func errorHeading(code int) string {
	switch {
	case code == http.StatusUnauthorized:
		return "Log in"
	case code == http.StatusForbidden:
		return "Refused"
	case code == http.StatusNotFound:
		return "Not found"
	case code == http.StatusConflict:
		return "Refused by the task's state"
	case code == http.StatusRequestEntityTooLarge:
		return "Too large"
	case code >= 500:
		return "The daemon could not do this"
	}
	return "This could not be done"
}

// backOf is the page a failed request goes back to: the task's review or
// task page for a form posted there, else the task list.
func backOf(r *http.Request) (string, string) {
	if !stateChanging(r.Method) {
		return "/", "Back to tasks"
	}
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(segs) >= 2 && segs[1] != "" {
		switch segs[0] {
		case "review":
			return "/review/" + url.PathEscape(segs[1]), "Back to the review page"
		case "tasks":
			return "/tasks/" + url.PathEscape(segs[1]), "Back to the task page"
		}
	}
	return "/", "Back to tasks"
}

// keptFields are the form fields a person types, with the label an error
// page shows them under. Never a passphrase, a token or a hidden id. A new
// form with free text adds its field here.
var keptFields = []struct{ name, label string }{
	{"body", "Comment"},
	{"feedback", "Message to the agent"},
	{"draft_feedback", "Message to the agent"},
	{"reason", "Why you accept"},
	{"draft_reason", "Why you accept"},
	{"message", "Message"},
	{"prompt", "Task prompt"},
}

// keptOf is what a same-origin form posted that a person typed.
func keptOf(c echo.Context) []views.KeptField {
	r := c.Request()
	if ok, _ := c.Get(sameOriginKey).(bool); !ok || !stateChanging(r.Method) || !isForm(r) {
		return nil
	}
	if readForm(c) != nil {
		return nil // too large or unreadable: nothing to show
	}
	var out []views.KeptField
	seen := map[string]bool{}
	for _, f := range keptFields {
		v := r.PostForm.Get(f.name)
		if strings.TrimSpace(v) == "" || seen[v] {
			continue
		}
		seen[v] = true
		out = append(out, views.KeptField{Label: f.label, Value: v})
	}
	return out
}

func (h *handler) page(c echo.Context) views.Page {
	p := views.Page{Version: version.Label, CSRF: h.csrfFor(c)}
	if h.d.Info != nil {
		info := h.d.Info()
		p.Warnings, p.Config = info.Warnings, info.ConfigSource
		if info.Root != "" {
			p.Project, p.Root = filepath.Base(info.Root), info.Root
		}
	}
	return p
}

// render renders the page into a buffer first: a template that fails
// answers 500 with an error id that is in the log, never a 200 with half a
// page.
func (h *handler) render(c echo.Context, code int, page string, data any) error {
	b, err := h.d.Views.RenderBytes(page, data)
	if err != nil {
		ref := errorID()
		h.d.Log.Error("render failed", "page", page, "error_id", ref, "err", err)
		msg := "internal error " + ref + ": the page could not be rendered; the daemon log has the details under error_id=" + ref
		if h.d.LogPath != "" {
			msg += " (" + h.d.LogPath + ")"
		}
		return c.HTML(http.StatusInternalServerError, "<!doctype html><title>Error</title><p>"+html.EscapeString(msg)+"</p>")
	}
	return c.HTMLBlob(code, b)
}

func taskRow(t api.TaskInfo) views.TaskRow {
	return views.TaskRow{ID: t.ID, ShortID: t.ShortID, Ref: t.Ref, Title: t.Title, Status: t.Status, Branch: t.Branch,
		Turns: t.Turns, Counts: CountsWords(t), Agent: t.Agent, LastActivity: t.LastActivity, FailReason: t.FailReason, Tripwire: t.Tripwire, ModelError: t.ModelError, Push: t.Push.Words(time.Now()), Usage: UsageWords(t)}
}

// CountsWords is a task's turn counts as the pages say them: the work
// turns, then each other count named ("3 (asks 2, setup 1)").
func CountsWords(t api.TaskInfo) string {
	s := strconv.Itoa(t.Turns)
	var more []string
	if t.Asks > 0 {
		more = append(more, fmt.Sprintf("asks %d", t.Asks))
	}
	if t.Setup > 0 {
		more = append(more, fmt.Sprintf("setup %d", t.Setup))
	}
	if len(more) > 0 {
		s += " (" + strings.Join(more, ", ") + ")"
	}
	return s
}

// turnAnchor is a turn's fragment on the task page: "turn-3" for work
// turn 3 (what "delivered with turn 3" links to), "ask-2", "setup-1".
func turnAnchor(t api.Turn) string {
	if t.Kind == task.TurnWork {
		return fmt.Sprintf("turn-%d", t.Seq)
	}
	return fmt.Sprintf("%s-%d", t.Kind, t.Seq)
}

// messageState says where a task message is.
func messageState(c api.Comment) string {
	switch {
	case c.WithdrawnAt != nil:
		return "withdrawn"
	case c.DeliveryState == string(review.Delivered):
		return fmt.Sprintf("delivered with work turn %d", c.DeliveredTurn)
	case c.DeliveryState == string(review.PendingDelivery):
		return "queued: delivered with the next work turn"
	}
	return ""
}

// UsageWords is what a task's model calls cost, as the pages and the CLI
// say it: "N calls, X in / Y out tokens; last turn ...; budget B, L left".
func UsageWords(t api.TaskInfo) string {
	u := t.Usage
	if u == nil || u.Requests == 0 && t.BudgetTokens == 0 {
		return ""
	}
	s := fmt.Sprintf("%d calls, %d in / %d out tokens", u.Requests, u.InputTokens, u.OutputTokens)
	if u.CacheReadInputTokens > 0 || u.CacheCreationInputTokens > 0 {
		s += fmt.Sprintf(" (cache %d read / %d written)", u.CacheReadInputTokens, u.CacheCreationInputTokens)
	}
	if l := t.LastTurn; l != nil {
		s += fmt.Sprintf("; turn %d: %d calls, %d in / %d out", t.LastTurnNo, l.Requests, l.InputTokens, l.OutputTokens)
	}
	if t.BudgetTokens > 0 {
		s += fmt.Sprintf("; budget %d tokens, %d left", t.BudgetTokens, max(t.BudgetTokens-u.BudgetUsed(), 0))
	}
	return s
}

func (h *handler) css(c echo.Context) error {
	b, err := h.d.CSS()
	if err != nil {
		return err
	}
	if h.d.NoStoreCSS {
		c.Response().Header().Set("Cache-Control", "no-store")
	}
	return c.Blob(http.StatusOK, "text/css; charset=utf-8", b)
}

func (h *handler) apiTasks(c echo.Context) error {
	ts, err := api.Do(c.Request().Context(), h.d.Call, api.CmdTaskList, api.None{})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ts)
}

func (h *handler) apiActors(c echo.Context) error {
	as, err := api.Do(c.Request().Context(), h.d.Call, api.CmdActors, api.None{})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, as)
}

// count counts the request once its answer is written.
func (h *handler) count(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := next(c); err != nil {
			c.Error(err)
		}
		route := c.Path()
		if route == "" {
			route = "unrouted"
		}
		h.requests.WithLabelValues(c.Request().Method, route, strconv.Itoa(c.Response().Status)).Inc()
		return nil
	}
}

// errorID names one failure in the answer and in the log line.
func errorID() string {
	var id [6]byte
	_, _ = rand.Read(id[:])
	return hex.EncodeToString(id[:])
}

// recoverPanics turns a handler's panic into an error for the error handler:
// a 500 with an error id, the panic and its stack in the log line.
func recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r) // the server's own way to drop a response
				}
				err = fmt.Errorf("panic in %s %s: %v\n%s", c.Request().Method, c.Request().URL.Path, r, debug.Stack())
			}
		}()
		return next(c)
	}
}
