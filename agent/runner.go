package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
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

// ProbeBwrap checks that bwrap is installed and can make the sandbox
// lazy needs here: its own user namespace (with a non-root uid and no
// further namespaces), network namespace and seccomp filter. A machine that
// refuses unprivileged user namespaces fails here, and "auto" refuses to
// launch rather than run a weaker sandbox.
func ProbeBwrap(exe string) error {
	if exe == "" {
		exe = "bwrap"
	}
	path, err := exec.LookPath(exe)
	if err != nil {
		return fmt.Errorf("bwrap is not installed (%s not found on PATH)", exe)
	}
	filter, err := seccompFile()
	if err != nil {
		return err
	}
	defer filter.Close()
	cmd := exec.Command(path, "--unshare-user", "--uid", strconv.Itoa(SandboxUID), "--gid", strconv.Itoa(SandboxGID), "--disable-userns",
		"--cap-drop", "ALL", "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--dev", "/dev", "--proc", "/proc",
		"--seccomp", strconv.Itoa(seccompFD), "true")
	cmd.ExtraFiles = []*os.File{filter}
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		fix := ""
		if strings.Contains(msg, "namespace") || strings.Contains(msg, "Operation not permitted") || strings.Contains(msg, "uid map") {
			fix = "; this kernel refuses unprivileged user namespaces: allow them (sysctl -w user.max_user_namespaces=15000; on Debian before 11 also kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap)"
		}
		return fmt.Errorf("bwrap cannot make lazy's sandbox here (%v: %s)%s", err, msg, fix)
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

// Reprobe looks again at whether r can run turns here now, for a daemon
// that keeps running while the machine changes (bubblewrap installed, user
// namespaces allowed). "auto" that refused becomes Bwrap once bwrap works;
// Bwrap is probed as it is. The error says why turns cannot run; nil: they
// can (or r needs no probe: process, docker, which check at each turn).
func Reprobe(r Runner) (Runner, error) {
	switch r := r.(type) {
	case Refuse:
		if err := ProbeBwrap(""); err != nil {
			return Refuse{Why: err.Error()}, err
		}
		return Bwrap{}, nil
	case Bwrap:
		return r, ProbeBwrap(r.Path)
	}
	return r, nil
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
func runArgv(ctx context.Context, argv []string, s Spec, extra ...*os.File) (Outcome, error) {
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
	if s.Stdout != nil {
		cmd.Stdout = io.MultiWriter(&stdout, s.Stdout)
	}
	cmd.Stdin = bytes.NewReader(s.Stdin)
	cmd.ExtraFiles = extra
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

// Bwrap runs the turn inside a bubblewrap sandbox built from an allowlist
// (sandbox.go): its own user, pid, ipc, uts, cgroup and network
// namespaces; uid SandboxUID with no capabilities, no_new_privs, no further
// user namespaces, the seccomp filter; only the system directories, the
// agent's installation, sandbox.read_only, the worktree, the task's
// repository and a private home. The network namespace has only loopback:
// the forwarder (the lazy binary) listens there at the proxy's port and
// copies to the proxy's Unix socket, bound in; it also sets the sandbox's
// rlimits before it starts the agent. The proxy is the agent's only way out.
type Bwrap struct {
	Path string // bwrap executable; default "bwrap"
}

// Name is the runner's config name.
func (Bwrap) Name() string { return RunnerBwrap }

// seccompFD is the descriptor bwrap reads the filter from (ExtraFiles[0]).
const seccompFD = 3

// Argv is the full bwrap command line for s; the filter is read from fd 3.
func (b Bwrap) Argv(s Spec) ([]string, error) {
	exe := b.Path
	if exe == "" {
		exe = "bwrap"
	}
	argv := []string{exe, "--die-with-parent", "--new-session",
		"--unshare-user", "--uid", strconv.Itoa(SandboxUID), "--gid", strconv.Itoa(SandboxGID), "--disable-userns", "--cap-drop", "ALL",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try", "--hostname", "lazy-sandbox"}
	self := ""
	if s.Self != "" && s.ProxySocket != "" {
		self = s.Self
	}
	s.Command = resolveCommand(s.Command)
	ms, err := sandboxMounts(s, self)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		argv = append(argv, m.args()...)
	}
	cmd := append(append([]string{}, s.Command...), s.Args...)
	if self != "" {
		cmd = append([]string{forwarder.Self}, forwarder.Args(s.ProxyPort, s.Limits.rlimits(), cmd)...)
	}
	argv = append(argv, "--chdir", s.Dir, "--clearenv")
	for _, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		argv = append(argv, "--setenv", k, v)
	}
	argv = append(argv, "--seccomp", strconv.Itoa(seccompFD), "--")
	return append(argv, cmd...), nil
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
	// the sandbox as a whole in a control group of its own, joined before
	// bwrap starts (see cgroup.go); its memory bound replaces the
	// per-process address-space limit, which large runtimes (V8) trip over
	var g *turnGroup
	if s.Self != "" {
		var err error
		if g, err = newTurnGroup(s.Name, s.Limits); err != nil {
			return Outcome{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		defer g.remove()
	}
	spec := s
	if g != nil {
		spec.Limits.Memory = 0
	}
	argv, err := b.Argv(spec)
	if err != nil {
		return Outcome{}, err
	}
	if g != nil {
		argv = append(append(append([]string{s.Self, "cgroup-exec"}, g.procs...), "--"), argv...)
	}
	filter, err := seccompFile()
	if err != nil {
		return Outcome{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer filter.Close()
	inner := s
	inner.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	return runArgv(ctx, argv, inner, filter)
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
	tmp := s.Limits.TmpSize
	if tmp == 0 {
		tmp = DefaultTmpSize
	}
	// the image's own root filesystem, read-only; no capabilities, no
	// privilege gain, the engine's default seccomp profile; never root
	argv := []string{exe, "run", "--rm", "-i", "--init", "--network", "none", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--read-only", "--tmpfs", fmt.Sprintf("/tmp:rw,nosuid,nodev,size=%d", tmp), "--shm-size", strconv.FormatUint(tmp, 10)}
	if s.Name != "" {
		argv = append(argv, "--name", "lazy-"+s.Name)
	}
	argv = append(argv, "--user", dockerUser())
	if s.Limits.OpenFiles > 0 {
		argv = append(argv, "--ulimit", fmt.Sprintf("nofile=%d:%d", s.Limits.OpenFiles, s.Limits.OpenFiles))
	}
	if s.Limits.Procs > 0 {
		argv = append(argv, "--pids-limit", strconv.FormatUint(s.Limits.Procs, 10))
	}
	if s.Limits.Memory > 0 {
		argv = append(argv, "--memory", strconv.FormatUint(s.Limits.Memory, 10))
	}
	for _, r := range append(append([]string{}, s.Share...), s.Visible...) {
		argv = append(argv, "-v", r+":"+r+":ro")
	}
	if s.Home != "" {
		argv = append(argv, "-v", s.Home+":"+s.Home)
	}
	if s.Dir != "" {
		if s.Ask {
			argv = append(argv, "-v", s.Dir+":"+s.Dir+":ro")
		} else {
			argv = append(argv, "-v", s.Dir+":"+s.Dir)
		}
	}
	for _, w := range s.Writable {
		if s.Ask {
			argv = append(argv, "-v", w+":"+w+":ro")
		} else {
			argv = append(argv, "-v", w+":"+w)
		}
	}
	for _, r := range s.ReadOnly {
		argv = append(argv, "-v", r+":"+r+":ro")
	}
	cmd := append(append([]string{}, s.Command...), s.Args...)
	if s.ProxySocket != "" && s.Self != "" {
		argv = append(argv, "-v", s.ProxySocket+":"+forwarder.Socket, "-v", s.Self+":"+forwarder.Self+":ro")
		cmd = append([]string{forwarder.Self}, forwarder.Args(s.ProxyPort, nil, cmd)...)
	}
	argv = append(argv, "-w", s.Dir)
	for _, kv := range s.Env {
		argv = append(argv, "-e", kv)
	}
	argv = append(argv, d.Image)
	return append(argv, cmd...)
}

// dockerUser is the container's user: the daemon's own ids, or SandboxUID
// when the daemon runs as root (never root inside).
func dockerUser() string {
	if os.Getuid() == 0 {
		return fmt.Sprintf("%d:%d", SandboxUID, SandboxGID)
	}
	return fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
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
