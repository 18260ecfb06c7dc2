// Command lazy is the CLI of the lazy daemon: it finds the project, talks to
// the project's daemon over RPC, or runs the daemon itself.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"lazy/agent/forwarder"
	"lazy/agent/inventory"
	"lazy/api"
	"lazy/client"
	"lazy/config"
	"lazy/gitx"
	"lazy/scriptagent"
	"lazy/version"
)

func main() {
	// the scripted agent is this binary too; it keeps the claude argv contract
	if len(os.Args) > 1 && os.Args[1] == "script-agent" {
		os.Exit(scriptagent.Main(os.Args[2:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
	}
	// the forwarder inside an agent's sandbox: the proxy is its only way out
	if len(os.Args) > 1 && os.Args[1] == "sandbox-exec" {
		os.Exit(forwarder.Main(os.Args[2:], os.Stderr))
	}
	// the process that becomes bwrap, joining the turn's control group first
	if len(os.Args) > 1 && os.Args[1] == "cgroup-exec" {
		os.Exit(forwarder.CgroupExec(os.Args[2:], os.Stderr))
	}
	// what a sandbox has, listed from inside it (see agent/inventory)
	if len(os.Args) > 1 && os.Args[1] == "sandbox-inventory" {
		if err := inventory.Take(os.Args[2:]...).Write(os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a command line that makes no sense (exit 2).
type usageError struct{ error }

// app carries what every command needs.
type app struct {
	project string
	json    bool
	out     io.Writer
	errOut  io.Writer
	environ []string
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{out: stdout, errOut: stderr, environ: os.Environ()}
	root := &cobra.Command{
		Use:           "lazy",
		Short:         "Run AI coding agents on tasks, with a human reviewing every step",
		Version:       version.String(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("lazy {{.Version}}\n")
	root.PersistentFlags().StringVar(&a.project, "project", "", "project directory (default: the git top level of the working directory)")
	root.PersistentFlags().BoolVar(&a.json, "json", false, "print data as JSON")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
	})
	root.AddCommand(a.initCmd(), a.daemonCmd(), a.openCmd(), a.askCmd(), a.stubUpstreamCmd(), a.taskCmd(), a.commentCmd(), a.unblockCmd(), a.watchCmd(), a.actorsCmd(), a.demoCmd(),
		a.acceptCmd(), a.approveCmd(), a.syncCmd(), a.scopeCmd(), a.passphraseCmd(), a.clusterCmd())
	root.SuggestionsMinimumDistance = 2
	refuseUnknownSubcommands(root)
	a.completeTaskArgs(root)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ue usageError
	code := 1
	if errors.As(err, &ue) || isCobraUsage(err) {
		code = 2
	}
	if a.json {
		// a refusal is data too: one JSON object on stdout
		body := map[string]any{"error": oneLine(err.Error())}
		var ce *client.Error
		if errors.As(err, &ce) && len(ce.Remedy) > 0 {
			body["remedy"] = ce.Remedy
		}
		_ = printJSON(stdout, body)
		return code
	}
	fmt.Fprintln(stderr, "lazy: "+oneLine(err.Error()))
	return code
}

// refuseUnknownSubcommands makes every command that only groups others
// refuse an unknown subcommand (exit 2) instead of printing help and
// succeeding; with no argument it still prints its help.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return cmd.Help()
		}
	}
}

func oneLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func isCobraUsage(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "accepts ", "requires at least", "required flag", "invalid argument"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// rootDir is --project, or the git top level of the working directory.
func (a *app) rootDir(ctx context.Context) (string, error) {
	dir := a.project
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		dir = wd
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return "", fmt.Errorf("project directory %s does not exist", abs)
	}
	top, err := gitx.TopLevel(ctx, abs)
	if err != nil {
		return "", err
	}
	if resolved, err := filepath.EvalSymlinks(top); err == nil {
		top = resolved
	}
	return top, nil
}

func (a *app) paths(ctx context.Context) (api.Paths, error) {
	root, err := a.rootDir(ctx)
	if err != nil {
		return api.Paths{}, err
	}
	home, err := api.LazyHome(a.environ)
	if err != nil {
		return api.Paths{}, err
	}
	return api.StatePaths(home, root), nil
}

// client finds the project's running daemon.
func (a *app) client(ctx context.Context) (*client.Client, error) {
	p, err := a.paths(ctx)
	if err != nil {
		return nil, err
	}
	c, _, err := client.Discover(p)
	return c, err
}

// call runs one typed command on the project's daemon.
func call[A, R any](cmd *cobra.Command, a *app, c api.Cmd[A, R], args A) (R, error) {
	cl, err := a.client(cmd.Context())
	if err != nil {
		var zero R
		return zero, err
	}
	return client.Do(cmd.Context(), cl, c, args)
}

// printed prints v as JSON with --json, else the text format makes of args.
func (a *app) printed(v any, format string, args ...any) error {
	if a.json {
		return printJSON(a.out, v)
	}
	_, err := fmt.Fprintf(a.out, format, args...)
	return err
}

func (a *app) initCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Write a commented .lazy/config.toml if there is none",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, err := a.rootDir(cmd.Context())
			if err != nil {
				return err
			}
			path, wrote, err := config.WriteInit(root)
			if err != nil {
				return err
			}
			if wrote {
				fmt.Fprintf(a.out, "wrote %s\n", path)
			} else {
				fmt.Fprintf(a.out, "%s already exists; left as it is\n", path)
			}
			return nil
		},
	}
}
