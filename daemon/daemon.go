// Package daemon wires one project's daemon and runs its lifecycle: the
// state directory and its files, the store, start-up reconciliation, the actor
// tree, the dashboard listener (loopback only), the proxy listener, the agent
// launcher, daemon.json, and the graceful stop. It is the only package that
// knows every other one.
package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"lazy/actors"
	"lazy/agent"
	"lazy/api"
	"lazy/approval"
	"lazy/config"
	"lazy/gitx"
	"lazy/grain/grainpb"
	"lazy/httpapi"
	"lazy/proxy"
	"lazy/review"
	"lazy/store"
	"lazy/supervisor"
	"lazy/task"
	"lazy/version"
)

// Options start a daemon.
type Options struct {
	Root    string   // project root (git top level)
	Environ []string // the daemon's environment (config overrides, agent PATH...)
	Log     *slog.Logger
	// SelfExe is the lazy binary, which plays the scripted agent.
	SelfExe string
	// Now is the clock of the passphrase attempts' waits (nil: time.Now);
	// tests turn it rather than sleep.
	Now func() time.Time
}

// passphraseTries is the name the wrong approval passphrases are counted
// under in the store: the store is the project's (shared by the members of
// a cluster), and every task's passphrase is the project's one.
const passphraseTries = "project"

// Daemon is one running daemon.
type Daemon struct {
	cfg      *config.Config // as started: listeners and store
	live     *liveConfig    // in force now (reloaded from the file)
	home     string
	launcher *liveLauncher
	proxy    *proxy.Proxy
	taskDeps *actors.TaskDeps
	reload   *reloader
	status   *status // what daemon.json and `lazy daemon status` say
	paths    api.Paths
	log      *slog.Logger
	st       store.Store
	sup      *supervisor.Supervisor
	svc      *Service
	review   *Review
	dash     *http.Server
	prx      *http.Server
	sockets  *proxy.Sockets // each task's own proxy socket, bound into its sandbox
	usage    *usageBook     // its rows are written behind the calls: close before the store
	lock     *os.File
	stopped  chan struct{}
	once     sync.Once
	stopFn   context.CancelFunc
}

// ErrRunning refuses a second daemon for the same project.
var ErrRunning = errors.New("a daemon is already running for this project")

