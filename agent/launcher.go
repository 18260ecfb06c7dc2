package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"lazy/canary"
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
	// Setup is [setup] run: the commands RunSetup runs before a task's
	// first work turn.
	Setup []string
	// Decoys returns the task's decoy secrets (package canary), written
	// into its home before every turn over whatever is there (nil: none).
	Decoys func(taskID, ref string) []canary.File
}

// NewSlots makes the semaphore of at most n concurrent agents.
func NewSlots(n int) chan struct{} { return make(chan struct{}, n) }

// HomeFor is the per-task HOME of ref.
func (l *Launcher) HomeFor(ref string) string { return filepath.Join(l.AgentsDir, ref, "home") }

// writeDecoys puts the task's decoys into its home (never trusting the
// copy the agent had).
func (l *Launcher) writeDecoys(taskID, ref, home string) error {
	if l.Decoys == nil {
		return nil
	}
	if err := WriteDecoys(home, l.Decoys(taskID, ref)); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// SetupCommands is [setup] run as this launcher was built with.
func (l *Launcher) SetupCommands() []string { return l.Setup }

// RunSetup runs each command with `sh -c` in the task's sandbox and
// worktree, under the Spec a work turn gets (runner, home with its decoys,
// task repository, proxy socket, sandbox.env, limits, turn timeout), with
// no placeholder and no model call. It stops at the first command that
// fails; the error names it. The output is each command's, after a
// "$ command" line.
func (l *Launcher) RunSetup(ctx context.Context, req TurnRequest, commands []string) (string, error) {
	home := l.HomeFor(req.Ref)
	spec := Spec{
		Command: []string{"sh"}, Dir: req.Worktree, Home: home,
		Env:   append(Env(l.DaemonEnv, home, l.BaseURL, nil), l.ExtraEnv...),
		Share: l.Share, Limits: l.Limits, Timeout: l.TurnTimeout, Hide: l.Hide, HideFile: l.HideFile,
		ProxyPort: l.ProxyPort, Self: l.Self,
	}
	if Sandboxed(l.Runner) && l.ProxyPort != 0 {
		spec.Env = append(spec.Env, ProxyEnv(l.ProxyPort)...) // setup fetches what the project needs, through egress
	}
	release, err := l.prepare(ctx, req, &spec)
	if err != nil {
		return "", err
	}
	defer release()
	var out strings.Builder
	for i, c := range commands {
		s := spec
		s.Name, s.Args = fmt.Sprintf("%s-setup-%d", req.Ref, i+1), []string{"-c", c}
		fmt.Fprintf(&out, "$ %s\n", c)
		o, err := l.Runner.Run(ctx, s)
		out.WriteString(o.Combined())
		if err != nil {
			if o.ExitCode > 0 && ctx.Err() == nil && !errors.Is(err, ErrTimeout) {
				err = fmt.Errorf("exited with status %d: %s", o.ExitCode, lastLine(o.Stderr))
			}
			return out.String(), fmt.Errorf("setup command `%s` (%d of %d) failed: %w", c, i+1, len(commands), err)
		}
	}
	return out.String(), nil
}

// prepare readies what a sandboxed run of spec needs, in order: the
// decoys in the home, the task's repository paths (read-only in an ask),
// a free agent slot, and the task's proxy socket. release gives back the
// slot and the socket.
func (l *Launcher) prepare(ctx context.Context, req TurnRequest, spec *Spec) (release func(), err error) {
	var undo []func()
	release = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	if err := l.writeDecoys(req.TaskID, req.Ref, spec.Home); err != nil {
		return release, err
	}
	if l.GitDir != "" && Sandboxed(l.Runner) {
		// the task's own repository: the project's objects read-only (its
		// alternates), the task repository writable in a work turn, its
		// config, hooks, info and alternates read-only
		sp, err := gitx.ForSandbox(req.Worktree, spec.Ask)
		if err != nil {
			return release, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		spec.Visible, spec.Writable, spec.ReadOnly = sp.Visible, sp.Writable, sp.ReadOnly
	}
	if l.Slots != nil {
		select {
		case l.Slots <- struct{}{}:
			undo = append(undo, func() { <-l.Slots })
		case <-ctx.Done():
			return release, fmt.Errorf("waiting for a free agent slot (agent.max_concurrent = %d): %w", cap(l.Slots), ctx.Err())
		}
	}
	if l.Sockets != nil && Sandboxed(l.Runner) {
		path, free, err := l.Sockets(req.TaskID, req.Ref)
		if err != nil {
			release()
			return func() {}, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		undo = append(undo, free)
		spec.ProxySocket = path
	}
	return release, nil
}

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
	release, err := l.prepare(ctx, req, &spec)
	if err != nil {
		return Result{}, Outcome{}, err
	}
	defer release()
	prompt, err := req.FinalPrompt(ctx)
	if err != nil {
		return Result{}, Outcome{}, err
	}
	spec.Stdin = []byte(prompt)
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
