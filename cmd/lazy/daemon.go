package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"lazy/api"
	"lazy/client"
	"lazy/config"
	"lazy/daemon"
	"lazy/internal/logfile"
	"lazy/internal/memlimit"
)

func (a *app) daemonCmd() *cobra.Command {
	c := &cobra.Command{Use: "daemon", Short: "Start, inspect or stop this project's daemon"}
	var foreground, detached bool
	start := &cobra.Command{
		Use:   "start",
		Short: "Start this project's daemon (prints the running one if there is one)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if foreground {
				return a.runForeground(cmd.Context(), detached)
			}
			return a.startDetached(cmd.Context())
		},
	}
	start.Flags().BoolVar(&foreground, "foreground", false, "run in this process, logging to stderr and logs/daemon.log")
	start.Flags().BoolVar(&detached, "detached", false, "internal: started by `lazy daemon start`")
	_ = start.Flags().MarkHidden("detached")
	status := &cobra.Command{
		Use:   "status",
		Short: "Say whether the daemon runs, and where its dashboard and proxy are",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := a.paths(cmd.Context())
			if err != nil {
				return err
			}
			return a.printStatus(cmd.Context(), p)
		},
	}
	stop := &cobra.Command{
		Use:   "stop",
		Short: "Stop the daemon gracefully (running turns are ended and recorded)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return a.stopDaemon(cmd.Context()) },
	}
	c.AddCommand(start, status, stop)
	return c
}

func (a *app) printStatus(ctx context.Context, p api.Paths) error {
	c, info, err := client.Discover(p)
	if err == nil {
		err = c.WaitReady(ctx, 0)
	}
	if err == nil {
		// daemon.json is the daemon at start; the status call adds what
		// changed since (the runner in force, config keys that need a
		// restart, a config file that was not applied)
		if live, err := client.Do(ctx, c, api.CmdStatus, api.None{}); err == nil && live.PID != 0 {
			info = live
		}
	}
	if a.json {
		return printJSON(a.out, map[string]any{"running": err == nil, "daemon": info, "state": p.State})
	}
	if err != nil {
		fmt.Fprintln(a.out, "daemon: not running")
		if info.PID != 0 {
			fmt.Fprintf(a.out, "note: daemon.json names pid %d, which does not answer; `lazy daemon start` replaces it\n", info.PID)
		}
		fmt.Fprintf(a.out, "state: %s\n", p.State)
		return nil
	}
	printRunning(a.out, a.errOut, info, p)
	return nil
}

// printRunning is the running daemon's lines (CONTRACT §3): the tokened
// `open:` address logs a browser in to the dashboard.
func printRunning(out, errOut io.Writer, info api.DaemonInfo, p api.Paths) {
	fmt.Fprintf(out, "daemon: running (pid %d)\ndashboard: %s\n", info.PID, info.BaseURL)
	if u, err := openURL(info, p); err == nil {
		fmt.Fprintf(out, "open: %s\n", u)
	}
	fmt.Fprintf(out, "proxy: %s\nstate: %s\n", info.ProxyURL, p.State)
	if info.Sandbox != "" {
		fmt.Fprintf(out, "sandbox: %s\n", info.Sandbox)
	}
	if info.ConfigSource != "" {
		fmt.Fprintln(out, info.ConfigSource)
	}
	printWarnings(errOut, info.Warnings)
}

// openURL is the dashboard's address with its login token.
func openURL(info api.DaemonInfo, p api.Paths) (string, error) {
	tok, err := client.ReadToken(p.DashboardToken)
	if err != nil {
		return "", err
	}
	return info.BaseURL + "/?token=" + tok, nil
}

// startDetached re-runs this binary as `daemon start --foreground` in its own
// session, its output in the state dir, and waits until it answers.
func (a *app) startDetached(ctx context.Context) error {
	p, err := a.paths(ctx)
	if err != nil {
		return err
	}
	if c, _, err := client.Discover(p); err == nil && c.WaitReady(ctx, 0) == nil {
		return a.printStatus(ctx, p)
	}
	// refuse a broken config here, with its message, rather than in a log
	if _, err := config.Load(p.Root, a.environ); err != nil {
		return err
	}
	if err := daemon.CheckCredentials(p.Root, a.environ); err != nil {
		return err
	}
	if err := os.MkdirAll(p.LogDir, 0o700); err != nil {
		return fmt.Errorf("create log dir: %w", err)
	}
	outPath := p.LogDir + "/daemon.out"
	out, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", outPath, err)
	}
	defer out.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "daemon", "start", "--foreground", "--detached", "--project", p.Root)
	cmd.Env = a.environ
	cmd.Stdout, cmd.Stderr, cmd.Stdin = out, out, nil
	cmd.Dir = p.Root
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start daemon: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Fprint(a.errOut, "starting daemon")
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case err := <-exited:
			fmt.Fprintln(a.errOut)
			return fmt.Errorf("the daemon exited during start-up (%v): %s", err, lastLogLine(p.Log, outPath))
		case <-deadline:
			fmt.Fprintln(a.errOut)
			return fmt.Errorf("the daemon did not become ready within 60s; see %s", p.Log)
		case <-ctx.Done():
			fmt.Fprintln(a.errOut)
			return ctx.Err()
		case <-tick.C:
			if n%5 == 4 {
				fmt.Fprint(a.errOut, ".")
			}
			info, alive, err := client.ReadInfo(p)
			if err != nil || !alive || info.PID != cmd.Process.Pid {
				continue
			}
			if c, _, err := client.Discover(p); err == nil && c.WaitReady(ctx, 0) == nil {
				fmt.Fprintln(a.errOut, " ready")
				_ = cmd.Process.Release()
				return a.printStatus(ctx, p)
			}
		}
	}
}