// Start brings a daemon up; it serves until ctx ends or Stop is called.
func Start(ctx context.Context, o Options) (*Daemon, error) {
	home, err := api.LazyHome(o.Environ)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(o.Root, o.Environ)
	if err != nil {
		return nil, err
	}
	paths := api.StatePaths(home, o.Root)
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	missingCred, badCred := credentialChecks(cfg, home, time.Now())
	if badCred != nil {
		return nil, badCred // there but unusable: fixed now, not found by a turn later
	}
	if missingCred != nil {
		o.Log.Warn(missingCred.Error() + "; task new refuses until it is there (no restart needed)")
	}
	if cfg.Cluster.Enabled() && cfg.Cluster.TLS() {
		// a certificate wrong for this member is refused before it joins
		// (it would join, then fail the calls to its tasks after 30 s)
		if _, err := supervisor.CheckMemberCert(supervisor.MemberCert{Cert: cfg.Cluster.TLSCert, Key: cfg.Cluster.TLSKey, CA: cfg.Cluster.TLSCA, Advertise: cfg.Cluster.Advertise}, time.Now()); err != nil {
			return nil, err
		}
	}
	live := newLiveConfig(cfg)
	d := &Daemon{cfg: cfg, live: live, home: home, paths: paths, log: o.Log, stopped: make(chan struct{})}
	if err := d.prepareState(); err != nil {
		return nil, err
	}
	for _, id := range actors.OutboxTasks(paths.Outbox) {
		o.Log.Warn("a turn's end kept during a store outage waits in the outbox: it is recorded from there (or discarded, saying why) when this daemon loads the task", "task", task.ShortID(id))
	}
	fds := raiseFileLimit(o.Log)
	ok := false
	var undo []func() // what a start that fails stops, the last built first
	defer func() {
		if !ok {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
			d.cleanup()
		}
	}()
	token, err := ensureToken(paths.AuthToken)
	if err != nil {
		return nil, err
	}
	dashToken, err := ensureToken(paths.DashboardToken)
	if err != nil {
		return nil, err
	}
	st, err := openStore(cfg, paths)
	if err != nil {
		return nil, err
	}
	d.st = st
	if cfg.Cluster.Enabled() {
		// the other members' turns are theirs: a task's own actor settles a
		// turn cut off by a dead member when it is placed anew
		err = d.reconcileRecovery(ctx)
	} else {
		err = d.reconcile(ctx)
	}
	if err != nil {
		return nil, err
	}

	dashLn, proxyLn, err := d.listen()
	if err != nil {
		return nil, err
	}
	dashPort := dashLn.Addr().(*net.TCPAddr).Port
	proxyPort := proxyLn.Addr().(*net.TCPAddr).Port
	proxyURL := "http://" + proxyLn.Addr().String()
	creds := &credentials{live: live, home: home}

	driver, err := agent.NewDriver(cfg.Agent.Driver, cfg.Agent.PermissionMode, cfg.Agent.ClientStream)
	if err != nil {
		return nil, err
	}
	runner, err := agent.NewRunner(cfg.Agent.Runner, cfg.Agent.DockerImage)
	if err != nil {
		return nil, err
	}
	if agent.Sandboxed(runner) {
		agent.WarmMasks()
	}
	warnings := runnerWarnings(runner)
	if w := agentWarning(cfg); w != "" {
		warnings = append(warnings, w)
	}
	for _, w := range warnings {
		o.Log.Warn(w)
	}

	share, limits, extraEnv := sandboxSettings(cfg, o.Root)
	// what the daemon says of itself (daemon.json, status, a member's info)
	status := newStatus(api.DaemonInfo{PID: os.Getpid(), Root: o.Root, State: paths.State, DashboardPort: dashPort, ProxyPort: proxyPort,
		BaseURL: "http://127.0.0.1:" + strconv.Itoa(dashPort), ProxyURL: proxyURL, StartedAt: time.Now().UTC(), Version: version.String(),
		Runner: runner.Name(), Warnings: warnings, Sandbox: sandboxLine(runner, limits)})

	// Each part below is built whole, from parts built before it, in this
	// order: the grants and the event hub (the supervisor's core), the
	// proxy on them, its sockets, the launcher (minting through the core,
	// opening the sockets), the task actors' deps, the actor tree on the
	// core, the service. Nothing is set on a part after it is built, and a
	// closure given to a part closes over parts built before it, never
	// over d. The one thing that flows back up, a tripwire the proxy finds
	// for a task actor, goes through a queue the tree drains once it runs.
	clusterOpts, err := clusterOptions(ctx, cfg, st, status)
	if err != nil {
		return nil, err
	}
	var clusterSecret []byte
	if clusterOpts != nil {
		clusterSecret = clusterOpts.Secret
	}
	decoys, err := newCanaries(ctx, paths.CanaryKey, clusterSecret, st)
	if err != nil {
		return nil, err
	}
	core, err := supervisor.NewCore(supervisor.CoreConfig{GrantsPath: paths.ProxyTokens, Log: o.Log})
	if err != nil {
		return nil, err
	}
	undo = append(undo, core.Shutdown)
	var usageFresh time.Duration // a cluster: budgets and other members' usage come from the store
	if cfg.Cluster.Enabled() {
		usageFresh = usageTTL
	}
	book := newUsageBook(st, o.Log, usageFresh)
	undo = append(undo, book.close)
	egress := &egressBook{st: st, log: o.Log, turns: book}
	modelErrs := &trouble{}
	scripts := newTranscripts(st, o.Log, core.Publish, core.WantsTranscript)
	trips := make(chan tripwire, 64)
	prx, err := proxy.New(proxy.Options{Config: cfg, Home: home, Grants: core.Grants, Log: o.Log, Port: proxyPort,
		Publish: func(t api.Traffic) {
			if core.WantsTraffic() { // lazy watch --net: nobody else reads it
				net := t // only a published event costs its copy
				core.Publish(api.Event{Time: t.Time, Kind: api.EventNet, TaskID: t.TaskID, TaskRef: t.TaskRef, Net: &net})
			}
			if t.Egress {
				egress.record(t) // no model call: not usage, not model trouble
				return
			}
			if e := modelErrs.record(t); e != nil {
				core.Publish(*e)
			}
			book.record(t)
		},
		OverBudget: book.overBudget,
		Canaries:   decoys.Set,
		Reserve:    book.reserve,
		Transcript: scripts.For,
		Tripwire: func(taskID, ref, what string) {
			// the proxy refuses the task's placeholders from this instant;
			// the task's actor records the trip and revokes its grants
			go func() {
				select {
				case trips <- tripwire{taskID: taskID, ref: ref, what: what}:
				case <-ctx.Done():
				}
			}()
		}})
	if err != nil {
		return nil, err
	}
	sockets, err := proxy.NewSockets(prx, filepath.Join(paths.State, "sockets"))
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() {
		if err := sockets.Close(); err != nil {
			o.Log.Warn("remove the proxy sockets", "err", err)
		}
	})
	mint := &minter{live: live, st: st, creds: creds, grants: core}
	launcher := &agent.Launcher{
		Driver: driver, Runner: runner, Command: agentCommand(cfg, o.SelfExe),
		For: func(name string) (agent.Driver, []string, error) {
			// a task's own driver (lazy task new --driver), its npm command
			drv, err := agent.NewDriver(name, live.Get().Agent.PermissionMode, live.Get().Agent.ClientStream)
			if err != nil {
				return nil, nil, err
			}
			if name == "script" {
				return drv, []string{o.SelfExe, "script-agent"}, nil
			}
			return drv, []string{agent.DefaultCommand(name)}, nil
		},
		BaseURL: proxyURL, DaemonEnv: o.Environ, AgentsDir: paths.Agents,
		GitDir: filepath.Join(o.Root, ".git"), Hide: hidden(home, paths.State), HideFile: hiddenFiles(home, cfg),
		ProxyPort: proxyPort, Self: o.SelfExe, Share: share, Limits: limits, ExtraEnv: extraEnv,
		TurnTimeout: cfg.TurnTimeoutDuration(), AskTimeout: cfg.AskTimeoutDuration(),
		Placeholders: mint.mint,
		Sockets:      sockets.Open,
		Slots:        agent.NewSlots(cfg.Agent.MaxConcurrent),
		Setup:        cfg.Setup.Run,
		Decoys:       decoys.Decoys,
		// what a streaming client reports of its turn joins the turn's
		// transcript, masked as the proxy masks a model call's
		Client: func(taskID, ref string, turn int) agent.ClientEvents {
			return scripts.Client(taskID, ref, turn, prx.Mask)
		},
	}
	if err := launcher.Validate(); err != nil {
		return nil, err
	}
	turns := newLiveLauncher(launcher, func(l *agent.Launcher) {
		// bubblewrap installed under the running daemon
		o.Log.Info("the sandbox works now: agent turns run in it", "runner", l.Runner.Name())
		status.setRunner(l.Runner, l.Limits)
	})
	guesses := &approval.Limiter{Book: st, Now: o.Now}
	leases, leaseHolder := taskLeases(cfg, st)
	taskDeps := &actors.TaskDeps{Leases: leases, LeaseHolder: leaseHolder, Remote: clusterRemote(cfg), WorktreeDir: paths.Worktrees, Homes: agentHomes(cfg, st), HomeFor: turns.HomeFor, Store: st, Launcher: troubleLauncher{inner: turns, tr: modelErrs}, Setup: turns, LockDir: filepath.Join(paths.State, "locks"), Log: o.Log,
		Root: o.Root, RecoveryDir: paths.Recovery, Outbox: paths.Outbox, Protect: cfg.Protect.Paths, AskTimeout: cfg.AskTimeoutDuration(), Agent: turns.Agent,
		CheckPassphrase: func(taskID, pass string) error {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return guesses.Check(ctx, passphraseTries, func() error { return approval.Check(paths.Passphrase, pass) })
		}}
	// in a cluster the tree joins below, once everything a job needs is
	// built: a member that joins is handed tasks (and their jobs) at once
	sup, err := supervisor.New(supervisor.Config{Core: core, Log: o.Log, Task: taskDeps, Cluster: clusterOpts})
	if err != nil {
		return nil, err
	}
	undo = append(undo, sup.Shutdown)
	var links *supervisor.LinkTLS
	if clusterOpts != nil {
		links = clusterOpts.TLS
	}
	svc := &Service{remote: clusterRemote(cfg), links: links, log: o.Log, usage: book, transcripts: scripts, live: live, paths: paths, st: st, sup: sup, creds: creds, trouble: modelErrs, runnerReady: turns.probe.ready}
	// the daemon holds its parts, all built
	d.status, d.launcher, d.taskDeps, d.proxy, d.sockets, d.usage, d.sup, d.svc = status, turns, taskDeps, prx, sockets, book, sup, svc
	d.review = &Review{svc: svc, deps: taskDeps}
	// from here d owns them: a start that fails stops the tree, and
	// cleanup closes the sockets, the usage book and the store
	undo = []func(){sup.Shutdown}

	d.setConfigSource(ctx)

	runCtx, cancel := context.WithCancel(ctx)
	d.stopFn = cancel
	undo = append(undo, cancel) // a start that fails ends what follows runCtx
	go relayTripwires(runCtx, trips, sup, o.Log)
	if events, unsubscribe, err := sup.Subscribe(actors.Filter{Tasks: true}, 64); err == nil {
		go func() {
			d.review.warmReviews(runCtx, events)
			unsubscribe()
		}()
	}
	// ended tasks' worktrees and, after tasks.keep_branches, their branches
	go d.svc.sweepEnded(runCtx)
	if cfg.Cluster.Enabled() {
		// worktrees of tasks other members host
		go d.svc.sweepMoved(runCtx)
	}
	// the running turn of each task: its calls are counted to it
	if events, unsubscribe, err := sup.Subscribe(actors.Filter{Tasks: true}, 256); err == nil {
		go func() {
			book.follow(runCtx, events)
			unsubscribe()
		}()
	}
	// a word to [notify]'s webhook and command when a task needs you
	if err := d.startNotify(runCtx, o.Environ); err != nil {
		return nil, err
	}
	// each running turn's transcript, kept when it ends
	if events, unsubscribe, err := sup.Subscribe(actors.Filter{Tasks: true}, 256); err == nil {
		go func() {
			scripts.follow(runCtx, events)
			unsubscribe()
		}()
	}
	stopping := make(chan struct{})
	// the pages call the table the RPC serves, in process
	cmds := d.commands(cancel)
	web, err := httpapi.New(httpapi.Deps{Stopping: stopping, Call: cmds, RawFiles: d.review, Storage: store.Served(st), Log: o.Log, Token: token, Bearer: token, DashboardToken: dashToken, Gatherer: newMetrics(st, sup, book),
		Info: d.Info, Commands: cmds, LogPath: paths.Log})
	if err != nil {
		return nil, err
	}
	if n := cfg.Sandbox.MaxConnections * cfg.Agent.MaxConcurrent; fds > 0 && uint64(n) > fds/2 {
		o.Log.Warn("sandbox.max_connections × agent.max_concurrent is more than half the daemon's file limit: tasks at their limits together could starve the dashboard and the RPC; lower sandbox.max_connections or raise the hard RLIMIT_NOFILE (ulimit -Hn)",
			"max_connections", cfg.Sandbox.MaxConnections, "max_concurrent", cfg.Agent.MaxConcurrent, "nofile", fds)
	}
	d.reload = &reloader{d: d, root: o.Root, environ: o.Environ, self: o.SelfExe, started: cfg}
	if err := d.reload.watch(runCtx); err != nil {
		o.Log.Warn("config changes need a restart", "err", err)
	}
	d.dash = &http.Server{Handler: web, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	d.dash.RegisterOnShutdown(func() { close(stopping) })
	d.prx = &http.Server{Handler: prx, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	if clusterOpts != nil {
		// before any page or RPC is served: a task is reached through the
		// cluster from the first request on, never hosted here on the side
		err := sup.Join(func([]string) {
			if err := wakeTasks(context.Background(), st, sup); err != nil {
				o.Log.Error("wake the tasks of members that left", "err", err)
			}
		})
		if err != nil {
			return nil, err
		}
	}
	go d.serve(d.dash, dashLn, "dashboard")
	go d.serve(d.prx, proxyLn, "proxy")

	if sup.Clustered() {
		// a task placed on this member's own last life (killed, its etcd
		// lease not yet run out) cannot be reached for a few seconds: the
		// start does not wait for it, and those tasks are woken again when
		// that life leaves the cluster (Join's members-left hook)
		go func() {
			if err := wakeTasks(context.Background(), st, sup); err != nil {
				o.Log.Warn("wake tasks with work waiting; they are woken again when the members that hold them leave", "err", err)
			}
		}()
	} else if err := wakeTasks(ctx, st, sup); err != nil {
		return nil, err
	}
	b, _ := json.MarshalIndent(status.get(), "", "  ")
	if err := proxy.WriteFileAtomic(paths.DaemonJSON, b, 0o600); err != nil {
		return nil, err
	}
	ok = true
	o.Log.Info("daemon ready", "dashboard", status.get().BaseURL, "proxy", proxyURL, "state", paths.State, "version", version.String())
	go func() {
		<-runCtx.Done()
		d.shutdown()
	}()
	return d, nil
}

// agentCommand is the executable the driver runs. The script driver plays
// the agent with this very binary unless agent.command names another: then
// it runs that command (with claude's argv contract), and agentWarning
// says so wherever the daemon's warnings are shown.
func agentCommand(cfg *config.Config, self string) []string {
	if cfg.Agent.Driver == "script" && (cfg.Agent.Command == "" || cfg.Agent.Command == "claude") {
		return []string{self, "script-agent"}
	}
	if cfg.Agent.Driver == "gemini" && (cfg.Agent.Command == "" || cfg.Agent.Command == "claude") {
		return []string{"gemini"}
	}
	return strings.Fields(cfg.Agent.Command)
}

// agentWarning is what the operator must know of the agent setting: the
// script driver with an agent.command of its own runs that command, not
// the project's scripted agent ("" : nothing to say).
func agentWarning(cfg *config.Config) string {
	if cfg.Agent.Driver != "script" || cfg.Agent.Command == "" || cfg.Agent.Command == "claude" {
		return ""
	}
	return fmt.Sprintf("agent.driver = \"script\" runs agent.command %q (with claude's argv contract), not the project's scripted agent; remove agent.command from %s to run `lazy script-agent`", cfg.Agent.Command, config.FileName)
}

func (d *Daemon) serve(s *http.Server, ln net.Listener, name string) {
	if err := s.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		d.log.Error("listener failed", "listener", name, "err", err)
	}
}

