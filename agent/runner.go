package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"lazy/agent/forwarder"
)

// Runner starts a turn and waits for it.
type Runner interface {
	Name() string
	Run(ctx context.Context, s Spec) (Outcome, error)
}

// Runner names (config.Runner* mirror these).
const (
	RunnerAuto    = "auto"
	RunnerBwrap   = "bwrap"
	RunnerDocker  = "docker"
	RunnerProcess = "process"
)

// NewRunner returns the runner named in config. "auto" is bwrap when a
// sandbox can be made here; otherwise a runner that refuses every turn and
// names both fixes, because running an agent unsandboxed is a choice the
// user makes explicitly.
func NewRunner(name, dockerImage string) (Runner, error) {
	switch name {
	case RunnerAuto:
		if err := ProbeBwrap(""); err != nil {
			return Refuse{Why: err.Error()}, nil
		}
		return Bwrap{}, nil
	case RunnerProcess:
		return Process{}, nil
	case RunnerBwrap:
		return Bwrap{}, nil
	case RunnerDocker:
		return Docker{Image: dockerImage}, nil
	}
	return nil, fmt.Errorf("agent.runner: unknown runner %q; use auto, bwrap, docker or process", name)
}

// ProbeBwrap checks that bwrap is installed and can make a sandbox with its
// own network namespace here.
func ProbeBwrap(exe string) error {
	if exe == "" {
		exe = "bwrap"
	}
	path, err := exec.LookPath(exe)
	if err != nil {
		return fmt.Errorf("bwrap is not installed")
	}
	out, err := exec.Command(path, "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--dev", "/dev", "--proc", "/proc", "true").CombinedOutput()
	if err != nil {
		return fmt.Errorf("bwrap cannot make a sandbox here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Refuse is the "auto" runner on a machine with no usable sandbox: every
// turn fails, saying why and what to do.
type Refuse struct{ Why string }

// Name is the runner's config name.
func (Refuse) Name() string { return RunnerAuto }

// Run refuses.
func (r Refuse) Run(context.Context, Spec) (Outcome, error) {
	return Outcome{}, fmt.Errorf("%w: %s, and agent.runner = \"auto\" runs agents only inside a sandbox: install it (apt-get install bubblewrap), or set agent.runner = \"process\" to run agents unsandboxed, able to read your files", ErrUnavailable, r.Why)
}

// Sandboxed reports whether turns run by r are sandboxed.
func Sandboxed(r Runner) bool {
	switch r.(type) {
	case Bwrap, Docker:
		return true
	}
	return false
}

// Process runs the agent as a plain child process in the worktree.
type Process struct{}

// Name is the runner's config name.
func (Process) Name() string { return RunnerProcess }

// Run starts the argv with exactly s.Env.
func (Process) Run(ctx context.Context, s Spec) (Outcome, error) {
	argv := append(append([]string{}, s.Command...), s.Args...)
	return runArgv(ctx, argv, s)
}

// maxOutput caps what a turn record keeps of each stream.
const maxOutput = 1 << 20

type capped struct {
	bytes.Buffer
	dropped int
}

func (c *capped) Write(p []byte) (int, error) {
	room := maxOutput - c.Len()
	if room <= 0 {
		c.dropped += len(p)
		return len(p), nil
	}
	if len(p) > room {
		c.dropped += len(p) - room
		c.Buffer.Write(p[:room])
		return len(p), nil
	}
	return c.Buffer.Write(p)
}

func (c *capped) bytes() []byte {
	if c.dropped == 0 {
		return c.Bytes()
	}
	return append(c.Bytes(), []byte(fmt.Sprintf("\n[... %d bytes dropped]", c.dropped))...)
}

// runArgv runs argv in its own process group, killing the whole group when
// ctx ends or the timeout passes.
func runArgv(ctx context.Context, argv []string, s Spec) (Outcome, error) {
	if len(argv) == 0 {
		return Outcome{}, fmt.Errorf("%w: no agent command configured (set agent.command)", ErrUnavailable)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return Outcome{}, fmt.Errorf("%w: %s not found on PATH: install it or set agent.command", ErrUnavailable, argv[0])
	}
	if s.Home != "" {
		if err := os.MkdirAll(s.Home+"/tmp", 0o700); err != nil {
			return Outcome{}, fmt.Errorf("create agent home: %w", err)
		}
	}
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, path, argv[1:]...)
	cmd.Dir = s.Dir
	cmd.Env = s.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	var stdout, stderr capped
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Stdin = bytes.NewReader(s.Stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return Outcome{}, fmt.Errorf("%w: start %s: %v", ErrUnavailable, argv[0], err)
	}
	if s.OnStart != nil {
		s.OnStart(cmd.Process.Pid)
	}
	err = cmd.Wait()
	out := Outcome{Stdout: stdout.bytes(), Stderr: stderr.bytes(), ExitCode: cmd.ProcessState.ExitCode()}
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return out, fmt.Errorf("%w after %s: the agent was killed", ErrTimeout, s.Timeout)
		}
		return out, fmt.Errorf("turn cancelled: %w", ctx.Err())
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out, fmt.Errorf("the agent exited with status %d: %s", out.ExitCode, lastLine(out.Stderr))
		}
		return out, fmt.Errorf("run %s: %w", argv[0], err)
	}
	return out, nil
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	if s == "" {
		return "no message on stderr"
	}
	return s
}

