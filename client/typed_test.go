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

// tasks and reviews implement only what a test calls; anything else
// panics inside the handler and comes back as a 500.
type tasks struct {
	httpapi.Tasks
	show func(ref string) (*api.TaskDetail, error)
}

func (t tasks) ShowTask(_ context.Context, ref string) (*api.TaskDetail, error) { return t.show(ref) }

type reviews struct {
	httpapi.ReviewActions
	accepted *api.AcceptArgs
	feedback *string
}

func (r reviews) Accept(_ context.Context, ref string, a api.AcceptArgs) (*api.TaskInfo, error) {
	*r.accepted = a
	return &api.TaskInfo{Ref: ref, Status: "done"}, nil
}

func (r reviews) Unblock(_ context.Context, ref, feedback string) (*api.Turn, error) {
	*r.feedback = feedback
	return &api.Turn{TaskID: ref, Number: 2}, nil
}

func (r reviews) Comments(context.Context, string) (*review.Payload, error) {
	return nil, fmt.Errorf("task x: %w", store.ErrNotFound)
}

func server(t *testing.T, d httpapi.Deps) *Client {
	t.Helper()
	d.Token, d.Bearer = "rpc-token", "rpc-token"
	e, err := httpapi.New(d)
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
	c := server(t, httpapi.Deps{
		Tasks: tasks{show: func(ref string) (*api.TaskDetail, error) {
			return &api.TaskDetail{Task: api.TaskInfo{Ref: ref}, Turns: []api.Turn{{Number: 1}}}, nil
		}},
		Review: reviews{accepted: &accepted, feedback: &feedback},
	})
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
	// a method the fake lacks panics: 500 with an id, never a broken stream
	_, err = Do(ctx, c, api.CmdTaskList, api.None{})
	if !errors.As(err, &ce) || ce.Status != http.StatusInternalServerError || !strings.Contains(ce.Message, "error_id=") {
		t.Errorf("a panicking command: %v", err)
	}
	// a domain error comes back with its status and message
	if _, err := Do(ctx, c, api.CmdReviewComments, api.TaskRef{Task: "x"}); !errors.As(err, &ce) || ce.Status != http.StatusNotFound || !strings.Contains(err.Error(), "task x") {
		t.Errorf("reviewComments error: %v", err)
	}

	// without review actions, review commands are 503 and the rest served
	bare := server(t, httpapi.Deps{Tasks: tasks{show: func(ref string) (*api.TaskDetail, error) { return &api.TaskDetail{}, nil }}})
	if _, err := Do(ctx, bare, api.CmdReviewQueue, api.None{}); !errors.As(err, &ce) || ce.Status != http.StatusServiceUnavailable {
		t.Errorf("review command without review actions: %v", err)
	}
	if _, err := Do(ctx, bare, api.CmdTaskShow, api.TaskRef{Task: "a"}); err != nil {
		t.Errorf("taskShow without review actions: %v", err)
	}
}
