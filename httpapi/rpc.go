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
)

// maxRPCBody bounds an RPC request body (a storage write may carry a turn's
// captured output, up to 2 MiB, so the bound is generous).
const maxRPCBody = 64 << 20

// Command is one entry of the RPC dispatch table: a typed command of
// package api bound to the call that serves it. Make one with Handle or
// Events, and the table with Table.
type Command struct {
	name  string
	serve func(h *handler, c echo.Context, raw []byte) error
	// call runs it in process: args is the command's A, out its *R
	call func(ctx context.Context, args, out any) error
	// open is an event stream's, in process
	open func(ctx context.Context, args any) (<-chan api.Event, func(), error)
}

// Commands is the RPC dispatch table, by wire name (CONTRACT §8).
type Commands map[string]Command

// Handle binds a command to fn: its JSON arguments are decoded into A and
// fn's reply is sent as JSON.
func Handle[A, R any](cmd api.Cmd[A, R], fn func(ctx context.Context, a A) (R, error)) Command {
	return Command{name: cmd.Name, serve: func(_ *handler, c echo.Context, raw []byte) error {
		var a A
		if err := decodeArgs(cmd.Name, raw, &a); err != nil {
			return err
		}
		res, err := fn(c.Request().Context(), a)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, res)
	}, call: func(ctx context.Context, args, out any) error {
		a, ok := args.(A)
		if !ok {
			return fmt.Errorf("%s takes %T, not %T", cmd.Name, a, args)
		}
		res, err := fn(ctx, a)
		if err != nil {
			return err
		}
		switch p := out.(type) {
		case *R:
			*p = res
		case nil:
		default:
			return fmt.Errorf("%s answers %T, not %T", cmd.Name, res, out)
		}
		return nil
	}}
}

// Events binds an event-stream command to open, whose events are sent as
// server-sent events until the client goes away or the daemon stops.
func Events[A any](cmd api.Stream[A, api.Event], open func(ctx context.Context, a A) (<-chan api.Event, func(), error)) Command {
	return Command{name: cmd.Name, serve: func(h *handler, c echo.Context, raw []byte) error {
		var a A
		if err := decodeArgs(cmd.Name, raw, &a); err != nil {
			return err
		}
		ch, cancel, err := open(c.Request().Context(), a)
		if err != nil {
			return err
		}
		defer cancel()
		return h.sendEvents(c, ch)
	}, open: func(ctx context.Context, args any) (<-chan api.Event, func(), error) {
		a, ok := args.(A)
		if !ok {
			return nil, nil, fmt.Errorf("%s takes %T, not %T", cmd.Name, a, args)
		}
		return open(ctx, a)
	}}
}

// Call runs a command of the table in process (api.Caller): the daemon's
// page handlers call the CLI's commands this way, typed, with no JSON
// between.
func (t Commands) Call(ctx context.Context, name string, args, out any) error {
	cmd, ok := t[name]
	if !ok || cmd.call == nil {
		return fmt.Errorf("%q is no command of this table: add it to the daemon's table (daemon/rpc.go)", name)
	}
	return cmd.call(ctx, args, out)
}

// Watch opens the table's watch stream in process (TaskEvents).
func (t Commands) Watch(ctx context.Context, a api.WatchArgs) (<-chan api.Event, func(), error) {
	cmd, ok := t[api.CmdWatch.Name]
	if !ok || cmd.open == nil {
		return nil, nil, echo.NewHTTPError(http.StatusNotImplemented, "this process serves no event stream")
	}
	return cmd.open(ctx, a)
}

// Table builds the dispatch table; a name twice is a bug.
func Table(cs ...Command) Commands {
	m := make(Commands, len(cs))
	for _, c := range cs {
		if _, dup := m[c.name]; dup {
			panic("RPC command " + c.name + " is in the table twice")
		}
		m[c.name] = c
	}
	return m
}

// Names lists the table's commands, sorted.
func (t Commands) Names() []string {
	names := make([]string, 0, len(t))
	for n := range t {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// decodeArgs reads a command's JSON object; an empty body is no arguments.
// Fields the command does not take are ignored.
func decodeArgs(name string, raw []byte, a any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, a); err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("%s: the arguments must be a JSON object of its fields (CONTRACT §8): %v", name, err))
	}
	return nil
}

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
		res, err := h.d.Storage(c.Request().Context(), op, raw)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, res)
	}
	cmd, ok := h.d.Commands[name]
	if !ok {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("unknown RPC command %q: the commands are %s", name, strings.Join(h.d.Commands.Names(), ", ")))
	}
	return cmd.serve(h, c, raw)
}

// sendEvents streams events as server-sent events until the client goes
// away, the channel closes or the daemon stops.
func (h *handler) sendEvents(c echo.Context, ch <-chan api.Event) error {
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
