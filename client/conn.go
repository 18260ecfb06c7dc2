package client

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"lazy/api"
)

// Conn is a connection to a project's daemon that heals itself: when the
// daemon is gone or was restarted (new port, new token) it reads daemon.json
// again and retries once. A call while no daemon runs fails with the fix.
type Conn struct {
	paths api.Paths
	mu    sync.Mutex
	c     *Client
}

// Dial finds the project's running daemon; no daemon is an error naming the fix.
func Dial(paths api.Paths) (*Conn, error) {
	c, _, err := Discover(paths)
	if err != nil {
		return nil, err
	}
	if err := c.WaitReady(context.Background(), 0); err != nil {
		return nil, err
	}
	return &Conn{paths: paths, c: c}, nil
}

func (k *Conn) current() *Client {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.c
}

// redial rereads daemon.json; it keeps the old client when that fails.
func (k *Conn) redial() error {
	c, _, err := Discover(k.paths)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.c = c
	k.mu.Unlock()
	return nil
}

// stale reports an error after which a fresh daemon.json may help.
func stale(err error) bool {
	var ce *Error
	return errors.Is(err, ErrNotRunning) || (errors.As(err, &ce) && ce.Status == http.StatusUnauthorized)
}

// Call runs one RPC command, redialing once when the daemon moved.
func (k *Conn) Call(ctx context.Context, cmd string, args, out any) error {
	err := k.current().Call(ctx, cmd, args, out)
	if err == nil || !stale(err) {
		return err
	}
	if rerr := k.redial(); rerr != nil {
		return rerr
	}
	return k.current().Call(ctx, cmd, args, out)
}

// StreamOpened runs a streaming RPC command, redialing once when the
// daemon moved.
func (k *Conn) StreamOpened(ctx context.Context, cmd string, args any, opened func(), fn func([]byte) error) error {
	err := k.current().StreamOpened(ctx, cmd, args, opened, fn)
	if err == nil || !stale(err) {
		return err
	}
	if rerr := k.redial(); rerr != nil {
		return rerr
	}
	return k.current().StreamOpened(ctx, cmd, args, opened, fn)
}

// HTTPStatus makes "no daemon" a 503 when a handler relays it.
func (e *NotRunningError) HTTPStatus() int { return http.StatusServiceUnavailable }