// raiseFileLimit raises the daemon's soft RLIMIT_NOFILE to its hard limit
// and returns the limit in force (0: unknown). Each task's connections are
// capped at the proxy (sandbox.max_connections), so the rest stays for the
// dashboard, the RPC and the other tasks.
func raiseFileLimit(log *slog.Logger) uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		log.Warn("read the file limit", "err", err)
		return 0
	}
	if rl.Cur < rl.Max {
		want := rl
		want.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			log.Warn("raise the file limit to the hard limit", "soft", rl.Cur, "hard", rl.Max, "err", err)
			return rl.Cur
		}
		rl = want
	}
	return rl.Cur
}

// hidden are the directories a sandbox hides: the lazy home and the state
// dir when it lies elsewhere.
func hidden(home, state string) []string {
	out := []string{home}
	if rel, err := filepath.Rel(home, state); err != nil || strings.HasPrefix(rel, "..") {
		out = append(out, state)
	}
	return out
}

// hiddenFiles are the configured credential files outside the lazy home
// (inside it they are hidden with it).
func hiddenFiles(home string, cfg *config.Config) []string {
	var out []string
	for _, f := range []string{cfg.ProviderCredentialFile(home), cfg.EditorCredentialFile(home), cfg.GeminiCredentialFile(home)} {
		if rel, err := filepath.Rel(home, f); err == nil && !strings.HasPrefix(rel, "..") {
			continue
		}
		if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
			out = append(out, f)
		}
	}
	return out
}

