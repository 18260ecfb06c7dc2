package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"lazy/api"
	"lazy/httpapi"
	"lazy/review"
	"lazy/store"
)

func server(t *testing.T, cmds httpapi.Commands) *Client {
	t.Helper()
	e, err := httpapi.New(httpapi.Deps{Token: "rpc-token", Bearer: "rpc-token", Commands: cmds})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return &Client{Base: srv.URL, Token: "rpc-token", HTTP: srv.Client(), Root: t.TempDir()}
}

// TestTypedCommands: the typed client and the dispatch table meet on the
// wire names and shapes of CONTRACT §8.
func TestTypedCommands(t *testing.T) {
	var accepted api.AcceptArgs
	var feedback string
	c := server(t, httpapi.Table(
		httpapi.Handle(api.CmdPing, func(context.Context, api.None) (api.OK, error) { return api.OK{OK: "pong"}, nil }),
		httpapi.Handle(api.CmdTaskShow, func(_ context.Context, a api.TaskRef) (*api.TaskDetail, error) {
			return &api.TaskDetail{Task: api.TaskInfo{Ref: a.Task}, Turns: []api.Turn{{Number: 1}}}, nil
		}),
		httpapi.Handle(api.CmdTaskList, func(context.Context, api.None) ([]api.TaskInfo, error) { panic("a bug") }),
		httpapi.Handle(api.CmdReviewAccept, func(_ context.Context, a api.ReviewAcceptArgs) (*api.TaskInfo, error) {
			accepted = a.AcceptArgs
			return &api.TaskInfo{Ref: a.Task, Status: "done"}, nil
		}),
		httpapi.Handle(api.CmdReviewUnblock, func(_ context.Context, a api.ReviewUnblockArgs) (*api.Turn, error) {
			feedback = a.Feedback
			if feedback == "" {
				feedback = a.Message
			}
			return &api.Turn{TaskID: a.Task, Number: 2}, nil
		}),
		httpapi.Handle(api.CmdReviewComments, func(_ context.Context, a api.TaskRef) (*review.Payload, error) {
			return nil, fmt.Errorf("task %s: %w", a.Task, store.ErrNotFound)
		}),
	))
	ctx := context.Background()

	d, err := Do(ctx, c, api.CmdTaskShow, api.TaskRef{Task: "fix-login"})
	if err != nil || d.Task.Ref != "fix-login" || len(d.Turns) != 1 {
		t.Fatalf("taskShow: %+v %v", d, err)
	}
	// the accept's passphrase reaches the accept (it was once shadowed by
	// a second passphrase field of a union of every command's arguments)
	ti, err := Do(ctx, c, api.CmdReviewAccept, api.ReviewAcceptArgs{Task: "t1", AcceptArgs: api.AcceptArgs{Reason: "good", Passphrase: "pw", AllowOutOfScope: true}})
	if err != nil || ti.Ref != "t1" || accepted != (api.AcceptArgs{Reason: "good", Passphrase: "pw", AllowOutOfScope: true}) {
		t.Fatalf("reviewAccept: %+v %+v %v", ti, accepted, err)
	}
	// a raw client that says message instead of feedback is still heard
	var turn api.Turn
	if err := c.Call(ctx, "reviewUnblock", map[string]string{"task": "t1", "message": "carry on"}, &turn); err != nil || feedback != "carry on" || turn.Number != 2 {
		t.Fatalf("reviewUnblock with message: %q %+v %v", feedback, turn, err)
	}
	if _, err := Do(ctx, c, api.CmdReviewUnblock, api.ReviewUnblockArgs{Task: "t1", Feedback: "ship it"}); err != nil || feedback != "ship it" {
		t.Fatalf("reviewUnblock: %q %v", feedback, err)
	}
	// the ping the connection check makes
	if ok, err := Do(ctx, c, api.CmdPing, api.None{}); err != nil || ok.OK != "pong" {
		t.Fatalf("ping: %+v %v", ok, err)
	}

	var ce *Error
	// arguments of the wrong type: 400 naming the command
	err = c.Call(ctx, "taskShow", map[string]any{"task": 5}, nil)
	if !errors.As(err, &ce) || ce.Status != http.StatusBadRequest || !strings.Contains(ce.Message, "taskShow") {
		t.Errorf("wrong argument type: %v", err)
	}
	// an unknown command: 404 listing the ones there are
	err = c.Call(ctx, "taskShw", nil, nil)
	if !errors.As(err, &ce) || ce.Status != http.StatusNotFound || !strings.Contains(ce.Message, "taskShow") {
		t.Errorf("unknown command: %v", err)
	}
	// a panicking command: 500 with an id, never a broken connection
	_, err = Do(ctx, c, api.CmdTaskList, api.None{})
	if !errors.As(err, &ce) || ce.Status != http.StatusInternalServerError || !strings.Contains(ce.Message, "error_id=") {
		t.Errorf("a panicking command: %v", err)
	}
	// a domain error comes back with its status and message
	if _, err := Do(ctx, c, api.CmdReviewComments, api.TaskRef{Task: "x"}); !errors.As(err, &ce) || ce.Status != http.StatusNotFound || !strings.Contains(err.Error(), "task x") {
		t.Errorf("reviewComments error: %v", err)
	}

	// a command the table lacks is unknown
	if _, err := Do(ctx, c, api.CmdReviewQueue, api.None{}); !errors.As(err, &ce) || ce.Status != http.StatusNotFound {
		t.Errorf("a command not in the table: %v", err)
	}
	// a process with no table serves no command
	bare := server(t, nil)
	if _, err := Do(ctx, bare, api.CmdPing, api.None{}); !errors.As(err, &ce) || ce.Status != http.StatusNotFound {
		t.Errorf("ping with no table: %v", err)
	}
}
