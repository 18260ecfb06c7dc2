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
	// SessionDriver and SessionCommand are the agent that made Session
	// (its driver's name and command; "" : not recorded, resume as is). A
	// launcher running another agent starts a new conversation instead.
	SessionDriver, SessionCommand string
	// Driver is the task's own agent (lazy task new --driver); "": the
	// launcher's Driver and Command
	Driver string
	// Brief is the task's own prompt, quoted into the prompt of a work
	// turn that starts a new conversation mid-task.
	Brief string

	rendered string // the prompt as rendered for the first run
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
	// For is the driver and command of a task's own agent (lazy task new
	// --driver NAME) when it is not Driver (nil: every task runs Driver)
	For func(name string) (Driver, []string, error)
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
	// Client receives what a streaming agent client (Streamer) reports of
	// a turn as it runs: its tool results and the files it wrote, joined
	// to the turn's transcript (nil: they are read and dropped).
	Client func(taskID, ref string, turn int) ClientEvents
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

// Agent is what this launcher runs: its driver's name and its command.
func (l *Launcher) Agent() (driver, command string) {
	return l.Driver.Name(), strings.Join(l.Command, " ")
}

// pick is the driver and command of a turn: the launcher's, or the task's
// own driver (TurnRequest.Driver) with that driver's command (For).
func (l *Launcher) pick(req *TurnRequest) (Driver, []string, error) {
	if req.Driver == "" || req.Driver == l.Driver.Name() || l.For == nil {
		return l.Driver, l.Command, nil
	}
	d, cmd, err := l.For(req.Driver)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: the task's driver: %v", ErrUnavailable, err)
	}
	return d, cmd, nil
}

// DefaultCommand is the executable a driver runs when the config names
// none for it: the npm packages' own commands (the script driver is
// the daemon's own binary, which the daemon gives).
func DefaultCommand(driver string) string {
	switch driver {
	case "gemini":
		return "gemini"
	case "codex":
		return "codex"
	}
	return "claude"
}

// AgentName is "driver: command", as a task's agent is shown.
func AgentName(driver, command string) string {
	if command == "" {
		return driver
	}
	return driver + ": " + command
}

// ChangedNotice says that a turn starts a new conversation because the
// agent is not the one that made the task's session.
func ChangedNotice(from, to string) string {
	return fmt.Sprintf("the agent changed from %s to %s: this turn starts a new conversation", from, to)
}

// LostNotice says that a turn starts a new conversation because the client
// lost the task's session.
func LostNotice(session string) string {
	return fmt.Sprintf("the agent has no conversation with session ID %s any more: this turn starts a new conversation", session)
}

// lostSession reports a run that failed because the client has no
// conversation with the session it was told to resume (claude's "No
// conversation found with session ID: …").
func lostSession(out Outcome) bool {
	// claude's words, then gemini's (0.61: "Error resuming session: Invalid
	// session identifier ...", exit 42)
	for _, said := range []string{"no conversation found with session id", "error resuming session: invalid session identifier"} {
		if strings.Contains(strings.ToLower(string(out.Stderr)), said) || strings.Contains(strings.ToLower(string(out.Stdout)), said) {
			return true
		}
	}
	return false
}

// freshPrompt is the prompt of a turn that starts a new conversation
// mid-task: what happened, the task's own prompt quoted (never followed as
// a directive of the scripted agent), then the turn's prompt.
func freshPrompt(notice, brief, prompt string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "(lazy) %s. Your earlier turns on this task are not in it; the task's branch, checked out here, holds the work so far.\n", notice)
	if strings.TrimSpace(brief) != "" && strings.TrimSpace(brief) != strings.TrimSpace(prompt) {
		b.WriteString("\nThe task, as it was first given:\n")
		for _, l := range strings.Split(strings.TrimRight(brief, "\n"), "\n") {
			b.WriteString("> " + l + "\n")
		}
	}
	b.WriteString("\n" + prompt)
	return b.String()
}

// RunTurn runs one turn and parses its result. A session made by another
// agent is not resumed: the turn starts a new conversation and says so
// (Result.Notice, and first in its prompt); so does a resume the client
// refuses because it lost the session. Result.Driver and Command are the
// agent that ran.
func (l *Launcher) RunTurn(ctx context.Context, req TurnRequest) (Result, Outcome, error) {
	d, command, err := l.pick(&req)
	if err != nil {
		return Result{}, Outcome{}, err
	}
	drv, cmd := d.Name(), strings.Join(command, " ")
	var notice string
	if req.Session != "" && req.SessionDriver != "" && (req.SessionDriver != drv || req.SessionCommand != cmd) {
		notice = ChangedNotice(AgentName(req.SessionDriver, req.SessionCommand), AgentName(drv, cmd))
		req.Session = ""
	}
	res, out, err := l.runTurn(ctx, &req, notice)
	if err != nil && req.Session != "" && ctx.Err() == nil && lostSession(out) {
		// the prompt as rendered for the refused resume: what it carries
		// is already marked delivered with this turn
		if req.rendered != "" {
			req.Prompt, req.RenderPrompt = req.rendered, nil
		}
		notice = LostNotice(req.Session)
		req.Session = ""
		res, out, err = l.runTurn(ctx, &req, notice)
	}
	res.Driver, res.Command, res.Notice = drv, cmd, notice
	return res, out, err
}