// runnerWarnings is what the operator must be told about the runner.
func runnerWarnings(r agent.Runner) []string {
	switch r := r.(type) {
	case agent.Process:
		fix := "set agent.runner = \"auto\" to sandbox them"
		if err := agent.ProbeBwrap(""); err != nil {
			// "auto" here would refuse every turn: the fix starts with the sandbox
			fix = "to sandbox them, install bubblewrap (apt-get install bubblewrap; now: " + err.Error() + "), then set agent.runner = \"auto\""
		}
		return []string{"agent.runner = \"process\": agents run unsandboxed and can read every file you can (credentials, other projects) and reach the network; " + fix}
	case agent.Refuse:
		return []string{"no sandbox: " + r.Why + "; agent turns and new tasks are refused until you install it (apt-get install bubblewrap: the daemon sees it at the next turn, no restart) or set agent.runner = \"process\" (unsandboxed)"}
	}
	return nil
}

// sandboxSettings are config [sandbox] as the launcher takes them; the
// extra env starts with a git identity (see gitIdentity), which
// sandbox.env may replace.
func sandboxSettings(cfg *config.Config, root string) ([]string, agent.Limits, []string) {
	sb := cfg.Sandbox
	return sb.ReadOnlyPaths(), agent.Limits{OpenFiles: uint64(sb.MaxOpenFiles), Procs: uint64(sb.MaxProcs),
		Memory: sb.MemoryBytes(), TmpSize: sb.TmpBytes()}, append(gitIdentity(root), sb.Env...)
}