func lastLogLine(paths ...string) string {
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		for i := len(lines) - 1; i >= 0; i-- {
			if l := strings.TrimSpace(lines[i]); l != "" {
				return l
			}
		}
	}
	return "no log output"
}

// followMemory keeps the daemon's memory near what it uses and its
// collections few (internal/memlimit), unless the environment's GOMEMLIMIT
// says otherwise (a GOGC there keeps its percent).
func followMemory(ctx context.Context, log *slog.Logger) {
	if memlimit.Follow(ctx, memlimit.Floor) {
		log.Info("memory: soft limit of 32 MiB while the live heap is small, the heap collected as it nears it (GOGC raised, unless set); as the heap grows, the limit follows it and GOGC goes back to 100; GOMEMLIMIT overrides it")
	} else {
		log.Info("memory: GOMEMLIMIT from the environment", "GOMEMLIMIT", os.Getenv("GOMEMLIMIT"))
	}
}

// runForeground runs the daemon in this process until a signal or `stop`.
func (a *app) runForeground(ctx context.Context, detached bool) error {
	p, err := a.paths(ctx)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(p.LogDir, 0o700); err != nil {
		return fmt.Errorf("create log dir: %w", err)
	}
	logFile, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", p.Log, err)
	}
	defer logFile.Close()
	// the lines of many calls at once in one write (internal/logfile);
	// every line is written before the file closes
	lines := logfile.New(logFile)
	defer lines.Close()
	var w io.Writer = lines
	if !detached {
		w = io.MultiWriter(lines, a.errOut)
	}
	log := slog.New(logfile.NewText(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
	slog.SetDefault(log)
	followMemory(ctx, log)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	d, err := daemon.Start(ctx, daemon.Options{Root: p.Root, Environ: a.environ, Log: log, SelfExe: self})
	if err != nil {
		log.Error("daemon failed to start", "err", err)
		return err
	}
	if !detached {
		printRunning(a.out, a.errOut, d.Info(), p)
	}
	<-d.Done()
	return nil
}

func (a *app) stopDaemon(ctx context.Context) error {
	p, err := a.paths(ctx)
	if err != nil {
		return err
	}
	c, info, err := client.Discover(p)
	if errors.Is(err, client.ErrNotRunning) {
		fmt.Fprintln(a.out, "daemon: not running")
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := client.Do(ctx, c, api.CmdStop, api.None{}); err != nil {
		return fmt.Errorf("ask the daemon to stop: %w", err)
	}
	fmt.Fprint(a.errOut, "stopping daemon")
	for i := 0; i < 300; i++ {
		if !client.PIDAlive(info.PID) {
			fmt.Fprintln(a.errOut, " done")
			fmt.Fprintln(a.out, "daemon: stopped")
			return nil
		}
		if i%10 == 9 {
			fmt.Fprint(a.errOut, ".")
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintln(a.errOut)
	return fmt.Errorf("the daemon (pid %d) is still running after 30s; see %s, or kill it", info.PID, p.Log)
}

// printWarnings prints the daemon's standing warnings.
func printWarnings(w io.Writer, warnings []string) {
	for _, s := range warnings {
		fmt.Fprintln(w, "warning: "+s)
	}
}

func (a *app) openCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "open",
		Short: "Print the dashboard's login address (and open it in a browser where there is one)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := a.paths(cmd.Context())
			if err != nil {
				return err
			}
			_, info, err := client.Discover(p)
			if err != nil {
				return err
			}
			u, err := openURL(info, p)
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, map[string]string{"url": u})
			}
			fmt.Fprintln(a.out, u)
			// a browser only where a desktop session is; never fails the command
			if os.Getenv("DISPLAY") != "" || os.Getenv("WAYLAND_DISPLAY") != "" {
				if xdg, err := exec.LookPath("xdg-open"); err == nil {
					_ = exec.Command(xdg, u).Start()
				}
			}
			return nil
		},
	}
}
