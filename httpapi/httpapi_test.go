package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"lazy/actors"
	"lazy/api"
	"lazy/approval"
	"lazy/errkind"
	"lazy/review"
	"lazy/views"
)

const (
	testBearer = "test-auth-token"
	testDash   = "test-dashboard-token"
)

func TestReviewRoutesAre503WithoutActions(t *testing.T) {
	e, err := New(Deps{Bearer: testBearer, DashboardToken: testDash, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ method, path string }{
		{"GET", "/review"}, {"GET", "/review/abc"}, {"POST", "/review/abc/comment"},
		{"POST", "/review/abc/comment/x/retry"}, {"POST", "/review/abc/comment/x/withdraw"}, {"POST", "/review/abc/comment/x/apply"},
		{"POST", "/review/abc/unblock"}, {"POST", "/review/abc/accept"}, {"POST", "/review/abc/sync"},
		{"GET", "/api/review/queue"}, {"GET", "/api/review/abc/threads"},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(r.method, r.path, nil)
		req.Host = "127.0.0.1:26000"
		req.Header.Set("Authorization", "Bearer "+testBearer)
		req.Header.Set("Authorization", "Bearer "+testBearer)
		e.ServeHTTP(rec, req)
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("%s %s: got %d, want 503", r.method, r.path, rec.Code)
		}
	}
}

func TestLoopbackHostGuard(t *testing.T) {
	e, _ := New(Deps{Bearer: testBearer, DashboardToken: testDash})
	for host, want := range map[string]int{
		"127.0.0.1:26000": http.StatusServiceUnavailable, "localhost:1": http.StatusServiceUnavailable, "[::1]:8080": http.StatusServiceUnavailable,
		"evil.example": http.StatusForbidden, "10.0.0.1:26000": http.StatusForbidden, "127.0.0.1.evil.example": http.StatusForbidden,
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/review", nil)
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+testBearer)
		e.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Host %s: got %d, want %d", host, rec.Code, want)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("Host %s: no CSP header", host)
		}
	}
}

func TestRPCNeedsToken(t *testing.T) {
	ping := Handle(api.CmdPing, func(context.Context, api.None) (api.OK, error) { return api.OK{OK: "pong"}, nil })
	e, _ := New(Deps{Bearer: testBearer, DashboardToken: testDash, Token: "secret-token", Commands: Table(ping)})
	for _, auth := range []string{"", "Bearer wrong", "secret-token"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/rpc/ping", strings.NewReader("{}"))
		req.Host = "127.0.0.1:1"
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		e.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("auth %q: got %d, want 401", auth, rec.Code)
		}
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/rpc/ping", strings.NewReader("{}"))
	req.Host = "127.0.0.1:1"
	req.Header.Set("Authorization", "Bearer secret-token")
	e.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Errorf("right token: got %d", rec.Code)
	}
}

// TestRenderFailureIs500WithAnID: a page that cannot render answers 500
// (never 200 with half a page) with an error id that the log has too.
func TestRenderFailureIs500WithAnID(t *testing.T) {
	var logged strings.Builder
	v, err := views.New()
	if err != nil {
		t.Fatal(err)
	}
	h := &handler{d: Deps{Views: v, Log: slog.New(slog.NewTextHandler(&logged, nil))}}
	e := echo.New()
	rec := httptest.NewRecorder()
	c := e.NewContext(httptest.NewRequest("GET", "/", nil), rec)
	if err := h.render(c, http.StatusOK, "no-such-page", nil); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`internal error ([0-9a-f]{12})`).FindStringSubmatch(rec.Body.String())
	if rec.Code != http.StatusInternalServerError || m == nil {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if !strings.Contains(logged.String(), "error_id="+m[1]) {
		t.Fatalf("the log lacks error id %s: %s", m[1], logged.String())
	}
}

// TestPanicIs500WithAnID: a handler that panics answers 500 with an error
// id, and the log line has the id, the panic and its stack.
func TestPanicIs500WithAnID(t *testing.T) {
	var logged strings.Builder
	cmds := Table(Handle(api.CmdTaskBudget, func(context.Context, api.BudgetArgs) (*api.TaskInfo, error) { panic("a bug") }))
	e, err := New(Deps{Bearer: testBearer, Token: testBearer, DashboardToken: testDash, Commands: cmds, Log: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rec := serve(t, e, "POST", "/rpc/taskBudget", "application/json", `{"task":"x","tokens":5}`)
	m := regexp.MustCompile(`internal error ([0-9a-f]{12})`).FindStringSubmatch(rec.Body.String())
	if rec.Code != http.StatusInternalServerError || m == nil {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if !strings.Contains(logged.String(), "error_id="+m[1]) || !strings.Contains(logged.String(), "panic in POST /rpc/taskBudget") {
		t.Fatalf("the log lacks the id or the panic: %s", logged.String())
	}
	if strings.Contains(rec.Body.String(), "goroutine") {
		t.Fatal("the stack reached the client")
	}
}

// TestDomainErrorsMapToStatus: review, actors and approval know nothing of
// HTTP; their errors get their status here.
func TestDomainErrorsMapToStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{&review.Refusal{Message: "behind"}, 409},
		{&review.Refusal{Message: "wrong", Cause: approval.ErrWrong}, 403},
		{&review.Refusal{Message: "wait", Cause: &approval.WaitError{}}, 429},
		{&review.RuleError{Reason: "x"}, 409},
		{&review.TooLargeError{}, 413},
		{&actors.BusyError{What: "a turn"}, 409},
		{fmt.Errorf("wrapped: %w", &approval.WaitError{}), 429},
	} {
		if got := Status(tc.err); got != tc.want {
			t.Errorf("%T %v: %d, want %d", tc.err, tc.err, got, tc.want)
		}
	}
}

// TestEveryKindHasAStatus: a domain error kind the web has no status for
// would answer 500 with its words hidden.
func TestEveryKindHasAStatus(t *testing.T) {
	for _, k := range errkind.All {
		if _, ok := kindStatus[k]; !ok {
			t.Errorf("errkind.%s has no HTTP status in kindStatus", k)
		}
		if got := Status(errkind.New(k, "x")); got == http.StatusInternalServerError {
			t.Errorf("an error of kind %s answers 500", k)
		}
	}
}