// gitIdentity is who an agent's commits are by: the project's git
// identity (user.name and user.email as the project's git reads them), or
// "lazy agent". Inside a sandbox the agent is a uid with no name git can
// make an address of, and `git commit` would refuse ("Author identity
// unknown").
func gitIdentity(root string) []string {
	name, email := "lazy agent", "agent@lazy.invalid"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if v, err := gitx.Run(ctx, root, "config", "user.name"); err == nil && strings.TrimSpace(v) != "" {
		name = strings.TrimSpace(v)
	}
	if v, err := gitx.Run(ctx, root, "config", "user.email"); err == nil && strings.TrimSpace(v) != "" {
		email = strings.TrimSpace(v)
	}
	return []string{"GIT_AUTHOR_NAME=" + name, "GIT_AUTHOR_EMAIL=" + email, "GIT_COMMITTER_NAME=" + name, "GIT_COMMITTER_EMAIL=" + email}
}

// sandboxLine is `lazy daemon status`'s sandbox line.
func sandboxLine(r agent.Runner, l agent.Limits) string {
	switch r := r.(type) {
	case agent.Refuse:
		return unavailableLine(errors.New(r.Why))
	case agent.Bwrap:
		return fmt.Sprintf("bwrap: uid %d in its own user namespace, no capabilities, seccomp; limits: %s", agent.SandboxUID, l.Describe(agent.MemoryBound()))
	case agent.Docker:
		return fmt.Sprintf("docker: non-root user, no capabilities, read-only image; limits: %s", l.Describe("per container (the engine's cgroup)"))
	}
	return ""
}

// Service exposes the task operations (for in-process callers like the demo).
func (d *Daemon) Service() *Service { return d.svc }

// Review exposes the review actions (for in-process callers like the demo).
func (d *Daemon) Review() *Review { return d.review }

// Supervisor exposes the actor tree.
func (d *Daemon) Supervisor() *supervisor.Supervisor { return d.sup }

// Paths are the daemon's state paths.
func (d *Daemon) Paths() api.Paths { return d.paths }

// Stop begins a graceful stop.
func (d *Daemon) Stop() { d.stopFn() }

// Done is closed when the daemon has fully stopped.
func (d *Daemon) Done() <-chan struct{} { return d.stopped }

// prepareState makes the state dir (0700) and takes the single-instance lock.
func (d *Daemon) prepareState() error {
	for _, dir := range []string{d.paths.State, d.paths.LogDir, d.paths.Agents, d.paths.Worktrees, d.paths.Outbox} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create state dir %s: %w", dir, err)
		}
	}
	if err := os.Chmod(d.paths.State, 0o700); err != nil {
		return fmt.Errorf("secure state dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(d.paths.State, "daemon.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open daemon lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return fmt.Errorf("%w (state %s): use `lazy daemon status`, or `lazy daemon stop` first", ErrRunning, d.paths.State)
	}
	d.lock = f
	// a daemon.json left by a dead daemon is stale: we hold the lock now
	_ = os.Remove(d.paths.DaemonJSON)
	return nil
}

