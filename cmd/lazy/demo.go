package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"lazy/agent"
	"lazy/api"
	"lazy/client"
	"lazy/config"
	"lazy/daemon"
	"lazy/internal/logfile"
	"lazy/stubmodel"
)

// demoTasks are what the scripted agent does in the demo.
var demoTasks = []api.NewTaskArgs{
	{Code: "greeting", Prompt: "Add a Greeting function and use it from main.\n" +
		`@write greeting.go package main\n\nimport "strings"\n\n// Greeting greets name politely.\nfunc Greeting(name string) string {\n\tname = strings.TrimSpace(name)\n\tif name == "" {\n\t\tname = "world"\n\t}\n\treturn "Hello, " + name + "!"\n}\n` + "\n" +
		`@write main.go package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println(Greeting("reviewer"))\n}\n` + "\n" +
		"@commit Add Greeting and use it from main\n" +
		"@answer I added Greeting in greeting.go (trims the name, defaults to world) and call it from main."},
	{Code: "readme", Prompt: "Make the README explain how to run the project.\n" +
		`@write README.md # Demo project\n\nA throwaway project made by lazy demo.\n\n## Run\n\n    go run .\n\nIt prints a greeting.\n` + "\n" +
		"@commit Explain how to run the project\n" +
		"@answer The README now says how to run the project and what it prints."},
}

func (a *app) demoCmd() *cobra.Command {
	var keep bool
	c := &cobra.Command{
		Use:   "demo",
		Short: "Try lazy: a throwaway project, a stub model, a scripted agent, two tasks to review",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return a.demo(cmd.Context(), keep) },
	}
	c.Flags().BoolVar(&keep, "keep", false, "keep the throwaway directory after Ctrl-C")
	return c
}

func (a *app) demo(ctx context.Context, keep bool) error {
	say := func(format string, args ...any) { fmt.Fprintf(a.errOut, "demo: "+format+"\n", args...) }
	base, err := os.MkdirTemp("", "lazy-demo-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(base)
	}
	home := filepath.Join(base, "home")
	root := filepath.Join(base, "project")
	say("throwaway project at %s", root)
	if err := demoProject(root); err != nil {
		return err
	}

	stub := stubmodel.New()
	// the demo's question is answered by the model (the stub), so the
	// reviewer's thread shows the question as asked, no directive in it
	reply := stub.Reply
	stub.Reply = func(lastUser string) string {
		if strings.Contains(lastUser, demoQuestion) {
			return demoAnswer
		}
		return reply(lastUser)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("stub upstream: %w", err)
	}
	stubSrv := &http.Server{Handler: stub, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = stubSrv.Serve(ln) }()
	defer stubSrv.Close()
	say("stub model upstream on http://%s", ln.Addr())

	var r [16]byte
	_, _ = rand.Read(r[:])
	if err := os.MkdirAll(filepath.Join(home, "credentials"), 0o700); err != nil {
		return err
	}
	// a made-up "real" credential: agents only ever see a placeholder of it
	if err := os.WriteFile(filepath.Join(home, "credentials", "provider"), []byte("sk-ant-api03-demo"+hex.EncodeToString(r[:])+"\n"), 0o600); err != nil {
		return err
	}
	// the demo sandboxes its scripted agent where bubblewrap works, and
	// runs it as a plain process elsewhere, saying so (and the dashboard's
	// warning says how to sandbox it)
	runner := "auto"
	if err := agent.ProbeBwrap(""); err != nil {
		runner = "process"
		say("running unsandboxed because %s; to sandbox the agents, apt-get install bubblewrap and run the demo again", bwrapWhy(err))
	} else {
		say("agents run sandboxed (bubblewrap)")
	}
	cfg := fmt.Sprintf("[agent]\ndriver = \"script\"\nrunner = %q\n\n[proxy]\nupstream = \"http://%s\"\ncredential = \"provider\"\n", runner, ln.Addr())
	if err := os.WriteFile(filepath.Join(root, ".lazy", "config.toml"), []byte(cfg), 0o644); err != nil {
		return err
	}

	// the demo's own throwaway home and settings, whatever LAZY_HOME or
	// LAZY_<SECTION>__<KEY> the user has set: nothing of theirs is read or
	// written, and nothing is left behind
	var env []string
	for _, kv := range a.environ {
		if !strings.HasPrefix(kv, "LAZY_") {
			env = append(env, kv)
		}
	}
	env = append(env, "LAZY_HOME="+home)
	logFile, err := os.Create(filepath.Join(base, "daemon.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	d, err := daemon.Start(ctx, daemon.Options{Root: root, Environ: env, Log: slog.New(logfile.NewText(logFile, nil)), SelfExe: self})
	if err != nil {
		return err
	}
	defer func() { d.Stop(); <-d.Done() }()
	say("daemon up: dashboard %s, proxy %s", d.Info().BaseURL, d.Info().ProxyURL)

	for _, t := range demoTasks {
		res, err := d.Service().NewTask(ctx, t)
		if err != nil {
			return fmt.Errorf("create demo task %s: %w", t.Code, err)
		}
		say("task %s started (%s)", res.Task.Ref, res.Task.ID)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ts, err := d.Service().ListTasks(ctx)
		if err != nil {
			return err
		}
		blocked := 0
		for _, t := range ts {
			switch t.Status {
			case "blocked":
				blocked++
			case "failed":
				return fmt.Errorf("demo task %s failed: %s (log: %s)", t.Ref, t.FailReason, logFile.Name())
			}
		}
		if blocked == len(demoTasks) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the demo tasks did not finish within 2 minutes; see %s", logFile.Name())
		}
		say("waiting for the agent: %d of %d tasks done", blocked, len(demoTasks))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(500 * time.Millisecond):
		}
	}
	say("both tasks are blocked, waiting for your review")
	if err := demoConversation(ctx, d); err != nil {
		return err
	}
	tok, err := client.ReadToken(d.Paths().DashboardToken)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.out, "review: %s/review?token=%s\n", d.Info().BaseURL, tok)
	fmt.Fprintf(a.out, "cli: LAZY_HOME=%s lazy --project %s task list\n", home, root)
	if _, err := exec.LookPath("lazy"); err != nil {
		say("no lazy on PATH: install it with `go install ./cmd/lazy` (then it is in $(go env GOPATH)/bin), or write `go run ./cmd/lazy` for `lazy` in the line above")
	}
	say("open the URL above; press Ctrl-C to stop and clean up")
	<-ctx.Done()
	say("stopping")
	return nil
}

