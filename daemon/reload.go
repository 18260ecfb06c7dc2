package daemon

import (
	"context"

	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"lazy/agent"
	"lazy/api"
	"lazy/config"
)

// liveConfig is the config in force: the daemon swaps it when
// .lazy/config.toml changes, and every reader takes it whole.
type liveConfig struct {
	cur atomic.Pointer[config.Config]
}

func newLiveConfig(c *config.Config) *liveConfig {
	l := &liveConfig{}
	l.cur.Store(c)
	return l
}

// Get is the config in force now.
func (l *liveConfig) Get() *config.Config { return l.cur.Load() }

// liveLauncher runs each turn with the launcher in force when it starts.
type liveLauncher struct {
	cur   atomic.Pointer[agent.Launcher]
	probe *prober
}

// newLiveLauncher is a liveLauncher that starts with first (validated by
// the caller), whose runner, when it cannot run turns, is probed again
// before a turn it would refuse; changed hears of a runner that became
// usable. A reload or a probe replaces the launcher whole, never a field
// of the one in force.
func newLiveLauncher(first *agent.Launcher, changed func(*agent.Launcher)) *liveLauncher {
	l := &liveLauncher{}
	l.cur.Store(first)
	l.probe = &prober{launcher: l, changed: changed}
	return l
}

// current is the launcher a turn starts with: a runner that refused is
// probed again first, so a sandbox installed since is used at once.
func (l *liveLauncher) current() *agent.Launcher {
	if _, refused := l.cur.Load().Runner.(agent.Refuse); refused && l.probe != nil {
		_ = l.probe.ready() // the turn's own refusal says why
	}
	return l.cur.Load()
}

func (l *liveLauncher) RunTurn(ctx context.Context, req agent.TurnRequest) (agent.Result, agent.Outcome, error) {
	return l.current().RunTurn(ctx, req)
}

// Agent is the agent a turn launched now runs: driver name and command.
func (l *liveLauncher) Agent() (driver, command string) { return l.cur.Load().Agent() }

// HomeFor is where a task's agent home is (agents_dir never changes on a
// reload).
func (l *liveLauncher) HomeFor(ref string) string { return l.cur.Load().HomeFor(ref) }

// SetupCommands is [setup] run in force now.
func (l *liveLauncher) SetupCommands() []string { return l.cur.Load().SetupCommands() }

// RunSetup runs a task's setup with the launcher in force now.
func (l *liveLauncher) RunSetup(ctx context.Context, req agent.TurnRequest, commands []string) (string, error) {
	return l.current().RunSetup(ctx, req, commands)
}

// reloader applies config file changes to the running daemon.
type reloader struct {
	d       *Daemon
	root    string
	environ []string
	self    string
	started *config.Config // what the listeners and the store were opened with

	mu      sync.Mutex
	restart []string // keys changed since start that need a restart
	cfgErr  string   // why the file as it is now was not applied
}

// debounce lets an editor finish its writes (truncate, write, rename)
// before the file is read.
const debounce = 150 * time.Millisecond

// watch follows <root>/.lazy/config.toml until ctx ends. It watches the
// directory, so a file replaced by rename (as editors save) is seen, and
// the project root until .lazy exists.
func (r *reloader) watch(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w (config changes need a daemon restart)", config.FileName, err)
	}
	dir := filepath.Join(r.root, filepath.Dir(config.FileName))
	watching := w.Add(dir) == nil
	if !watching {
		if err := w.Add(r.root); err != nil {
			w.Close()
			return fmt.Errorf("watch %s: %w (config changes need a daemon restart)", r.root, err)
		}
	}
	go func() {
		defer w.Close()
		var fire <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if !watching && filepath.Clean(ev.Name) == dir && ev.Has(fsnotify.Create) {
					watching = w.Add(dir) == nil
				}
				if filepath.Base(ev.Name) == filepath.Base(config.FileName) || filepath.Clean(ev.Name) == dir {
					fire = time.After(debounce)
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				r.d.log.Warn("config watch", "err", err)
			case <-fire:
				fire = nil
				r.reload()
			}
		}
	}()
	return nil
}