func ensureToken(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) >= 32 {
		_ = os.Chmod(path, 0o600)
		return strings.TrimSpace(string(b)), nil
	}
	var r [32]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(r[:])
	if err := proxy.WriteFileAtomic(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write auth token: %w", err)
	}
	return tok, nil
}

func openStore(cfg *config.Config, paths api.Paths) (store.Store, error) {
	sync := store.WithSync(cfg.Storage.Sync != "normal")
	switch cfg.Storage.Backend {
	case "file":
		return store.OpenFile(paths.FileStore, sync)
	case "postgres":
		return store.OpenPostgres(cfg.Storage.DSN, sync)
	}
	// SQLite makes its -wal and -shm files with the database's mode: make
	// the database 0600 first, so none of the three is readable by others
	f, err := os.OpenFile(paths.DB, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the store %s: %w", paths.DB, err)
	}
	f.Close()
	for _, p := range []string{paths.DB, paths.DB + "-wal", paths.DB + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("secure %s: %w", p, err)
		}
	}
	return store.OpenSQL(paths.DB, sync)
}

// listen binds the dashboard to loopback and the proxy, on pinned ports or
// the first free ones of the window.
func (d *Daemon) listen() (net.Listener, net.Listener, error) {
	lo, hi := d.cfg.PortRange()
	dashAddr := d.cfg.Daemon.DashboardListen
	if dashAddr == "" && d.cfg.Daemon.DashboardPort != 0 {
		dashAddr = "127.0.0.1:" + strconv.Itoa(d.cfg.Daemon.DashboardPort)
	}
	var dash net.Listener
	var err error
	if dashAddr != "" {
		dash, err = net.Listen("tcp", dashAddr)
		if err != nil {
			return nil, nil, fmt.Errorf("dashboard: listen on %s: %w (free that port or change daemon.dashboard_port)", dashAddr, err)
		}
	} else if dash, err = listenWindow("127.0.0.1", lo, hi, -1); err != nil {
		return nil, nil, fmt.Errorf("dashboard: %w", err)
	}
	taken := dash.Addr().(*net.TCPAddr).Port
	var prx net.Listener
	if d.cfg.Daemon.ProxyListen != "" {
		prx, err = net.Listen("tcp", d.cfg.Daemon.ProxyListen)
		if err != nil {
			dash.Close()
			return nil, nil, fmt.Errorf("proxy: listen on %s: %w (free that port or change daemon.proxy_listen)", d.cfg.Daemon.ProxyListen, err)
		}
	} else if prx, err = listenWindow("127.0.0.1", lo, hi, taken); err != nil {
		dash.Close()
		return nil, nil, fmt.Errorf("proxy: %w", err)
	}
	return dash, prx, nil
}

func listenWindow(host string, lo, hi, skip int) (net.Listener, error) {
	for p := lo; p <= hi; p++ {
		if p == skip {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err == nil {
			return ln, nil
		}
	}
	return nil, fmt.Errorf("no free port in daemon.port_window [%d, %d]: stop what holds them or widen the window", lo, hi)
}

// reconcileRecovery removes the recovery file of every unblock turn whose
// launch completed (a crash can land between the launch record and the
// removal); files of turns that never launched stay, with their message.
func (d *Daemon) reconcileRecovery(ctx context.Context) error {
	files, err := filepath.Glob(filepath.Join(d.paths.Recovery, "unblock-*.txt"))
	if err != nil || len(files) == 0 {
		return err
	}
	launched := map[string]bool{}
	tasks, err := d.st.ListTasks(ctx)
	if err != nil {
		return fmt.Errorf("reconcile recovery files: %w", err)
	}
	for _, t := range tasks {
		turns, err := d.st.ListTurns(ctx, t.ID)
		if err != nil {
			return fmt.Errorf("reconcile recovery files: %w", err)
		}
		for _, tu := range turns {
			if tu.StartedAt != nil {
				launched[tu.ID] = true
			}
		}
	}
	for _, f := range files {
		id := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "unblock-"), ".txt")
		if launched[id] {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove the recovery file of a launched turn: %w", err)
			}
		}
	}
	return nil
}

