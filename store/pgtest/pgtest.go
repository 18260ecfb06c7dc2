// Package pgtest starts a PostgreSQL server of a test's own: Debian's
// postgresql binaries, a data directory in a temporary folder, loopback only.
// As root the server runs as the user nobody (PostgreSQL refuses root).
// Without the binaries a test skips, or fails when CI=true (make test
// installs them).
package pgtest

import (
	"context"
	"fmt"
	"lazy/internal/testsvc"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is one running PostgreSQL server.
type Server struct {
	port int
	cmd  *exec.Cmd
	n    atomic.Int64
	// what Start ran, for Restart
	bin, dir, data, sock string
}

// BinDir finds the directory of Debian's postgres and initdb ("" if none).
func BinDir() string {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	sort.Slice(matches, func(i, j int) bool { return version(matches[i]) > version(matches[j]) })
	for _, m := range matches {
		if _, err := os.Stat(filepath.Join(filepath.Dir(m), "initdb")); err == nil {
			return filepath.Dir(m)
		}
	}
	return ""
}

func version(bin string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(bin))))
	return n
}

// Start runs a fresh server for t and stops it when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := BinDir()
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres): make test installs Debian's postgresql")
		}
		t.Skip("PostgreSQL is not installed: apt-get install postgresql (make test does)")
	}
	dir, err := os.MkdirTemp("", "lazy-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// the server's user must reach its folders: as root that is nobody
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	for _, d := range []string{data, sock} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			if err := os.Chown(d, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := &Server{port: testsvc.FreePort(t), bin: bin, dir: dir, data: data, sock: sock}
	initdb := s.command(filepath.Join(bin, "initdb"), "-D", data, "-U", "lazy", "--auth=trust", "-E", "UTF8", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	s.start(t)
	return s
}

// start runs the server on its data directory and waits until it answers.
func (s *Server) start(t testing.TB) {
	t.Helper()
	// fsync off: the tests check what lazy does, not the server's disk
	s.cmd = s.command(filepath.Join(s.bin, "postgres"), "-D", s.data, "-p", strconv.Itoa(s.port), "-k", s.sock,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=200")
	testsvc.Start(t, s.cmd, s.dir, "postgres", syscall.SIGINT, func() error { // SIGINT: fast shutdown
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, s.DSN("postgres"))
		if err != nil {
			return err
		}
		return c.Close(context.Background())
	})
}

// Stop shuts the server down (fast shutdown: every connection is cut, new
// ones are refused), as an outage of the store would; Restart brings it
// back on the same port and data.
func (s *Server) Stop() { testsvc.Stop(s.cmd, syscall.SIGINT) }

// PID is the server's process (the postmaster; its backends are its
// children).
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Restart starts a server Stop stopped.
func (s *Server) Restart(t testing.TB) { s.start(t) }

// command runs name as the server's user.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	if os.Geteuid() != 0 {
		return exec.Command(name, args...)
	}
	return exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", name}, args...)...)
}

// DSN is the URL of database db on this server.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://lazy@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// NewDatabase creates an empty database and returns its DSN.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("lazy_%d", s.n.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	return s.DSN(name)
}