// reload reads the config again and applies what can be applied live: the
// agent settings to the next turn, the proxy and model settings to the next
// request, protected paths to the next check. A file that does not load
// changes nothing and is named as the config error.
func (r *reloader) reload() {
	next, err := config.Load(r.root, r.environ)
	var live []string
	if err == nil {
		live, err = r.apply(next)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		msg := err.Error()
		if msg != r.cfgErr {
			r.d.log.Warn("config change not applied", "err", msg)
			r.d.publishConfig("not applied: " + msg + "; the daemon keeps the settings it had")
		}
		r.cfgErr = msg
		return
	}
	recovered := r.cfgErr != ""
	r.cfgErr = ""
	var restart []string
	for _, k := range config.Changed(r.started, next) {
		if !config.LiveKey(k) {
			restart = append(restart, k)
		}
	}
	var said []string
	if len(live) > 0 {
		r.d.log.Info("config applied", "keys", strings.Join(live, ","))
		said = append(said, "applied: "+strings.Join(live, ", "))
	}
	switch {
	case len(restart) > 0 && !slices.Equal(restart, r.restart):
		said = append(said, "restart needed: "+strings.Join(restart, ", "))
	case len(restart) == 0 && len(r.restart) > 0:
		said = append(said, "no restart needed any more")
	}
	if recovered && len(live) == 0 {
		said = append([]string{"applied: the file loads again"}, said...)
	}
	r.restart = restart
	if len(said) > 0 {
		r.d.publishConfig(strings.Join(said, "; "))
	}
}

// apply builds everything the new config needs before it swaps anything,
// so a config that cannot be applied leaves the daemon as it was.
func (r *reloader) apply(next *config.Config) ([]string, error) {
	d := r.d
	cur := d.live.Get()
	var live []string
	for _, k := range config.Changed(cur, next) {
		if config.LiveKey(k) {
			live = append(live, k)
		}
	}
	if _, bad := credentialChecks(next, d.home, time.Now()); bad != nil {
		return nil, bad
	}
	old := d.launcher.cur.Load()
	l := *old
	var err error
	if l.Driver, err = agent.NewDriver(next.Agent.Driver, next.Agent.PermissionMode, next.Agent.ClientStream); err != nil {
		return nil, err
	}
	if l.Runner, err = agent.NewRunner(next.Agent.Runner, next.Agent.DockerImage); err != nil {
		return nil, err
	}
	l.Command = agentCommand(next, r.self)
	l.TurnTimeout, l.AskTimeout = next.TurnTimeoutDuration(), next.AskTimeoutDuration()
	l.HideFile = hiddenFiles(d.home, next)
	l.Share, l.Limits, l.ExtraEnv = sandboxSettings(next, d.paths.Root)
	l.Setup = next.Setup.Run
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if err := d.proxy.Reconfigure(next); err != nil {
		return nil, err
	}
	d.launcher.cur.Store(&l)
	d.live.cur.Store(next)
	d.taskDeps.SetProtect(next.Protect.Paths)
	d.status.setRunner(l.Runner, l.Limits)
	d.setConfigSource(context.Background())
	return live, nil
}

// state is the restart-needed keys and the config error, for status.
func (r *reloader) state() ([]string, string) {
	if r == nil {
		return nil, ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.restart), r.cfgErr
}

// publishConfig tells watchers what a config change did.
func (d *Daemon) publishConfig(detail string) {
	d.sup.Publish(api.Event{Time: time.Now().UTC(), Kind: api.EventConfig, Detail: "config " + detail})
}

// runnerNow says, on the status, why the runner cannot run turns (err
// from probing it again): the sandbox line, and a warning for an explicit
// bwrap ("auto" has its own).
func (d *Daemon) runnerNow(info *api.DaemonInfo, err error) {
	if err == nil {
		return
	}
	info.Sandbox = unavailableLine(err)
	if _, bw := d.launcher.cur.Load().Runner.(agent.Bwrap); bw {
		info.Warnings = append(info.Warnings, "agent.runner = \"bwrap\", but "+err.Error()+": agent turns fail until it works here")
	}
}

// Info is the daemon's status: daemon.json's fields, with the runner in
// force, the config keys that need a restart and the config error.
func (d *Daemon) Info() api.DaemonInfo {
	probed := d.launcher.probe.recent() // a sandbox installed since shows at once
	info := d.status.get()
	d.runnerNow(&info, probed)
	if w := agentWarning(d.live.Get()); w != "" && !slices.Contains(info.Warnings, w) {
		info.Warnings = append(info.Warnings, w)
	}
	info.RestartNeeded, info.ConfigError = d.reload.state()
	if len(info.RestartNeeded) > 0 {
		info.Warnings = append(info.Warnings, "restart needed: "+strings.Join(info.RestartNeeded, ", ")+
			" changed in "+config.FileName+"; the daemon keeps the old values until `lazy daemon stop` and `lazy daemon start`")
	}
	if err := d.credentialTrouble(); err != nil {
		info.Warnings = append(info.Warnings, err.Error()+"; until then new tasks and turns are refused")
	}
	if info.ConfigError != "" {
		info.Warnings = append(info.Warnings, "config not applied: "+info.ConfigError+"; the daemon keeps the settings it had")
	}
	return info
}

// credentialTrouble is what is wrong now with the credential files a task
// of the default role needs (a rotation gone wrong under the daemon).
func (d *Daemon) credentialTrouble() error {
	return d.svc.creds.check("", "")
}
