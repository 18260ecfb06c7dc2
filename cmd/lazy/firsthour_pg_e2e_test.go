package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"lazy/gitx/gitxtest"
	"lazy/grain/etcdtest"
	"lazy/internal/testsvc"
	"lazy/store/pgtest"
)

// passwordPostgres starts a PostgreSQL server whose TCP logins need a
// password (scram-sha-256), as a packaged server's do, unlike pgtest's
// trust. It returns the port and a superuser connection over its socket.
func passwordPostgres(t *testing.T) (int, *pgx.Conn) {
	t.Helper()
	bin := pgtest.BinDir()
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("PostgreSQL is not installed: make test installs Debian's postgresql")
		}
		t.Skip("PostgreSQL is not installed")
	}
	dir, err := os.MkdirTemp("", "lazy-pgpw-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
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
	as := func(name string, args ...string) *exec.Cmd {
		if os.Geteuid() != 0 {
			return exec.Command(name, args...)
		}
		return exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", name}, args...)...)
	}
	port := testsvc.FreePort(t)
	if out, err := as(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-instructions").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	cmd := as(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", sock, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off")
	local := fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", sock, port)
	testsvc.Start(t, cmd, dir, "postgres", syscall.SIGINT, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, local)
		if err != nil {
			return err
		}
		return c.Close(context.Background())
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, local)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return port, c
}

// TestFirstHourTemplateClusterAndPassword (item 8): the config `lazy init`
// writes, with [cluster] uncommented as its comment and
// docs/SCALE-OUT.md say (the postgres backend and the documented dsn),
// starts a cluster member against a PostgreSQL server that wants a
// password, given as docs/GUIDE.md "Storage" says: a role made with a
// password and the password in the file PGPASSFILE names. Without that
// file the start refuses, naming storage.dsn.
func TestFirstHourTemplateClusterAndPassword(t *testing.T) {
	port, su := passwordPostgres(t)
	etcd := etcdtest.Start(t)
	const password = "correct horse battery"
	ctx := context.Background()
	// docs: createuser --pwprompt lazy && createdb -O lazy lazy
	if _, err := su.Exec(ctx, "CREATE ROLE lazy LOGIN PASSWORD '"+password+"'"); err != nil {
		t.Fatal(err)
	}
	if _, err := su.Exec(ctx, "CREATE DATABASE lazy OWNER lazy"); err != nil {
		t.Fatal(err)
	}

	p := newProject(t, "process")
	remote := filepath.Join(artifactDir(t, "remote"), "project.git")
	gitxtest.Git(t, p.root, "clone", "-q", "--bare", p.root, remote)
	gitxtest.Git(t, p.root, "remote", "add", "origin", remote)
	cfgPath := filepath.Join(p.root, ".lazy", "config.toml")
	if err := os.Remove(cfgPath); err != nil {
		t.Fatal(err)
	}
	p.lazy(0, "init")
	tmpl, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	body := uncommentTemplateCluster(t, string(tmpl))
	// this machine's addresses for the documented ones
	for old, repl := range map[string]string{
		"127.0.0.1:5432":                fmt.Sprintf("127.0.0.1:%d", port),
		`etcd = ["127.0.0.1:2379"]`:     fmt.Sprintf("etcd = [%q]", etcd.Endpoint),
		`advertise = "127.0.0.1:26500"`: `advertise = "127.0.0.1:0"`,
		"port_window = [26000, 26099]":  "port_window = [27100, 27199]",
	} {
		if !strings.Contains(body, old) {
			t.Fatalf("the template has no %q:\n%s", old, body)
		}
		body = strings.Replace(body, old, repl, 1)
	}
	if err := os.WriteFile(cfgPath, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, fmt.Sprintf(`dsn = "postgres://lazy@127.0.0.1:%d/lazy"`, port)) {
		t.Fatalf("the dsn is not the documented one:\n%s", body)
	}

	out, errs, code := p.run("daemon", "start")
	if code != 1 || !strings.Contains(errs, "storage") || strings.Contains(errs+out, password) {
		t.Fatalf("start with no password given: exit %d, want 1 naming the store\nstdout: %s\nstderr: %s", code, out, errs)
	}
	passfile := filepath.Join(t.TempDir(), "pgpass")
	if err := os.WriteFile(passfile, []byte(fmt.Sprintf("127.0.0.1:%d:lazy:lazy:%s\n", port, password)), 0o600); err != nil {
		t.Fatal(err)
	}
	p.env = append(p.env, "PGPASSFILE="+passfile)
	if out, errs, code := p.run("daemon", "start"); code != 0 {
		t.Fatalf("the template with [cluster] uncommented and the password in PGPASSFILE: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if st := p.lazy(0, "cluster", "status"); !strings.Contains(st, "cluster lazy-myproject: 1 members") || !strings.Contains(st, "store: ok") {
		t.Fatalf("cluster status:\n%s", st)
	}
}

// uncommentTemplateCluster switches [cluster] on in the init template as
// its comment says: the postgres backend with the dsn line, and the "# "
// taken off the [cluster] block's lines.
func uncommentTemplateCluster(t *testing.T, tmpl string) string {
	t.Helper()
	lines := strings.Split(tmpl, "\n")
	in, found := false, false
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, `backend = "sql"`):
			lines[i] = strings.Replace(l, `"sql"`, `"postgres"`, 1)
		case strings.HasPrefix(l, "# dsn = "):
			lines[i] = strings.TrimPrefix(l, "# ")
		case strings.HasPrefix(l, "# [cluster]"):
			in, found = true, true
			lines[i] = strings.TrimPrefix(l, "# ")
		case in && strings.HasPrefix(l, "# "):
			lines[i] = strings.TrimPrefix(l, "# ")
		default:
			in = false
		}
	}
	if !found {
		t.Fatal("the template has no commented [cluster] block")
	}
	return strings.Join(lines, "\n")
}
