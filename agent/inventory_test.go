package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lazy/agent/inventory"
	"lazy/gitx"
)

// sandboxLayout is a daemon's state as it lays out one task's turn: a
// lazy home with the secrets a daemon keeps, the task's worktree, home and
// repository, and another task's, which must stay out of sight.
type sandboxLayout struct {
	lazyHome, worktree, home, repo, other string
	spec                                  Spec
}

func newSandboxLayout(t *testing.T, ask bool) sandboxLayout {
	t.Helper()
	e := newTurnEnv(t)
	lh := t.TempDir()
	state := filepath.Join(lh, "daemon", "proj-12345678")
	ctx := context.Background()
	// the project (e.worktree is a repository of its own) and two tasks of
	// it, each with its repository, made as the daemon makes them
	l := sandboxLayout{lazyHome: lh, worktree: filepath.Join(state, "worktrees", "fix"), home: filepath.Join(state, "agents", "fix", "home"),
		other: filepath.Join(state, "worktrees", "other")}
	for ref, wt := range map[string]string{"fix": l.worktree, "other": l.other} {
		if err := gitx.CreateTask(ctx, e.worktree, wt, "lazy/"+ref, "HEAD"); err != nil {
			t.Fatal(err)
		}
	}
	l.repo = gitx.TaskGitDir(l.worktree)
	for _, d := range []string{l.home, filepath.Join(lh, "credentials"), filepath.Join(state, "outbox")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for f, body := range map[string]string{
		filepath.Join(state, "auth-token"): "tok", filepath.Join(state, "dashboard-token"): "dash",
		filepath.Join(state, "proxy-tokens.json"): "{}", filepath.Join(lh, "credentials", "provider"): "sk-ant-real",
		filepath.Join(l.other, "secret.go"): "package other",
		// a turn's end the daemon keeps for the store (package actors' outbox)
		filepath.Join(state, "outbox", "t.json"): `{"version":1,"text":"held answer"}`,
	} {
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sp, err := gitx.ForSandbox(l.worktree, ask)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	l.spec = Spec{Command: []string{self, "sandbox-inventory"}, Args: []string{lh, "/etc"}, Dir: l.worktree, Home: l.home,
		Env: []string{"PATH=/usr/bin:/bin", "HOME=" + l.home}, Timeout: 2 * time.Minute, Ask: ask,
		Visible: sp.Visible, Writable: sp.Writable, ReadOnly: sp.ReadOnly,
		Hide: []string{lh}, Limits: Limits{OpenFiles: 1024, Procs: 256, Memory: 2 << 30, TmpSize: 16 << 20},
		ProxySocket: e.socket, ProxyPort: e.port, Self: self}
	return l
}

// TestSandboxInventory lists what a task's sandbox has, from inside, and
// holds every entry against the allowlist of CONTRACT §13: as root (CI)
// and again as an unprivileged user.
func TestSandboxInventory(t *testing.T) {
	requireBwrap(t)
	for _, ask := range []bool{false, true} {
		name := "work turn"
		if ask {
			name = "ask turn"
		}
		t.Run(name, func(t *testing.T) {
			l := newSandboxLayout(t, ask)
			out, err := Bwrap{}.Run(context.Background(), l.spec)
			if err != nil {
				t.Fatalf("%v\n%s", err, out.Combined())
			}
			var inv inventory.Inventory
			if err := json.Unmarshal(out.Stdout, &inv); err != nil {
				t.Fatalf("inventory: %v\n%s", err, out.Combined())
			}
			for _, bad := range checkInventory(l, inv) {
				t.Error(bad)
			}
		})
	}
	if os.Getuid() == 0 && os.Getenv("LAZY_INVENTORY_CHILD") == "" {
		t.Run("unprivileged user", runUnprivileged)
	}
}

// runUnprivileged runs this test again as nobody (uid 65534), from a copy
// of the test binary that user can run.
func runUnprivileged(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "lazy-unpriv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, tmp} {
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "agent.test")
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(exe, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	cmd := exec.Command(exe, "-test.run", "^TestSandboxInventory$", "-test.v", "-test.count=1")
	cmd.Dir = tmp
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + tmp, "TMPDIR=" + tmp, "LAZY_INVENTORY_CHILD=1", "CI=" + os.Getenv("CI")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("as uid 65534: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "--- PASS: TestSandboxInventory") || strings.Contains(out.String(), "SKIP") {
		t.Fatalf("as uid 65534, the inventory did not run and pass:\n%s", out.String())
	}
	t.Logf("as uid 65534:\n%s", out.String())
}

// checkInventory holds an inventory against the allowlist.
func checkInventory(l sandboxLayout, inv inventory.Inventory) []string {
	var bad []string
	s := l.spec
	if len(inv.Errors) > 0 {
		bad = append(bad, "the inventory was incomplete: "+strings.Join(inv.Errors, "; "))
	}
	// who it is: a non-root uid, no capabilities, no privilege gain, seccomp
	want := map[string]string{"Uid": "1000 1000 1000 1000", "Gid": "1000 1000 1000 1000", "CapInh": "0000000000000000",
		"CapPrm": "0000000000000000", "CapEff": "0000000000000000", "CapBnd": "0000000000000000", "CapAmb": "0000000000000000",
		"NoNewPrivs": "1", "Seccomp": "2"}
	for k, v := range want {
		if inv.Status[k] != v {
			bad = append(bad, "status "+k+" = "+inv.Status[k]+", want "+v)
		}
	}
	// every call that leads out fails, refused (EPERM), not merely wrong
	for name, res := range inv.Syscalls {
		if res != "operation not permitted" {
			bad = append(bad, "syscall "+name+": "+res+", want operation not permitted")
		}
	}
	if len(inv.Syscalls) < 10 {
		bad = append(bad, "too few syscalls probed")
	}
	// limits
	if inv.Limits["nofile"] == 0 || inv.Limits["nofile"] > s.Limits.OpenFiles {
		bad = append(bad, "RLIMIT_NOFILE "+itoa(int(inv.Limits["nofile"])))
	}
	if inv.Limits["nproc"] == 0 || inv.Limits["nproc"] > s.Limits.Procs {
		bad = append(bad, "RLIMIT_NPROC "+itoa(int(inv.Limits["nproc"])))
	}
	// memory: the sandbox's cgroup where the daemon may make one (held by
	// TestSandboxMemoryBound), else each process's address space
	if detectCgroups().kind == "" && (inv.Limits["as"] == 0 || inv.Limits["as"] > s.Limits.Memory) {
		bad = append(bad, "RLIMIT_AS "+itoa(int(inv.Limits["as"])))
	}
	if inv.TmpBytes == 0 || inv.TmpBytes > s.Limits.TmpSize {
		bad = append(bad, "/tmp holds "+itoa(int(inv.TmpBytes))+" bytes, over the cap")
	}
	// what it shows
	shown := []string{s.Dir, s.Home}
	shown = append(append(append(append(shown, s.Writable...), s.Visible...), s.Share...), s.ReadOnly...)
	shown = append(shown, installRoots(s.Command[0])...)
	mountOK := append([]string{"/", "/proc", "/dev", "/tmp", "/run", "/run/lazy/proxy.sock", "/run/lazy/lazy"}, shown...)
	mountOK = append(mountOK, s.ReadOnly...)
	for _, d := range SystemDirs {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			mountOK = append(mountOK, d)
		}
	}
	for _, m := range inv.Mounts {
		switch {
		case contains(mountOK, m), strings.HasPrefix(m, "/proc/"), strings.HasPrefix(m, "/dev/"):
		case underAny(m, SystemDirs) && !worldReadable(m):
			// a mask over what an ordinary user could not read
		default:
			bad = append(bad, "mount "+m+" is not on the allowlist")
		}
	}
	// readable beneath homes, /var, the lazy home: only what is shown, and
	// the directories bwrap made to mount it on
	for _, p := range inv.Readable {
		if underAny(p, shown) || isAncestor(p, shown) {
			continue
		}
		if within("/etc", p) {
			if !worldReadable(p) && !contains(inv.Mounts, p) { // a mask is an empty mount
				bad = append(bad, "readable "+p+": an ordinary user of the host cannot read it")
			}
			continue
		}
		bad = append(bad, "readable "+p+" is not on the allowlist")
	}
	// writable: the home, the worktree (a work turn), the task repository
	// but its config and hooks, /tmp and /dev/shm
	writeOK := []string{s.Home, "/tmp", "/dev/shm"}
	if !s.Ask {
		writeOK = append(append(writeOK, s.Dir), s.Writable...)
	}
	for _, w := range inv.Writable {
		if !underAny(w, writeOK) || underAny(w, s.ReadOnly) {
			bad = append(bad, "writable "+w+" is not on the allowlist")
		}
	}
	if !s.Ask && !contains(inv.Writable, s.Dir) {
		bad = append(bad, "the worktree is not writable in a work turn")
	}
	// sockets: its own proxy socket only
	for _, so := range inv.Sockets {
		if so != "/run/lazy/proxy.sock" {
			bad = append(bad, "socket "+so+" is not on the allowlist")
		}
	}
	return bad
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// isAncestor: p is a directory above one of roots.
func isAncestor(p string, roots []string) bool {
	for _, r := range roots {
		if r != p && within(p, r) {
			return true
		}
	}
	return false
}

// worldReadable reports whether every user of the host can read p: each
// directory above it can be entered, and p itself read.
func worldReadable(p string) bool {
	for d := filepath.Dir(p); d != "/"; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return false
	}
	if fi.IsDir() {
		return fi.Mode().Perm()&0o005 == 0o005
	}
	return fi.Mode()&os.ModeSymlink != 0 || fi.Mode().Perm()&0o004 != 0
}

// TestSandboxMemoryBound: where the daemon may make control groups (root
// here, as on CI), a sandbox's memory is bounded as a whole: an agent that
// allocates past the bound is killed, one within it runs; the group is gone
// after the turn. Elsewhere (a machine whose cgroups the daemon may not
// write, which is not something make test can install) the per-process
// rlimit stands, held by the inventory, and this test says why it skips.
func TestSandboxMemoryBound(t *testing.T) {
	requireBwrap(t)
	if c := detectCgroups(); c.kind == "" {
		t.Skip(c.why)
	}
	e := newTurnEnv(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(mib string) (Outcome, error) {
		home := filepath.Join(t.TempDir(), "home")
		return Bwrap{}.Run(context.Background(), Spec{Name: "mem", Command: []string{self, "sandbox-alloc", mib}, Dir: t.TempDir(), Home: home,
			Env: []string{"PATH=/usr/bin:/bin"}, Timeout: time.Minute, Limits: Limits{OpenFiles: 1024, Procs: 256, Memory: 256 << 20},
			ProxySocket: e.socket, ProxyPort: e.port, Self: self})
	}
	if out, err := run("64"); err != nil || !strings.Contains(string(out.Stdout), "allocated 64 MiB") {
		t.Fatalf("64 MiB under a 256 MiB bound: %v\n%s", err, out.Combined())
	}
	out, err := run("600")
	if err == nil || strings.Contains(string(out.Stdout), "allocated") {
		t.Fatalf("600 MiB under a 256 MiB bound must be killed: %v\n%s", err, out.Combined())
	}
	left, _ := filepath.Glob(filepath.Join(detectCgroups().dirs["memory"], "lazy-mem-*"))
	if v2 := detectCgroups().dirs[""]; v2 != "" {
		left, _ = filepath.Glob(filepath.Join(v2, "lazy-mem-*"))
	}
	if len(left) > 0 {
		t.Errorf("the turns' cgroups were not removed: %v", left)
	}
}
