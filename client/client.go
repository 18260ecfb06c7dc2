// Package client is the daemon's RPC client, used by the CLI and the dev web
// server: it finds a project's running daemon from its state dir
// (daemon.json and auth-token) and calls POST {base_url}/rpc/<command>.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"lazy/api"
	"lazy/errkind"
)

// Client calls one daemon.
type Client struct {
	Base  string
	Token string
	HTTP  *http.Client
	Root  string
}

// ErrNotRunning means no daemon answers for the project.
var ErrNotRunning = errors.New("no daemon is running for this project")

// NotRunningError names the project and the fix.
type NotRunningError struct {
	Root, Why string
}

func (e *NotRunningError) Error() string {
	return fmt.Sprintf("no daemon is running for %s (%s): start it with `lazy daemon start`", e.Root, e.Why)
}

func (e *NotRunningError) Is(t error) bool { return t == ErrNotRunning }

// ReadInfo reads daemon.json; alive reports whether its pid still runs.
func ReadInfo(paths api.Paths) (info api.DaemonInfo, alive bool, err error) {
	b, err := os.ReadFile(paths.DaemonJSON)
	if err != nil {
		return info, false, err
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return info, false, fmt.Errorf("%s is corrupt: %w", paths.DaemonJSON, err)
	}
	return info, PIDAlive(info.PID), nil
}

// PIDAlive reports whether a process with pid exists.
func PIDAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Discover finds the running daemon of the project at paths.Root.
func Discover(paths api.Paths) (*Client, api.DaemonInfo, error) {
	info, alive, err := ReadInfo(paths)
	if errors.Is(err, os.ErrNotExist) {
		return nil, info, &NotRunningError{Root: paths.Root, Why: "no daemon.json in " + paths.State}
	}
	if err != nil {
		return nil, info, err
	}
	if !alive {
		return nil, info, &NotRunningError{Root: paths.Root, Why: fmt.Sprintf("daemon.json names pid %d, which is not running", info.PID)}
	}
	tok, err := ReadToken(paths.AuthToken)
	if err != nil {
		return nil, info, err
	}
	c := &Client{Base: info.BaseURL, Token: tok, HTTP: &http.Client{Timeout: 0}, Root: paths.Root}
	return c, info, nil
}

// ReadToken reads a token file of the state dir (auth-token,
// dashboard-token).
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w (is this the user the daemon runs as? `lazy daemon status` names the state dir)", path, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s is empty: restart the daemon to make a new one", path)
	}
	return tok, nil
}

// Error is a failed RPC: the daemon's message, its status, the kind of
// domain error it was (errkind; Other when it was none) and any remedy.
type Error struct {
	Status  int
	Message string
	Kind    errkind.Kind
	Remedy  json.RawMessage
}

func (e *Error) Error() string { return e.Message }

// ErrorKind relays the kind the daemon named: the caller (the dev server's
// pages, the remote store) answers it as the daemon would.
func (e *Error) ErrorKind() errkind.Kind { return e.Kind }

// HTTPStatus keeps the daemon's status when the error is relayed.
func (e *Error) HTTPStatus() int { return e.Status }

// RemedyBody relays the remedy of a refused accept.
func (e *Error) RemedyBody() any {
	if len(e.Remedy) == 0 || string(e.Remedy) == "null" {
		return nil
	}
	return e.Remedy
}

func (c *Client) post(ctx context.Context, cmd string, args any) (*http.Response, error) {
	if args == nil {
		args = map[string]any{}
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Base+"/rpc/"+cmd, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &NotRunningError{Root: c.Root, Why: "the daemon at " + c.Base + " does not answer: " + rootCause(err)}
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var eb struct {
			Error  string          `json:"error"`
			Kind   string          `json:"kind"`
			Remedy json.RawMessage `json:"remedy"`
		}
		if json.Unmarshal(body, &eb) != nil || eb.Error == "" {
			eb.Error = fmt.Sprintf("the daemon answered %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
		return nil, &Error{Status: resp.StatusCode, Message: eb.Error, Kind: errkind.Parse(eb.Kind), Remedy: eb.Remedy}
	}
	return resp, nil
}

func rootCause(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}

// Call runs one command and decodes its result into out (when non-nil).
func (c *Client) Call(ctx context.Context, cmd string, args, out any) error {
	resp, err := c.post(ctx, cmd, args)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s reply: %w", cmd, err)
	}
	return nil
}

// StreamOpened runs a server-sent-event command, calling fn with each data
// payload until ctx ends, the stream ends, or fn fails; opened (when
// non-nil) is called once the daemon has accepted the stream.
func (c *Client) StreamOpened(ctx context.Context, cmd string, args any, opened func(), fn func([]byte) error) error {
	resp, err := c.post(ctx, cmd, args)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if opened != nil {
		opened()
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if err := fn([]byte(data)); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("event stream broke: %w", err)
	}
	return &NotRunningError{Root: c.Root, Why: "the daemon closed the event stream (it stopped?)"}
}

// WaitReady polls ping until the daemon answers or the deadline passes.
func (c *Client) WaitReady(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := Do(pctx, c, api.CmdPing, api.None{})
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