// demoConversation starts a review of the greeting task: a question the
// scripted agent answers, and a change request queued for the next unblock.
func demoConversation(ctx context.Context, d *daemon.Daemon) error {
	r := d.Review()
	if _, err := r.PostComment(ctx, "greeting", api.PostCommentArgs{Intent: "ask", File: "greeting.go", Line: 7, Side: "new",
		Body: demoQuestion}); err != nil {
		return fmt.Errorf("demo ask: %w", err)
	}
	if _, err := r.PostComment(ctx, "greeting", api.PostCommentArgs{Intent: "comment", File: "greeting.go", Line: 9, Side: "new",
		Body: "Please add a test for the blank-name case."}); err != nil {
		return fmt.Errorf("demo comment: %w", err)
	}
	return nil
}

// The demo's question, and the answer the stub model gives it.
const (
	demoQuestion = "Why default to \"world\" instead of returning an error?"
	demoAnswer   = "A greeting should never fail; \"world\" keeps main's output sensible when the name is blank."
)

// bwrapWhy is the probe's failure as the demo says it.
func bwrapWhy(err error) string {
	if strings.Contains(err.Error(), "not installed") {
		return "bwrap is not installed"
	}
	return err.Error()
}

func demoProject(root string) error {
	files := map[string]string{
		"README.md": "# Demo project\n\nTODO: say what this is.\n",
		"main.go":   "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n",
		"go.mod":    "module demo\n\ngo 1.22\n",
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(root, ".lazy"), 0o755); err != nil {
		return err
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"},
		{"-c", "user.name=lazy demo", "-c", "user.email=demo@lazy.invalid", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "Initial commit"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", args[0], err, out)
		}
	}
	return nil
}

func (a *app) stubUpstreamCmd() *cobra.Command {
	var listen string
	c := &cobra.Command{
		Use:   "stub-upstream [--listen 127.0.0.1:PORT]",
		Short: "Serve the offline stub model (the demo's) until Ctrl-C, to try lazy with no provider",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := config.CheckLoopback(listen); err != nil {
				return usageError{fmt.Errorf("--listen: %w (the stub answers on loopback only)", err)}
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listen on %s: %w (pick another port with --listen)", listen, err)
			}
			srv := &http.Server{Handler: stubmodel.New(), ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(a.out, "stub model upstream on http://%s (Ctrl-C stops it)\n", ln.Addr())
			fmt.Fprintf(a.out, "in .lazy/config.toml:\n  [agent]\n  driver = \"script\"\n  [proxy]\n  upstream = \"http://%s\"\n  credential = \"provider\"\n", ln.Addr())
			fmt.Fprintln(a.out, "and any made-up key in the provider credential file (the stub checks none)")
			go func() {
				<-cmd.Context().Done()
				_ = srv.Close()
			}()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	c.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "address to serve on (loopback)")
	return c
}
