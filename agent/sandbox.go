package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"lazy/agent/forwarder"
)

// The bwrap sandbox is built from an allowlist (CONTRACT §13): an empty
// root with the system directories read-only, the agent's installation,
// sandbox.read_only, the worktree (read-only in an ask turn), the task's
// repository, a private home, a size-capped /tmp and /dev/shm, the proxy
// socket; nothing else of the host. Inside, the agent is uid SandboxUID in
// a user namespace of its own, with no capabilities, no_new_privs, no
// further user namespaces and the seccomp filter of seccomp.go — whoever
// runs the daemon, root included.
//
// Whoever runs the daemon, that user is the one the sandbox's uid maps to
// (bwrap maps the sandbox's uid to the caller's): for a daemon run as root,
// files root owns count as the agent's own. So a system file that an
// ordinary user of the machine could not read (/etc/shadow, host keys,
// /etc/ssl/private) is masked: the sandbox shows the system as any
// unprivileged user sees it.

// SandboxUID and SandboxGID are the agent's ids inside the sandbox.
const (
	SandboxUID = 1000
	SandboxGID = 1000
)

// SystemDirs are shown read-only in every sandbox (a merged-/usr link stays
// a link).
var SystemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}

// Limits bound one sandbox (config [sandbox]).
type Limits struct {
	OpenFiles uint64 // RLIMIT_NOFILE of every process
	Procs     uint64 // RLIMIT_NPROC (processes and threads of the sandbox's user namespace), and the cgroup's pids.max
	Memory    uint64 // bytes: the sandbox's cgroup (see cgroup.go), else RLIMIT_AS of every process (0: none)
	TmpSize   uint64 // bytes of /tmp and /dev/shm (tmpfs, in host memory; 0: 512 MiB)
}

// DefaultTmpSize caps /tmp when Limits.TmpSize is 0.
const DefaultTmpSize = 512 << 20

// rlimits are the forwarder's --rlimit values.
func (l Limits) rlimits() []string {
	var out []string
	if l.OpenFiles > 0 {
		out = append(out, "nofile="+strconv.FormatUint(l.OpenFiles, 10))
	}
	if l.Procs > 0 {
		out = append(out, "nproc="+strconv.FormatUint(l.Procs, 10))
	}
	if l.Memory > 0 {
		out = append(out, "as="+strconv.FormatUint(l.Memory, 10))
	}
	return out
}

// Describe says the limits in one line, for `lazy daemon status`; how
// says how the memory bound is enforced.
func (l Limits) Describe(how string) string {
	mem := "no memory bound"
	if l.Memory > 0 {
		mem = "memory " + sizeString(l.Memory) + " " + how
	}
	tmp := l.TmpSize
	if tmp == 0 {
		tmp = DefaultTmpSize
	}
	return fmt.Sprintf("open files %d, processes %d, %s, /tmp %s", l.OpenFiles, l.Procs, mem, sizeString(tmp))
}

func sizeString(n uint64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// installRoots are the host paths that make up the agent's own
// installation: for a program inside an npm tree (claude, codex, gemini),
// the tree that holds its node_modules; otherwise the executable file
// itself, under the name it was called by and its real one. Paths under
// the system directories need nothing.
func installRoots(exe string) []string {
	if exe == "" {
		return nil
	}
	if !filepath.IsAbs(exe) {
		p, err := exec.LookPath(exe)
		if err != nil {
			return nil
		}
		exe = p
	}
	real, err := filepath.EvalSymlinks(exe)
	if err != nil {
		real = exe
	}
	var out []string
	for _, p := range []string{exe, real} {
		if i := strings.Index(p, "/node_modules/"); i > 0 {
			out = append(out, p[:i])
		} else {
			out = append(out, p)
		}
	}
	var kept []string
	for _, p := range dedupe(out) {
		if !underAny(p, SystemDirs) {
			kept = append(kept, p)
		}
	}
	return kept
}

// resolveCommand is argv[0] as an absolute path when the host's PATH finds
// it (the sandbox's PATH is the system one).
func resolveCommand(argv []string) []string {
	if len(argv) == 0 || filepath.IsAbs(argv[0]) {
		return argv
	}
	if p, err := exec.LookPath(argv[0]); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return append([]string{abs}, argv[1:]...)
		}
	}
	return argv
}

func underAny(p string, roots []string) bool {
	for _, r := range roots {
		if within(r, p) {
			return true
		}
	}
	return false
}

// within reports whether p is root or beneath it.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range in {
		if p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// masks caches, per shown root, its entries an ordinary user cannot read.
var masks sync.Map // root → *maskScan

type maskScan struct {
	once  sync.Once
	files []string
	dirs  []string
}

// maxMaskWalk bounds one root's walk; a root past it is masked whole only
// where it is not world-readable at the top (and the turn says so in the
// daemon's log through the walk's error).
const maxMaskWalk = 2_000_000

