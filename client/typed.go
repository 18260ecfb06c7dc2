package client

import (
	"context"
	"encoding/json"
	"fmt"

	"lazy/api"
)

// Caller is one RPC call (Client and Conn both are).
type Caller interface {
	Call(ctx context.Context, cmd string, args, out any) error
	StreamOpened(ctx context.Context, cmd string, args any, opened func(), fn func([]byte) error) error
}

// Do runs one typed command of package api: the arguments and the reply
// are the command's own types, so a caller cannot send or read the wrong
// shape.
func Do[A, R any](ctx context.Context, c Caller, cmd api.Cmd[A, R], a A) (R, error) {
	var out R
	err := c.Call(ctx, cmd.Name, a, &out)
	return out, err
}

// Watch runs a typed event stream, calling fn with each event until ctx
// ends, the stream ends or fn fails. opened (when non-nil) is called once
// the daemon has accepted the stream: every event published from then on
// reaches fn.
func Watch[A, E any](ctx context.Context, c Caller, cmd api.Stream[A, E], a A, opened func(), fn func(E) error) error {
	return c.StreamOpened(ctx, cmd.Name, a, opened, func(b []byte) error {
		var e E
		if err := json.Unmarshal(b, &e); err != nil {
			return fmt.Errorf("%s: bad event from the daemon: %w", cmd.Name, err)
		}
		return fn(e)
	})
}
