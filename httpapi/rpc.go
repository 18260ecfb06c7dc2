package httpapi

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"lazy/api"
	"lazy/review"
	"lazy/store"
)

// maxRPCBody bounds an RPC request body (a storage write may carry a turn's
// captured output, up to 2 MiB, so the bound is generous).
const maxRPCBody = 64 << 20

// command is one entry of the RPC dispatch table.
type command struct {
	name string
	// review: the command needs the review actions (503 without them)
	review bool
	serve  func(h *handler, c echo.Context, raw []byte) error
}

// handle types one command's entry: its JSON arguments are decoded into A
// and fn's reply is sent as JSON.
func handle[A, R any](cmd api.Cmd[A, R], fn func(h *handler, ctx context.Context, a A) (R, error)) command {
	return command{name: cmd.Name, serve: func(h *handler, c echo.Context, raw []byte) error {
		var a A
		if err := decodeArgs(cmd.Name, raw, &a); err != nil {
			return err
		}
		res, err := fn(h, c.Request().Context(), a)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, res)
	}}
}

// reviewed marks an entry as needing the review actions.
func reviewed(c command) command {
	c.review = true
	return c
}

// stream types a server-sent-event command's entry.
func stream[A, E any](cmd api.Stream[A, E], fn func(h *handler, c echo.Context, a A) error) command {
	return command{name: cmd.Name, serve: func(h *handler, c echo.Context, raw []byte) error {
		var a A
		if err := decodeArgs(cmd.Name, raw, &a); err != nil {
			return err
		}
		return fn(h, c, a)
	}}
}

// decodeArgs reads a command's JSON object; an empty body is no arguments.
// Fields the command does not take are ignored, as before the table.
func decodeArgs(name string, raw []byte, a any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, a); err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("%s: the arguments must be a JSON object of its fields (CONTRACT §8): %v", name, err))
	}
	return nil
}

// table builds the dispatch table from its entries; a name twice is a bug.
func table(cs ...command) map[string]command {
	m := make(map[string]command, len(cs))
	for _, c := range cs {
		if _, dup := m[c.name]; dup {
			panic("RPC command " + c.name + " is in the table twice")
		}
		m[c.name] = c
	}
	return m
}