// reconcile records turns that were running when a previous daemon died.
func (d *Daemon) reconcile(ctx context.Context) error {
	if err := d.reconcileRecovery(ctx); err != nil {
		return err
	}
	running, err := d.st.TurnsInState(ctx, store.TurnRunning)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	for i := range running {
		tu := &running[i]
		if slices.Contains(actors.HeldTurns(d.paths.Outbox, tu.TaskID), tu.ID) {
			// it ended before the daemon died: the task's actor records
			// it from the outbox
			d.log.Info("a turn the dead daemon had ended waits in the outbox: its task records it from there", "task", task.ShortID(tu.TaskID), "turn", tu.Number)
			continue
		}
		now := time.Now().UTC()
		tu.Status, tu.EndedAt = store.TurnInterrupted, &now
		tu.Error = "the daemon stopped unexpectedly (killed or crashed) during this turn"
		if err := d.st.SaveTurn(ctx, tu); err != nil {
			return fmt.Errorf("reconcile turn %s: %w", tu.ID, err)
		}
		t, err := d.st.GetTask(ctx, tu.TaskID)
		if err != nil {
			return fmt.Errorf("reconcile task %s: %w", tu.TaskID, err)
		}
		if t.Status == task.Running {
			t.Status = task.Failed
			t.FailReason = fmt.Sprintf("%s was interrupted when the daemon died; unblock the task to continue", tu.Label())
			t.UpdatedAt = now
			if err := d.st.SaveTask(ctx, t); err != nil {
				return fmt.Errorf("reconcile task %s: %w", t.ID, err)
			}
		}
		d.log.Warn("reconciled a turn cut off by a dead daemon", "task", t.Ref(), "turn", tu.Number)
	}
	return d.reconcileRunningTasks(ctx)
}

// reconcileRunningTasks settles a task left "running" with no turn running
// or queued: the daemon died after its work turn's end was recorded and
// before the task's status was. The task takes the status that turn's end
// gives (blocked after a finished turn, failed after a failed one) and the
// session the turn recorded.
func (d *Daemon) reconcileRunningTasks(ctx context.Context) error {
	tasks, err := d.st.ListTasks(ctx)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	for i := range tasks {
		t := &tasks[i]
		if t.Status != task.Running {
			continue
		}
		turns, err := d.st.ListTurns(ctx, t.ID)
		if err != nil {
			return fmt.Errorf("reconcile task %s: %w", t.ID, err)
		}
		var last *store.Turn
		live := false
		for j := range turns {
			switch turns[j].Status {
			case store.TurnQueued, store.TurnRunning:
				live = true
			}
			if turns[j].Kind == store.TurnWork {
				last = &turns[j]
			}
		}
		if live {
			continue // its actor runs what is queued and sets the status
		}
		switch {
		case last != nil && last.Status == store.TurnDone:
			t.Status, t.FailReason = task.Blocked, ""
			if last.SessionID != "" {
				t.SessionID = last.SessionID
			}
		case last != nil && last.Status == store.TurnFailed:
			t.Status, t.FailReason = task.Failed, fmt.Sprintf("%s failed: %s", last.Label(), last.Error)
		default:
			t.Status = task.Failed
			t.FailReason = "the daemon stopped unexpectedly while this task was running; unblock the task to continue"
		}
		t.UpdatedAt = time.Now().UTC()
		if err := d.st.SaveTask(ctx, t); err != nil {
			return fmt.Errorf("reconcile task %s: %w", t.ID, err)
		}
		d.log.Warn("reconciled a task left running by a dead daemon", "task", t.Ref(), "status", t.Status)
	}
	return nil
}

