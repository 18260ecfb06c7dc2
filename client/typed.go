package client

import (
	"context"
	"encoding/json"
	"fmt"

	"lazy/api"
)

// Caller is one RPC call and stream (Client and Conn both are).
type Caller interface {
	api.Caller
	StreamOpened(ctx context.Context, cmd string, args any, opened func(), fn func([]byte) error) error
}

// Do is api.Do: one typed command over the RPC.
func Do[A, R any](ctx context.Context, c api.Caller, cmd api.Cmd[A, R], a A) (R, error) {
	return api.Do(ctx, c, cmd, a)
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