// commands is every RPC command but storage.<op>: one line each, the typed
// command of package api and the call it makes.
var commands = table(
	handle(api.CmdPing, func(*handler, context.Context, api.None) (api.OK, error) { return api.OK{OK: "pong"}, nil }),
	handle(api.CmdStatus, (*handler).status),
	handle(api.CmdStop, (*handler).stop),

	handle(api.CmdTaskNew, func(h *handler, ctx context.Context, a api.NewTaskArgs) (*api.NewTaskResult, error) {
		return h.d.Tasks.NewTask(ctx, a)
	}),
	handle(api.CmdTaskList, func(h *handler, ctx context.Context, _ api.None) ([]api.TaskInfo, error) {
		return h.d.Tasks.ListTasks(ctx)
	}),
	handle(api.CmdTaskShow, func(h *handler, ctx context.Context, a api.TaskRef) (*api.TaskDetail, error) {
		return h.d.Tasks.ShowTask(ctx, a.Task)
	}),
	handle(api.CmdTaskCancel, func(h *handler, ctx context.Context, a api.TaskRef) (*api.TaskInfo, error) {
		return h.d.Tasks.Cancel(ctx, a.Task)
	}),
	handle(api.CmdTaskBudget, func(h *handler, ctx context.Context, a api.BudgetArgs) (*api.TaskInfo, error) {
		return h.d.Tasks.SetBudget(ctx, a.Task, a.Tokens)
	}),
	handle(api.CmdTaskCommits, func(h *handler, ctx context.Context, a api.TaskRef) ([]api.CommitInfo, error) {
		return h.d.Tasks.TaskCommits(ctx, a.Task)
	}),
	handle(api.CmdCommitDiff, func(h *handler, ctx context.Context, a api.CommitRef) (*api.CommitDiff, error) {
		return h.d.Tasks.CommitDiff(ctx, a.ID)
	}),
	handle(api.CmdComment, func(h *handler, ctx context.Context, a api.CommentArgs) (*api.CommentResult, error) {
		return h.d.Tasks.Comment(ctx, a.Task, a.Body)
	}),
	handle(api.CmdUnblock, func(h *handler, ctx context.Context, a api.UnblockArgs) (*api.Turn, error) {
		return h.d.Tasks.Unblock(ctx, a.Task, a.Message)
	}),
	handle(api.CmdActors, func(h *handler, ctx context.Context, _ api.None) ([]api.ActorHealth, error) {
		return h.d.Tasks.Actors(ctx)
	}),
	handle(api.CmdInjectPanic, func(h *handler, ctx context.Context, a api.InjectPanicArgs) (api.OK, error) {
		return api.OK{OK: "sent"}, h.d.Tasks.InjectPanic(ctx, a.Target)
	}),
	stream(api.CmdWatch, (*handler).watch),

	reviewed(handle(api.CmdReviewQueue, func(h *handler, ctx context.Context, _ api.None) ([]api.QueueItem, error) {
		q, err := h.d.Review.Queue(ctx)
		if q == nil {
			q = []api.QueueItem{}
		}
		return q, err
	})),
	reviewed(handle(api.CmdReviewDiff, func(h *handler, ctx context.Context, a api.ReviewDiffArgs) (*api.DiffResult, error) {
		return h.d.Review.Diff(ctx, a.Task, a.DiffOptions)
	})),
	reviewed(handle(api.CmdReviewComments, func(h *handler, ctx context.Context, a api.TaskRef) (*review.Payload, error) {
		return h.d.Review.Comments(ctx, a.Task)
	})),
	reviewed(handle(api.CmdReviewPostComment, func(h *handler, ctx context.Context, a api.ReviewCommentArgs) (*review.ReviewComment, error) {
		return h.d.Review.PostComment(ctx, a.Task, a.PostCommentArgs)
	})),
	reviewed(handle(api.CmdReviewRetryAsk, func(h *handler, ctx context.Context, a api.CommentRef) (*api.ActionResult, error) {
		return h.d.Review.RetryAsk(ctx, a.Task, a.ID)
	})),
	reviewed(handle(api.CmdReviewWithdrawComment, func(h *handler, ctx context.Context, a api.CommentRef) (*api.ActionResult, error) {
		return h.d.Review.Withdraw(ctx, a.Task, a.ID)
	})),
	reviewed(handle(api.CmdReviewUnblock, func(h *handler, ctx context.Context, a api.ReviewUnblockArgs) (*api.Turn, error) {
		msg := a.Feedback
		if msg == "" {
			msg = a.Message
		}
		return h.d.Review.Unblock(ctx, a.Task, msg)
	})),
	reviewed(handle(api.CmdReviewAccept, func(h *handler, ctx context.Context, a api.ReviewAcceptArgs) (*api.TaskInfo, error) {
		return h.d.Review.Accept(ctx, a.Task, a.AcceptArgs)
	})),
	reviewed(handle(api.CmdReviewViolationDecision, func(h *handler, ctx context.Context, a api.ViolationArgs) (api.OK, error) {
		return api.OK{OK: "true"}, h.d.Review.ViolationDecision(ctx, a.Task, a.Decision, a.Files)
	})),
	reviewed(handle(api.CmdSync, func(h *handler, ctx context.Context, a api.SyncArgs) (*api.SyncResult, error) {
		return h.d.Review.Sync(ctx, a.Task, a.Wait)
	})),
	reviewed(handle(api.CmdApprove, func(h *handler, ctx context.Context, a api.ApproveArgs) (api.OK, error) {
		return api.OK{OK: "true"}, h.d.Review.Approve(ctx, a.Task, a.Files, a.Passphrase)
	})),
)

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
	name := c.Param("cmd")
	if op, ok := strings.CutPrefix(name, "storage."); ok {
		if h.d.Storage == nil {
			return echo.NewHTTPError(http.StatusNotFound, "this process serves no storage RPC")
		}
		res, err := store.Serve(c.Request().Context(), h.d.Storage, op, raw)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, res)
	}
	cmd, ok := commands[name]
	if !ok {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("unknown RPC command %q: the commands are %s", name, strings.Join(commandNames(), ", ")))
	}
	if cmd.review && h.d.Review == nil {
		return echo.NewHTTPError(http.StatusServiceUnavailable, "review actions are not available in this process")
	}
	return cmd.serve(h, c, raw)
}

// commandNames lists the table, sorted.
func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (h *handler) status(context.Context, api.None) (api.DaemonInfo, error) {
	if h.d.Info == nil {
		return api.DaemonInfo{}, echo.NewHTTPError(http.StatusNotFound, "no status here")
	}
	return h.d.Info(), nil
}

func (h *handler) stop(context.Context, api.None) (api.OK, error) {
	if h.d.Stop == nil {
		return api.OK{}, echo.NewHTTPError(http.StatusNotFound, "this process cannot be stopped over RPC")
	}
	go func() { time.Sleep(50 * time.Millisecond); h.d.Stop() }()
	return api.OK{OK: "stopping"}, nil
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