// wakeTasks spawns the actors of tasks with queued turns or pending asks so
// their queues resume (an ask cut off by a dead daemon runs again).
func wakeTasks(ctx context.Context, st store.Store, sup *supervisor.Supervisor) error {
	queued, err := st.TurnsInState(ctx, store.TurnQueued)
	if err != nil {
		return fmt.Errorf("find queued turns: %w", err)
	}
	// a turn still running is one a dead cluster member was running (a
	// single daemon has settled its own by now): its task is placed anew
	running, err := st.TurnsInState(ctx, store.TurnRunning)
	if err != nil {
		return fmt.Errorf("find running turns: %w", err)
	}
	queued = append(queued, running...)
	asks, err := st.AsksInState(ctx, review.AskPending)
	if err != nil {
		return fmt.Errorf("find pending asks: %w", err)
	}
	ids := make([]string, 0, len(queued)+len(asks))
	for _, tu := range queued {
		ids = append(ids, tu.TaskID)
	}
	for _, c := range asks {
		ids = append(ids, c.TaskID)
	}
	// one task that cannot be reached does not strand the others
	var errs []error
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if err := sup.Send(id, &actors.Wake{}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// minter mints a turn's placeholders: the grants (the supervisor's core)
// for the credentials the config in force names.
type minter struct {
	live   *liveConfig
	st     store.Store
	creds  *credentials
	grants interface {
		Mint(*actors.MintGrants) (map[string]string, error)
	}
}

// mint returns the placeholder env of a task's role.
func (m *minter) mint(ctx context.Context, taskID, ref, role string) (map[string]string, error) {
	c := m.creds
	cfg := m.live.Get()
	driver := cfg.Agent.Driver
	if t, err := m.st.GetTask(ctx, taskID); err == nil {
		if t.Tripwire != "" {
			return nil, fmt.Errorf("no new grant: %s", t.Tripwire)
		}
		if t.Agent != "" {
			driver = t.Agent // lazy task new --driver
		}
	}
	if err := c.check(role, driver); err != nil {
		return nil, err // the turn fails naming the file and the fix, not on the proxy's 401
	}
	if driver == "codex" {
		// codex reads its key from OPENAI_API_KEY and calls [proxy.openai]
		return m.grants.Mint(&actors.MintGrants{Role: role, TaskRef: ref, TaskID: taskID, Vars: map[string]actors.MintVar{
			agent.EnvOpenAIKey: {Kind: proxy.KindOpenAI, ShapeOf: c.openAIShape()}}})
	}
	if driver == "gemini" {
		// the gemini client carries one key, GEMINI_API_KEY, on the Gemini
		// routes only (CONTRACT §16)
		return m.grants.Mint(&actors.MintGrants{Role: role, TaskRef: ref, TaskID: taskID, Vars: map[string]actors.MintVar{agent.EnvGeminiAPIKey: {Kind: proxy.KindGemini}}})
	}
	kind := cfg.Credentials.Provider.Kind
	envVar := map[string]string{config.KindAPIKey: agent.EnvAPIKey, config.KindOAuth: agent.EnvOAuth, config.KindAuthToken: agent.EnvAuthToken}[kind]
	local := role != "" && cfg.Models.Roles[role].Local
	shape := ""
	if !local {
		shape = c.shape()
	}
	vars := map[string]actors.MintVar{envVar: {Kind: kind, ShapeOf: shape}}
	if _, err := os.Stat(cfg.EditorCredentialFile(c.home)); err == nil && !local {
		vars[agent.EnvEditor] = actors.MintVar{Kind: "editor"}
	}
	return m.grants.Mint(&actors.MintGrants{Role: role, TaskRef: ref, TaskID: taskID, Vars: vars, Local: local})
}

// shutdown stops listeners, the actor tree (running turns are ended and
// recorded) and the store, then removes daemon.json.
func (d *Daemon) shutdown() {
	d.once.Do(func() {
		d.log.Info("daemon stopping")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if d.dash != nil {
			_ = d.dash.Shutdown(ctx)
		}
		if d.prx != nil {
			_ = d.prx.Shutdown(ctx)
		}
		if d.sup != nil {
			d.sup.Shutdown()
		}
		d.cleanup()
		d.log.Info("daemon stopped")
		close(d.stopped)
	})
}

func (d *Daemon) cleanup() {
	if d.sockets != nil {
		if err := d.sockets.Close(); err != nil {
			d.log.Warn("remove the proxy sockets", "err", err)
		}
		d.sockets = nil
	}
	if d.usage != nil {
		d.usage.close() // the rows that wait, before the store closes
		d.usage = nil
	}
	if d.st != nil {
		_ = d.st.Close()
		d.st = nil
	}
	gitx.CloseBatches() // the long-lived git questions' processes end with the daemon
	if d.lock != nil {
		_ = os.Remove(d.paths.DaemonJSON)
		_ = d.lock.Close()
		d.lock = nil
	}
}

// clusterOptions are the supervisor's cluster settings (nil: one daemon).
// The secret that signs calls between members is the shared store's.
func clusterOptions(ctx context.Context, cfg *config.Config, st store.Store, status *status) (*supervisor.ClusterOptions, error) {
	if !cfg.Cluster.Enabled() {
		return nil, nil
	}
	sq, ok := st.(interface {
		ClusterSecret(ctx context.Context, name string) ([]byte, error)
	})
	if !ok {
		return nil, fmt.Errorf("cluster.name needs storage.backend = \"postgres\" (the store is %s)", cfg.Storage.Backend)
	}
	secret, err := sq.ClusterSecret(ctx, cfg.Cluster.Name)
	if err != nil {
		return nil, err
	}
	host, portStr, _ := net.SplitHostPort(cfg.Cluster.Advertise) // checked by config
	port, _ := strconv.Atoi(portStr)
	var links *supervisor.LinkTLS
	var certNotAfter time.Time // zero: plaintext links
	if cfg.Cluster.TLS() {
		if links, err = supervisor.LoadLinkTLS(cfg.Cluster.TLSCert, cfg.Cluster.TLSKey, cfg.Cluster.TLSCA); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		certNotAfter = links.NotAfter
	}
	return &supervisor.ClusterOptions{Name: cfg.Cluster.Name, Etcd: cfg.Cluster.Etcd, Host: host, Port: port, Secret: secret, TLS: links,
		Describe: func(i *grainpb.MemberInfo) { status.describe(i, certNotAfter) }}, nil
}

// tripwire is a wire the proxy found tripped by a task's traffic.
type tripwire struct{ taskID, ref, what string }

// relayTripwires hands the proxy's tripwires to the task actors, which
// record them and revoke the task's grants (the proxy refuses its
// placeholders already). The proxy is built before the actor tree, so it
// queues them; none trips before the tree runs turns.
func relayTripwires(ctx context.Context, trips <-chan tripwire, sup *supervisor.Supervisor, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case t := <-trips:
			if err := sup.Send(t.taskID, &actors.Tripwire{What: t.what}); err != nil {
				log.Error("record tripwire", "task", t.ref, "err", err)
			}
		}
	}
}