// Bwrap runs the turn inside a bubblewrap sandbox: the whole filesystem
// read-only; the worktree, the task home and what a commit needs of the git
// dir writable; the lazy home, the state dir and the credential files hidden;
// fresh /dev, /proc and /run; its own pid, ipc, uts and network namespaces.
// The network namespace has only loopback: the forwarder (the lazy binary)
// listens there at the proxy's port and copies to the proxy's Unix socket,
// bound in. The proxy is the agent's only way out.
type Bwrap struct {
	Path string // bwrap executable; default "bwrap"
}

// Name is the runner's config name.
func (Bwrap) Name() string { return RunnerBwrap }

// Argv is the full bwrap command line for s.
func (b Bwrap) Argv(s Spec) []string {
	exe := b.Path
	if exe == "" {
		exe = "bwrap"
	}
	// /tmp is another user's and other projects' (and other daemons'
	// proxy sockets): a fresh one, with what the turn needs bound back
	argv := []string{exe, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--new-session",
		"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/run", "--tmpfs", "/tmp"}
	visible := append([]string{}, s.Visible...)
	if len(s.Command) > 0 && filepath.IsAbs(s.Command[0]) {
		visible = append(visible, s.Command[0]) // the agent's own executable
	}
	for _, v := range visible {
		argv = append(argv, "--ro-bind", v, v)
	}
	for _, h := range s.Hide {
		argv = append(argv, "--tmpfs", h)
	}
	for _, w := range append([]string{s.Home, s.Dir}, s.Writable...) {
		if w != "" {
			argv = append(argv, "--bind", w, w)
		}
	}
	for _, r := range s.ReadOnly {
		argv = append(argv, "--ro-bind", r, r)
	}
	for _, f := range s.HideFile {
		argv = append(argv, "--ro-bind", "/dev/null", f)
	}
	cmd := append(append([]string{}, s.Command...), s.Args...)
	if s.ProxySocket != "" && s.Self != "" {
		argv = append(argv, "--bind", s.ProxySocket, forwarder.Socket, "--ro-bind", s.Self, forwarder.Self)
		cmd = append([]string{forwarder.Self}, forwarder.Args(s.ProxyPort, cmd)...)
	}
	argv = append(argv, "--chdir", s.Dir, "--clearenv")
	for _, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		argv = append(argv, "--setenv", k, v)
	}
	argv = append(argv, "--")
	return append(argv, cmd...)
}

// Run runs the turn sandboxed.
func (b Bwrap) Run(ctx context.Context, s Spec) (Outcome, error) {
	if s.Home != "" {
		if err := os.MkdirAll(s.Home+"/tmp", 0o700); err != nil {
			return Outcome{}, fmt.Errorf("create agent home: %w", err)
		}
	}
	exe := b.Path
	if exe == "" {
		exe = "bwrap"
	}
	if _, err := exec.LookPath(exe); err != nil {
		return Outcome{}, fmt.Errorf("%w: bwrap not found: install Debian's bubblewrap (apt-get install bubblewrap) or set agent.runner = \"process\" (no sandbox)", ErrUnavailable)
	}
	inner := s
	inner.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	return runArgv(ctx, b.Argv(s), inner)
}

// Docker runs the turn in a container with the same shape as the bwrap
// sandbox: no network but loopback (--network none), the proxy's Unix socket
// and the lazy binary mounted for the forwarder, only the worktree, the task
// home and what a commit needs of the git dir mounted writable, nothing
// secret mounted. No engine runs on this project's build machines, so its
// argv is what the tests check.
type Docker struct {
	Image string
	Path  string // docker executable; default "docker"
}

// Name is the runner's config name.
func (Docker) Name() string { return RunnerDocker }

// Argv is the exact `docker run` command line for s.
func (d Docker) Argv(s Spec) []string {
	exe := d.Path
	if exe == "" {
		exe = "docker"
	}
	argv := []string{exe, "run", "--rm", "-i", "--init", "--network", "none", "--cap-drop", "ALL", "--security-opt", "no-new-privileges"}
	if s.Name != "" {
		argv = append(argv, "--name", "lazy-"+s.Name)
	}
	argv = append(argv, "--user", fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()))
	for _, w := range append([]string{s.Dir, s.Home}, s.Writable...) {
		if w != "" {
			argv = append(argv, "-v", w+":"+w)
		}
	}
	for _, r := range s.ReadOnly {
		argv = append(argv, "-v", r+":"+r+":ro")
	}
	cmd := append(append([]string{}, s.Command...), s.Args...)
	if s.ProxySocket != "" && s.Self != "" {
		argv = append(argv, "-v", s.ProxySocket+":"+forwarder.Socket, "-v", s.Self+":"+forwarder.Self+":ro")
		cmd = append([]string{forwarder.Self}, forwarder.Args(s.ProxyPort, cmd)...)
	}
	argv = append(argv, "-w", s.Dir)
	for _, kv := range s.Env {
		argv = append(argv, "-e", kv)
	}
	argv = append(argv, d.Image)
	return append(argv, cmd...)
}

// Run starts the container; with no engine it fails as unavailable.
func (d Docker) Run(ctx context.Context, s Spec) (Outcome, error) {
	exe := d.Path
	if exe == "" {
		exe = "docker"
	}
	if err := exec.CommandContext(ctx, exe, "info", "--format", "{{.ServerVersion}}").Run(); err != nil {
		return Outcome{}, fmt.Errorf("%w: no Docker engine answers (`docker info` failed): start one or set agent.runner = \"bwrap\"", ErrUnavailable)
	}
	inner := s
	inner.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	return runArgv(ctx, d.Argv(s), inner)
}
