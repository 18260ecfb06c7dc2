package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The first hour of a new user (issue 25, items 6, 7, 8, 12, 13): each
// test follows a step of the README on a repository it makes, with the
// real daemon, git and bwrap, and fails if the old behaviour comes back.

// pathWithout is a PATH holding every program of the system's but name:
// a directory of links to /usr/bin (where Debian installs bwrap) minus
// name, then the rest of the system's directories. Linking name into the
// returned directory "installs" it.
func pathWithout(t *testing.T, name string) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	ents, err := os.ReadDir("/usr/bin")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == name {
			continue
		}
		if err := os.Symlink(filepath.Join("/usr/bin", e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	// the agent's PATH is the daemon's: inside a sandbox only the system's
	// directories are seen, so git is also found at its own place there
	path = dir + ":/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/lib/git-core"
	for _, d := range filepath.SplitList(path)[1:] {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			t.Skipf("%s is also installed in %s: cannot hide it", name, d)
		}
	}
	return dir, path
}

// withEnv replaces (or adds) one variable of env.
func withEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// needBwrap skips where bubblewrap cannot sandbox (fails under CI=true).
func needBwrap(t *testing.T) string {
	t.Helper()
	bw, err := exec.LookPath("bwrap")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("bwrap is not installed: make test installs bubblewrap")
		}
		t.Skip("bwrap is not installed")
	}
	return bw
}

// TestFirstHourSandboxInstalledLater (item 6): a user starts the daemon
// before installing bubblewrap. The status says what the sandbox needs,
// `task new` refuses (exit 1) and makes nothing; once bwrap is installed
// (linked into the daemon's PATH) the running daemon uses it — for the
// status, for `task new`, and for a turn of a task made before — with no
// restart.
func TestFirstHourSandboxInstalledLater(t *testing.T) {
	bwrap := needBwrap(t)
	dir, path := pathWithout(t, "bwrap")
	p := newProject(t, "") // the default runner: auto
	p.env = withEnv(p.env, "PATH", path)
	install := func() {
		t.Helper()
		if err := os.Symlink(bwrap, filepath.Join(dir, "bwrap")); err != nil {
			t.Fatal(err)
		}
	}
	uninstall := func() {
		t.Helper()
		if err := os.Remove(filepath.Join(dir, "bwrap")); err != nil {
			t.Fatal(err)
		}
	}

	out, errs, code := p.run("daemon", "start")
	if code != 0 {
		t.Fatalf("daemon start: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "sandbox: unavailable: bwrap is not installed") || !strings.Contains(out, "apt-get install bubblewrap") || !strings.Contains(out, "turns will be refused") {
		t.Fatalf("the status does not say what the sandbox needs:\n%s", out)
	}
	out, errs, code = p.run("task", "new", "--code", "early", "-m", writeAndCommit)
	if code != 1 || !strings.Contains(errs, "no task was created") || !strings.Contains(errs, "apt-get install bubblewrap") {
		t.Fatalf("task new without a sandbox: exit %d, want 1 with the fix\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if out := p.lazy(0, "task", "list"); !strings.Contains(out, "no tasks yet") {
		t.Fatalf("a refused task new left a task:\n%s", out)
	}
	if b, err := exec.Command("git", "-C", p.root, "branch", "--list", "lazy/*").Output(); err != nil || strings.TrimSpace(string(b)) != "" {
		t.Fatalf("a refused task new left a branch: %q %v", b, err)
	}

	install()
	if out := p.lazy(0, "daemon", "status"); !strings.Contains(out, "sandbox: bwrap: uid 1000") {
		t.Fatalf("after installing bwrap the status still says:\n%s", out)
	}
	p.lazy(0, "task", "new", "--code", "later", "-m", writeAndCommit)
	p.waitStatus("later", "blocked")

	// a daemon that started with no sandbox, and a turn asked for after
	// bwrap came: the turn itself probes again, and runs sandboxed
	p.lazy(0, "daemon", "stop")
	uninstall()
	p.lazy(0, "daemon", "start")
	install()
	p.lazy(0, "unblock", "later", "-m", "@write again.txt again\\n\n@commit again\n@answer again")
	ti := p.waitStatus("later", "blocked")
	if ti.Turns < 2 {
		t.Fatalf("the unblock's turn did not run: %+v", ti)
	}
	if out := p.lazy(0, "daemon", "status"); !strings.Contains(out, "sandbox: bwrap: uid 1000") {
		t.Fatalf("after the turn the status says:\n%s", out)
	}
}