// privateEntries lists the entries beneath root that the world cannot
// read: files without o+r, directories without o+rx. Walked once per root
// per daemon (a few seconds for /usr on a cold cache; milliseconds after).
func privateEntries(root string) (files, dirs []string) {
	v, _ := masks.LoadOrStore(root, &maskScan{})
	m := v.(*maskScan)
	m.once.Do(func() {
		n := 0
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if n++; n > maxMaskWalk {
				return errors.New("too many entries")
			}
			if err != nil {
				if d != nil && d.IsDir() && p != root {
					m.dirs = append(m.dirs, p)
					return filepath.SkipDir
				}
				return nil
			}
			t := d.Type()
			if t&fs.ModeSymlink != 0 {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return nil
			}
			mode := info.Mode().Perm()
			if d.IsDir() {
				if mode&0o005 != 0o005 {
					if p == root {
						return filepath.SkipDir
					}
					m.dirs = append(m.dirs, p)
					return filepath.SkipDir
				}
				return nil
			}
			if mode&0o004 == 0 {
				m.files = append(m.files, p)
			}
			return nil
		})
	})
	return m.files, m.dirs
}

// WarmMasks walks the system directories in the background, so the first
// turn does not wait for it.
func WarmMasks() {
	for _, d := range SystemDirs {
		go privateEntries(d)
	}
}

// mount is one bwrap operation on the sandbox's filesystem.
type mount struct {
	op, src, dst string
}

// sandboxMounts is the sandbox's filesystem, in bwrap's order: parents
// before children, masks after what they mask, the new root made
// read-only last.
func sandboxMounts(s Spec, exe string) ([]mount, error) {
	var ms []mount
	var shown []string // read-only roots whose private entries are masked
	for _, d := range SystemDirs {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(d)
			if err != nil {
				continue
			}
			ms = append(ms, mount{"--symlink", target, d})
			continue
		}
		ms = append(ms, mount{"--ro-bind", d, d})
		shown = append(shown, d)
	}
	tmp := s.Limits.TmpSize
	if tmp == 0 {
		tmp = DefaultTmpSize
	}
	size := strconv.FormatUint(tmp, 10)
	ms = append(ms, mount{"--proc", "", "/proc"}, mount{"--dev", "", "/dev"},
		mount{"--size", size, "/dev/shm"}, mount{"--remount-ro", "", "/dev"},
		mount{"--size", size, "/tmp"}, mount{"--size", "65536", "/run"})
	var ro []string
	if len(s.Command) > 0 {
		ro = append(ro, installRoots(s.Command[0])...)
	}
	for _, p := range s.Share {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%w: sandbox.read_only names %s, which cannot be shown: %v (create it or remove it from the list)", ErrUnavailable, p, err)
		}
		ro = append(ro, p)
	}
	ro = append(ro, s.Visible...)
	for _, p := range dedupe(ro) {
		ms = append(ms, mount{"--ro-bind", p, p})
		shown = append(shown, p)
	}
	dir := "--bind"
	if s.Ask {
		dir = "--ro-bind"
	}
	if s.Home != "" {
		ms = append(ms, mount{"--bind", s.Home, s.Home})
	}
	if s.Dir != "" {
		ms = append(ms, mount{dir, s.Dir, s.Dir})
	}
	for _, w := range s.Writable {
		// an ask turn changes nothing: the task's repository too is
		// read-only (a commit there would move its branch)
		ms = append(ms, mount{dir, w, w})
	}
	for _, r := range s.ReadOnly {
		ms = append(ms, mount{"--ro-bind", r, r})
	}
	// what an ordinary user could not read, and what must stay hidden
	// even where a shown root holds it
	for _, root := range shown {
		files, dirs := privateEntries(root)
		for _, d := range dirs {
			ms = append(ms, mount{"--tmpfs", "", d}, mount{"--remount-ro", "", d})
		}
		for _, f := range files {
			ms = append(ms, mount{"--ro-bind", "/dev/null", f})
		}
	}
	exposed := append(append(append([]string{}, shown...), s.Home, s.Dir), s.Writable...)
	for _, h := range s.Hide {
		if h != "" && underAny(h, exposed) && !underAny(s.Dir, []string{h}) {
			ms = append(ms, mount{"--tmpfs", "", h}, mount{"--remount-ro", "", h})
		}
	}
	for _, f := range s.HideFile {
		if f != "" && underAny(f, exposed) {
			if _, err := os.Stat(f); err == nil {
				ms = append(ms, mount{"--ro-bind", "/dev/null", f})
			}
		}
	}
	if exe != "" {
		ms = append(ms, mount{"--bind", s.ProxySocket, forwarder.Socket}, mount{"--ro-bind", exe, forwarder.Self})
	}
	ms = append(ms, mount{"--remount-ro", "", "/run"}, mount{"--remount-ro", "", "/"})
	return ms, nil
}

func (m mount) args() []string {
	switch m.op {
	case "--size":
		return []string{"--size", m.src, "--tmpfs", m.dst}
	case "--proc", "--dev", "--tmpfs", "--remount-ro":
		return []string{m.op, m.dst}
	}
	return []string{m.op, m.src, m.dst}
}