func (l *Launcher) runTurn(ctx context.Context, req *TurnRequest, notice string) (Result, Outcome, error) {
	ph, err := l.Placeholders(ctx, req.TaskID, req.Ref, req.Role)
	if err != nil {
		return Result{}, Outcome{}, fmt.Errorf("%w: mint placeholders: %v", ErrUnavailable, err)
	}
	home := l.HomeFor(req.Ref)
	drv, command, err := l.pick(req)
	if err != nil {
		return Result{}, Outcome{}, err
	}
	var client Client
	if c, ok := drv.(Configurer); ok {
		// the client's own configuration, written over the agent's copy
		client = c.Configure(l.BaseURL, Sandboxed(l.Runner))
		if client.Driver != nil {
			drv = client.Driver
		}
		if err := WriteDecoys(home, client.Files); err != nil {
			return Result{}, Outcome{}, fmt.Errorf("%w: write the agent's configuration: %v", ErrUnavailable, err)
		}
	}
	args := drv.WorkArgv(req.Session)
	timeout := l.TurnTimeout
	if req.Ask {
		args = drv.AskArgv(req.Session)
		timeout = l.AskTimeout
	}
	spec := Spec{
		Name: fmt.Sprintf("%s-%d", req.Ref, req.Number), Command: command, Args: args,
		Dir: req.Worktree, Home: home, Env: append(Env(l.DaemonEnv, home, l.BaseURL, ph), l.ExtraEnv...),
		Ask: req.Ask, Share: l.Share, Limits: l.Limits,
		Timeout: timeout, Hide: l.Hide, HideFile: l.HideFile, OnStart: req.OnStart,
		ProxyPort: l.ProxyPort, Self: l.Self,
	}
	if Sandboxed(l.Runner) && l.ProxyPort != 0 {
		spec.Env = append(spec.Env, ProxyEnv(l.ProxyPort)...)
	}
	spec.Env = append(spec.Env, client.Env...)
	release, err := l.prepare(ctx, *req, &spec)
	if err != nil {
		return Result{}, Outcome{}, err
	}
	defer release()
	prompt, err := req.FinalPrompt(ctx)
	if err != nil {
		return Result{}, Outcome{}, err
	}
	req.rendered = prompt
	if notice != "" {
		brief := req.Brief
		if req.Ask {
			brief = "" // a question stands alone
		}
		prompt = freshPrompt(notice, brief, prompt)
	}
	spec.Stdin = []byte(prompt)
	var stream Stream
	if sd, ok := drv.(Streamer); ok {
		var ev ClientEvents
		if l.Client != nil {
			ev = l.Client(req.TaskID, req.Ref, req.Number)
		}
		if stream = sd.Stream(req.Worktree, ev); stream != nil {
			spec.Stdout = stream
		}
	}
	out, err := l.Runner.Run(ctx, spec)
	if stream != nil {
		// what a JSON output held: the notices and the result, for the
		// turn record and ParseResult (the stream itself may pass the
		// bound of the kept output, the result last)
		if o := stream.Output(); o != nil {
			out.Stdout = o
		}
	}
	if err != nil {
		return Result{}, out, err
	}
	res, err := drv.ParseResult(out.Stdout)
	if err != nil {
		return res, out, err
	}
	if res.IsError {
		return res, out, fmt.Errorf("the agent reported an error: %s", res.Text)
	}
	return res, out, nil
}

// Validate names the fields a launcher cannot run a turn without: the
// daemon checks its launcher when it builds one, not on the first turn.
func (l *Launcher) Validate() error {
	var missing []string
	for _, f := range []struct {
		name   string
		absent bool
	}{
		{"Driver", l.Driver == nil}, {"Runner", l.Runner == nil}, {"Command", len(l.Command) == 0},
		{"BaseURL", l.BaseURL == ""}, {"AgentsDir", l.AgentsDir == ""}, {"Placeholders", l.Placeholders == nil},
	} {
		if f.absent {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("agent launcher: %s missing (the daemon builds it whole before any turn)", strings.Join(missing, ", "))
	}
	return nil
}
