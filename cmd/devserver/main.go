// Command devserver renders the daemon's own web handler in a throwaway
// process, as a client of the project's running daemon: its pages call the
// daemon's commands over the RPC, the commands the CLI calls. It
// never opens the store itself and is not a `lazy` command; start it with
// `npm run dev:server -- --project DIR --port N`. The stylesheet is composed
// from its parts on disk on every request, so an edit shows on reload.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"lazy/api"
	"lazy/client"
	"lazy/gitx"
	"lazy/httpapi"
	"lazy/views"
)

// DefaultPort is outside the daemon's port window.
const DefaultPort = 26124

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "dev:server: "+err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dev:server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	project := fs.String("project", "", "project directory (default: the git top level of the working directory)")
	port := fs.Int("port", DefaultPort, "port on 127.0.0.1")
	assets := fs.String("assets", filepath.Join("views", "static", "css"), "directory of the stylesheet parts, re-read on every request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *port < 1 || *port > 65535 {
		return fmt.Errorf("--port %d is not a port number", *port)
	}
	dir := *project
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		dir = wd
	}
	root, err := gitx.TopLevel(ctx, dir)
	if err != nil {
		return err
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	home, err := api.LazyHome(os.Environ())
	if err != nil {
		return err
	}
	paths := api.StatePaths(home, root)
	conn, err := client.Dial(paths)
	if err != nil {
		return fmt.Errorf("%w (the dev server is a client of the daemon and never opens the store itself)", err)
	}
	// the same login as the daemon's dashboard: its dashboard token, or the
	// auth token as a bearer
	dash, err := client.ReadToken(paths.DashboardToken)
	if err != nil {
		return err
	}
	bearer, err := client.ReadToken(paths.AuthToken)
	if err != nil {
		return err
	}
	if _, err := views.ComposeCSS(os.DirFS(*assets)); err != nil {
		return fmt.Errorf("%w: run from the repository root or pass --assets DIR", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	web, err := httpapi.New(httpapi.Deps{
		// the pages call the daemon's commands over its RPC, as the CLI does
		Call:       conn,
		Log:        log,
		CSS:        func() ([]byte, error) { return views.ComposeCSS(os.DirFS(*assets)) },
		NoStoreCSS: true,
		Bearer:     bearer, DashboardToken: dash,
		// the pages name the project, as the daemon's do
		Info: func() api.DaemonInfo { return api.DaemonInfo{Root: root} },
	})
	if err != nil {
		return err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(*port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("port %d on 127.0.0.1 is busy (%v): stop what holds it or pass --port N", *port, errors.Unwrap(err))
	}
	srv := &http.Server{Handler: web, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "dev:server: http://%s/ (project %s)\ndev:server: open http://%s/?token=%s\n", addr, root, addr, dash)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
