package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"lazy/gitx"
)

// TurnRequest is one turn for one task.
type TurnRequest struct {
	TaskID, Ref, Role string
	Worktree          string
	Branch            string // the task's branch, from the daemon's record
	Session           string // "" for the first turn
	Ask               bool   // a read-only ask turn
	Prompt            string
	// RenderPrompt, when set, makes the prompt at the last moment: once a
	// slot is free and just before the agent starts (an unblock's queued
	// comments are decided then).
	RenderPrompt func(ctx context.Context) (string, error)
	Number       int
	OnStart      func(pid int)
}

// FinalPrompt is the prompt the agent gets: rendered now when the request
// renders at launch, else as given. A launcher calls it once, at the last
// moment before the agent starts.
func (r TurnRequest) FinalPrompt(ctx context.Context) (string, error) {
	if r.RenderPrompt == nil {
		return r.Prompt, nil
	}
	return r.RenderPrompt(ctx)
}

// Launcher turns a TurnRequest into a Spec and runs it: the driver's argv, the
// runner, the per-task home, the placeholder env.
type Launcher struct {
	Driver      Driver
	Runner      Runner
	Command     []string // executable and fixed leading args
	BaseURL     string   // the proxy URL agents call
	DaemonEnv   []string
	AgentsDir   string   // per-task homes live at AgentsDir/<ref>/home
	GitDir      string   // the project's common git dir; set: sandboxes get the task's repository (gitx.ForSandbox)
	Hide        []string // directories hidden in a sandbox (lazy home, state dir)
	HideFile    []string // files hidden in a sandbox (credential files)
	ProxyPort   int      // the port of BaseURL, where the forwarder listens inside
	Self        string   // the lazy binary (the forwarder inside a sandbox)
	Share       []string // sandbox.read_only: shown read-only in every sandbox
	Limits      Limits   // each sandbox's limits
	ExtraEnv    []string // sandbox.env: NAME=value for every agent
	TurnTimeout time.Duration
	AskTimeout  time.Duration
	// Placeholders returns env var → placeholder for the task's role.
	Placeholders func(ctx context.Context, taskID, ref, role string) (map[string]string, error)
	// Sockets opens the task's own proxy socket for a sandboxed turn and
	// returns its host path (bound into the sandbox) and the release the
	// turn calls when it ends. nil: no socket (the agent calls BaseURL).
	Sockets func(taskID, ref string) (path string, release func(), err error)
	// Slots bounds the agents running at once (nil: no bound). Make it with
	// NewSlots.
	Slots chan struct{}
}

// NewSlots makes the semaphore of at most n concurrent agents.
func NewSlots(n int) chan struct{} { return make(chan struct{}, n) }

// HomeFor is the per-task HOME of ref.
func (l *Launcher) HomeFor(ref string) string { return filepath.Join(l.AgentsDir, ref, "home") }

// RunTurn runs one turn and parses its result.
func (l *Launcher) RunTurn(ctx context.Context, req TurnRequest) (Result, Outcome, error) {
	ph, err := l.Placeholders(ctx, req.TaskID, req.Ref, req.Role)
	if err != nil {
		return Result{}, Outcome{}, fmt.Errorf("%w: mint placeholders: %v", ErrUnavailable, err)
	}
	home := l.HomeFor(req.Ref)
	args := l.Driver.WorkArgv(req.Session)
	timeout := l.TurnTimeout
	if req.Ask {
		args = l.Driver.AskArgv(req.Session)
		timeout = l.AskTimeout
	}
	spec := Spec{
		Name: fmt.Sprintf("%s-%d", req.Ref, req.Number), Command: l.Command, Args: args,
		Dir: req.Worktree, Home: home, Env: append(Env(l.DaemonEnv, home, l.BaseURL, ph), l.ExtraEnv...),
		Ask: req.Ask, Share: l.Share, Limits: l.Limits,
		Timeout: timeout, Hide: l.Hide, HideFile: l.HideFile, OnStart: req.OnStart,
		ProxyPort: l.ProxyPort, Self: l.Self,
	}
	if Sandboxed(l.Runner) && l.ProxyPort != 0 {
		spec.Env = append(spec.Env, ProxyEnv(l.ProxyPort)...)
	}
	if l.GitDir != "" && Sandboxed(l.Runner) {
		// the task's own repository: the project's objects read-only (its
		// alternates), the task repository writable in a work turn, its
		// config, hooks, info and alternates read-only
		sp, err := gitx.ForSandbox(req.Worktree, req.Ask)
		if err != nil {
			return Result{}, Outcome{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		spec.Visible, spec.Writable, spec.ReadOnly = sp.Visible, sp.Writable, sp.ReadOnly
	}
	if l.Slots != nil {
		select {
		case l.Slots <- struct{}{}:
			defer func() { <-l.Slots }()
		case <-ctx.Done():
			return Result{}, Outcome{}, fmt.Errorf("waiting for a free agent slot (agent.max_concurrent = %d): %w", cap(l.Slots), ctx.Err())
		}
	}
	prompt, err := req.FinalPrompt(ctx)
	if err != nil {
		return Result{}, Outcome{}, err
	}
	spec.Stdin = []byte(prompt)
	if l.Sockets != nil && Sandboxed(l.Runner) {
		path, release, err := l.Sockets(req.TaskID, req.Ref)
		if err != nil {
			return Result{}, Outcome{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		defer release()
		spec.ProxySocket = path
	}
	out, err := l.Runner.Run(ctx, spec)
	if err != nil {
		return Result{}, out, err
	}
	res, err := l.Driver.ParseResult(out.Stdout)
	if err != nil {
		return res, out, err
	}
	if res.IsError {
		return res, out, fmt.Errorf("the agent reported an error: %s", res.Text)
	}
	return res, out, nil
}
