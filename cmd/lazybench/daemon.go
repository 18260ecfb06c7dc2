package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"lazy/agent"
	"lazy/api"
	"lazy/daemon"
	"lazy/internal/logfile"
	"lazy/internal/memlimit"
	"lazy/proxy"
)

// benchBudget is the token budget set on the bench's task: large enough
// never to be used up, so every call takes the budget's hold and settles it.
const benchBudget = 1 << 40

// serveDaemon is what users run: a real daemon (daemon.Start) on a git
// project with the scripted agent, its log at info in a file, and one task
// whose agent sleeps in a running turn, so its grant is live. The task has
// a budget, so every call is held against it and settled; every call is a
// usage row and a traffic event; the response scrubber, the tripwires and
// the canary check are on. Agents run under runner = "process", so the
// placeholder is taken on the TCP listener (the load client is a process in
// no sandbox). It prints "ADDR <proxy address> <placeholder>...": the
// Anthropic task's, then the codex and the gemini task's when
// --openai-upstream and --gemini-upstream are given.
//
// LAZYBENCH_CPUPROFILE=FILE writes a CPU profile of the daemon from the
// moment it is ready until the process is told to stop (SIGTERM);
// LAZYBENCH_MEMPROFILE=FILE its allocations (pprof's allocs) at the stop,
// LAZYBENCH_MUTEXPROFILE=FILE its lock contention and blocking
// (FILE.mutex, FILE.block); LAZYBENCH_HEAPPROFILE=FILE the heap in use
// (pprof's heap) each time the process gets SIGUSR1, as FILE.1, FILE.2, ...,
// so a profile can be taken in the middle of a load; LAZYBENCH_MEMTRACE=1
// prints the live heap, the runtime's memory beside it and the soft memory
// limit (internal/memlimit) to stderr twice a second.
func serveDaemon(args []string) error {
	fs := flag.NewFlagSet("serve-daemon", flag.ExitOnError)
	up := fs.String("upstream", "", "upstream URL")
	openaiUp := fs.String("openai-upstream", "", "[proxy.openai] upstream URL: also a codex task (another origin than --upstream)")
	geminiUp := fs.String("gemini-upstream", "", "[proxy.gemini] upstream URL: also a gemini task (another origin than both)")
	_ = fs.Parse(args)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	base, err := os.MkdirTemp("", "lazybench-daemon-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	home, root := filepath.Join(base, "home"), filepath.Join(base, "project")
	if err := os.MkdirAll(filepath.Join(home, "credentials"), 0o700); err != nil {
		return err
	}
	for name, key := range map[string]string{"provider": realKey, "openai": realOpenAIKey, "gemini": realGeminiKey} {
		if err := os.WriteFile(filepath.Join(home, "credentials", name), []byte(key+"\n"), 0o600); err != nil {
			return err
		}
	}
	if err := benchProject(root); err != nil {
		return err
	}
	cfg := fmt.Sprintf("[daemon]\nport_window = [26900, 26999]\n[agent]\ndriver = \"script\"\nrunner = \"process\"\nturn_timeout = \"12h\"\n[proxy]\nupstream = %q\ncredential = \"provider\"\n", *up)
	if *openaiUp != "" {
		cfg += fmt.Sprintf("[proxy.openai]\nupstream = %q\ncredential = \"provider\"\n", *openaiUp)
	}
	if *geminiUp != "" {
		cfg += fmt.Sprintf("[proxy.gemini]\nupstream = %q\ncredential = \"provider\"\n", *geminiUp)
	}
	// the codex and gemini tasks' agents: a stand-in on the daemon's PATH
	// that sleeps in its turn (its grant is live; the load client makes
	// the calls), so neither client need be installed
	bin := filepath.Join(base, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	for _, name := range []string{agent.DefaultCommand("codex"), agent.DefaultCommand("gemini")} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\nexec sleep 43200\n"), 0o755); err != nil {
			return err
		}
	}
	if err := os.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH")); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, ".lazy", "config.toml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LAZY_") {
			env = append(env, kv)
		}
	}
	env = append(env, "LAZY_HOME="+home)
	logFile, err := os.OpenFile(filepath.Join(base, "daemon.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// as `lazy daemon start` logs: text, at info, to the log file, its
	// lines gathered into writes (internal/logfile)
	lines := logfile.New(logFile)
	defer lines.Close()
	log := slog.New(logfile.NewText(lines, &slog.HandlerOptions{Level: slog.LevelInfo}))
	memlimit.Follow(ctx, memlimit.Floor) // as lazy daemon start does
	if os.Getenv("LAZYBENCH_MEMTRACE") != "" {
		go func() {
			for range time.Tick(500 * time.Millisecond) {
				u := memlimit.Read()
				fmt.Fprintf(os.Stderr, "memtrace: live %.1f stacks %.1f nonheap %.1f limit %.1f MB\n", float64(u.Live)/(1<<20), float64(u.Stacks)/(1<<20), float64(u.NonHeap)/(1<<20), float64(debug.SetMemoryLimit(-1))/(1<<20))
			}
		}()
	}
	d, err := daemon.Start(ctx, daemon.Options{Root: root, Environ: env, Log: log, SelfExe: self})
	if err != nil {
		return fmt.Errorf("start the daemon: %w", err)
	}
	defer func() { d.Stop(); <-d.Done() }()
	// one task per protocol: the script agent's (Anthropic), and a codex
	// and a gemini task when their upstreams are given
	tasks := []struct{ driver, code, envVar string }{{"", "bench", agent.EnvAPIKey}}
	if *openaiUp != "" {
		tasks = append(tasks, struct{ driver, code, envVar string }{"codex", "bench-codex", agent.EnvOpenAIKey})
	}
	if *geminiUp != "" {
		tasks = append(tasks, struct{ driver, code, envVar string }{"gemini", "bench-gemini", agent.EnvGeminiAPIKey})
	}
	var phs []string
	for _, t := range tasks {
		res, err := d.Service().NewTask(ctx, api.NewTaskArgs{Prompt: "@sleep 12h", Code: t.code, BudgetTokens: benchBudget, Driver: t.driver})
		if err != nil {
			return fmt.Errorf("create the bench task %s: %w", t.code, err)
		}
		ph, err := waitGrant(api.StatePaths(home, root).ProxyTokens, res.Task.ID, t.envVar)
		if err != nil {
			return err
		}
		phs = append(phs, ph)
	}
	stopProfiles, _, err := startProfiles()
	if err != nil {
		return err
	}
	defer stopProfiles()
	if prof := os.Getenv("LAZYBENCH_MUTEXPROFILE"); prof != "" {
		runtime.SetMutexProfileFraction(5)
		runtime.SetBlockProfileRate(10_000) // a blocking event of 10 µs or more
		defer func() {
			for _, kind := range []string{"mutex", "block"} {
				if f, err := os.Create(prof + "." + kind); err == nil {
					_ = pprof.Lookup(kind).WriteTo(f, 0)
					f.Close()
				}
			}
		}()
	}
	if prof := os.Getenv("LAZYBENCH_MEMPROFILE"); prof != "" {
		defer func() {
			f, err := os.Create(prof)
			if err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	if prof := os.Getenv("LAZYBENCH_HEAPPROFILE"); prof != "" {
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		defer signal.Stop(usr1)
		go func() {
			for n := 1; ; n++ {
				select {
				case <-usr1:
				case <-ctx.Done():
					return
				}
				if f, err := os.Create(fmt.Sprintf("%s.%d", prof, n)); err == nil {
					_ = pprof.Lookup("heap").WriteTo(f, 0)
					f.Close()
				}
			}
		}()
	}
	if os.Getenv("LAZYBENCH_MEMSTATS") != "" {
		// where the daemon's anonymous memory is, at the stop (the load
		// is over by then; HeapSys is what the heap took at its peak, less
		// what was given back)
		defer func() {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			mb := func(n uint64) float64 { return float64(n) / (1 << 20) }
			fmt.Fprintf(os.Stderr, "lazybench serve-daemon: heap in use %.1f MB, heap from the OS %.1f MB (released %.1f), stacks %.1f MB, GC metadata %.1f MB, spans %.1f MB, other %.1f MB, Go runtime in all %.1f MB, GCs %d\n",
				mb(m.HeapInuse), mb(m.HeapSys), mb(m.HeapReleased), mb(m.StackSys), mb(m.GCSys), mb(m.MSpanSys), mb(m.OtherSys), mb(m.Sys), m.NumGC)
		}()
	}
	fmt.Printf("ADDR %s %s\n", strings.TrimPrefix(d.Info().ProxyURL, "http://"), strings.Join(phs, " "))
	select {
	case <-ctx.Done():
	case <-d.Done():
		return fmt.Errorf("the daemon stopped under the bench; its log: %s", filepath.Join(base, "daemon.log"))
	}
	return nil
}

// waitGrant waits for the task's model grant (the one minted for envVar)
// in the registry file and returns its placeholder.
func waitGrant(registry, taskID, envVar string) (string, error) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		gs, err := proxy.LoadGrants(registry)
		if err != nil {
			return "", err
		}
		for ph, g := range gs {
			if g.TaskID == taskID && g.EnvVar == envVar {
				return ph, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the bench task has no grant in %s after 60 s", registry)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// benchProject is a git repository with one commit and a .lazy directory.
func benchProject(root string) error {
	if err := os.MkdirAll(filepath.Join(root, ".lazy"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "README.md"), []byte("# bench\n"), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "README.md"},
		{"-c", "user.name=lazybench", "-c", "user.email=bench@lazy.invalid", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "Initial commit"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", args[0], err, out)
		}
	}
	return nil
}
