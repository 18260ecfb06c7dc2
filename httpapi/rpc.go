package httpapi

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lazy/api"
	"lazy/store"
)

// rpcArgs is the union of every command's arguments; each command reads
// what it needs.
type rpcArgs struct {
	Task       string   `json:"task"`
	Message    string   `json:"message"`
	Target     string   `json:"target"`
	ID         string   `json:"id"`
	Feedback   string   `json:"feedback"`
	Decision   string   `json:"decision"`
	Files      []string `json:"files"`
	Wait       bool     `json:"wait"`
	Passphrase string   `json:"passphrase"`
	Tokens     int64    `json:"tokens"`
	api.NewTaskArgs
	api.WatchArgs
	api.PostCommentArgs
	api.AcceptArgs
	api.DiffOptions
}

// maxRPCBody bounds an RPC request body (a storage write may carry a turn's
// captured output, up to 2 MiB, so the bound is generous).
const maxRPCBody = 64 << 20

func (h *handler) rpc(c echo.Context) error {
	if h.d.Token == "" {
		return echo.NewHTTPError(http.StatusNotFound, "this process serves no RPC")
	}
	auth := c.Request().Header.Get("Authorization")
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(h.d.Token)) != 1 {
		return echo.NewHTTPError(http.StatusUnauthorized, "missing or wrong daemon auth token: send Authorization: Bearer <contents of the state dir's auth-token>")
	}
	raw, err := io.ReadAll(io.LimitReader(c.Request().Body, maxRPCBody+1))
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "read request body: "+err.Error())
	}
	if len(raw) > maxRPCBody {
		return echo.NewHTTPError(http.StatusRequestEntityTooLarge, "RPC body over 64 MiB")
	}
	if op, ok := strings.CutPrefix(c.Param("cmd"), "storage."); ok {
		if h.d.Storage == nil {
			return echo.NewHTTPError(http.StatusNotFound, "this process serves no storage RPC")
		}
		res, err := store.Serve(c.Request().Context(), h.d.Storage, op, raw)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, res)
	}
	var a rpcArgs
	if len(strings.TrimSpace(string(raw))) > 0 {
		if err := json.Unmarshal(raw, &a); err != nil {
			return echo.NewHTTPError(http.StatusBadRequest, "RPC arguments must be a JSON object: "+err.Error())
		}
	}
	ctx := c.Request().Context()
	t := h.d.Tasks
	var res any
	switch cmd := c.Param("cmd"); cmd {
	case "ping":
		res = map[string]string{"ok": "pong"}
	case "status":
		if h.d.Info == nil {
			return echo.NewHTTPError(http.StatusNotFound, "no status here")
		}
		res = h.d.Info()
	case "stop":
		if h.d.Stop == nil {
			return echo.NewHTTPError(http.StatusNotFound, "this process cannot be stopped over RPC")
		}
		go func() { time.Sleep(50 * time.Millisecond); h.d.Stop() }()
		res = map[string]string{"ok": "stopping"}
	case "taskNew":
		res, err = t.NewTask(ctx, a.NewTaskArgs)
	case "taskList":
		res, err = t.ListTasks(ctx)
	case "taskBudget":
		res, err = t.SetBudget(ctx, a.Task, a.Tokens)
	case "taskShow":
		res, err = t.ShowTask(ctx, a.Task)
	case "taskCancel":
		res, err = t.Cancel(ctx, a.Task)
	case "comment":
		res, err = t.Comment(ctx, a.Task, a.Body)
	case "reviewQueue", "reviewDiff", "reviewComments", "reviewPostComment", "reviewRetryAsk", "reviewWithdrawComment",
		"reviewUnblock", "reviewAccept", "reviewViolationDecision", "sync", "approve":
		if h.d.Review == nil {
			return echo.NewHTTPError(http.StatusServiceUnavailable, "review actions are not available in this process")
		}
		res, err = h.reviewRPC(c, cmd, &a)
	case "unblock":
		res, err = t.Unblock(ctx, a.Task, a.Message)
	case "actors":
		res, err = t.Actors(ctx)
	case "commitDiff":
		res, err = t.CommitDiff(ctx, a.ID)
	case "taskCommits":
		res, err = t.TaskCommits(ctx, a.Task)
	case "injectPanic":
		err = t.InjectPanic(ctx, a.Target)
		res = map[string]string{"ok": "sent"}
	case "watch":
		return h.watch(c, a.WatchArgs)
	default:
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("unknown RPC command %q", cmd))
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

func (h *handler) reviewRPC(c echo.Context, cmd string, a *rpcArgs) (any, error) {
	ctx, r := c.Request().Context(), h.d.Review
	ok := map[string]string{"ok": "true"}
	switch cmd {
	case "reviewQueue":
		q, err := r.Queue(ctx)
		if q == nil {
			q = []api.QueueItem{}
		}
		return q, err
	case "reviewDiff":
		return r.Diff(ctx, a.Task, a.DiffOptions)
	case "reviewComments":
		return r.Comments(ctx, a.Task)
	case "reviewPostComment":
		return r.PostComment(ctx, a.Task, a.PostCommentArgs)
	case "reviewRetryAsk":
		return r.RetryAsk(ctx, a.Task, a.ID)
	case "reviewWithdrawComment":
		return r.Withdraw(ctx, a.Task, a.ID)
	case "reviewUnblock":
		msg := a.Feedback
		if msg == "" {
			msg = a.Message
		}
		return r.Unblock(ctx, a.Task, msg)
	case "reviewAccept":
		args := a.AcceptArgs
		if args.Passphrase == "" {
			args.Passphrase = a.Passphrase
		}
		return r.Accept(ctx, a.Task, args)
	case "reviewViolationDecision":
		return ok, r.ViolationDecision(ctx, a.Task, a.Decision, a.Files)
	case "sync":
		return r.Sync(ctx, a.Task, a.Wait)
	case "approve":
		return ok, r.Approve(ctx, a.Task, a.Files, a.Passphrase)
	}
	return nil, fmt.Errorf("unknown review command %q", cmd)
}

// watch streams events as server-sent events until the client goes away.
func (h *handler) watch(c echo.Context, a api.WatchArgs) error {
	ch, cancel, err := h.d.Tasks.Watch(c.Request().Context(), a)
	if err != nil {
		return err
	}
	defer cancel()
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, ": watching\n\n")
	w.Flush()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-c.Request().Context().Done():
			return nil
		case <-h.d.Stopping:
			b, _ := json.Marshal(api.Event{Time: time.Now().UTC(), Kind: api.EventDaemonStopped})
			_, _ = fmt.Fprintf(w, "data: %s\n\n", b)
			w.Flush()
			return nil
		case <-keep.C:
			_, _ = io.WriteString(w, ": keepalive\n\n")
			w.Flush()
		case e, ok := <-ch:
			if !ok {
				return nil
			}
			b, _ := json.Marshal(e)
			if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
				return nil
			}
			w.Flush()
		}
	}
}
