// Package inventory lists, from inside a sandbox, what the sandbox has:
// its user and capabilities, its mounts, the paths it can read under the
// trees a host keeps its secrets in, every directory it can write, every
// Unix socket it can reach, its limits, and whether the calls that lead
// out of a sandbox fail. Tests hold the list against an allowlist, so a
// way out nobody has thought of yet fails them too (`lazy
// sandbox-inventory` prints it as JSON).
//
// It only looks: it creates and removes one probe file per writable
// directory, and calls each probed syscall in a way that does nothing
// where it succeeds.
package inventory

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Inventory is what one sandbox has.
type Inventory struct {
	Status   map[string]string `json:"status"`    // /proc/self/status: Uid, Gid, Cap*, NoNewPrivs, Seccomp
	UIDMap   string            `json:"uid_map"`   // /proc/self/uid_map
	Mounts   []string          `json:"mounts"`    // mount points, from /proc/self/mountinfo
	Readable []string          `json:"readable"`  // entries that open for reading beneath the probed roots
	Writable []string          `json:"writable"`  // directories a file can be created in
	Sockets  []string          `json:"sockets"`   // Unix sockets: socket files found, and /proc/net/unix names
	Limits   map[string]uint64 `json:"limits"`    // soft rlimits: nofile, nproc, as
	TmpBytes uint64            `json:"tmp_bytes"` // the size of /tmp's filesystem
	Syscalls map[string]string `json:"syscalls"`  // name → "allowed" or the error it failed with
	Errors   []string          `json:"errors,omitempty"`
}

// ReadRoots are the trees whose readable entries are listed: where a host
// keeps homes, service data and mounts.
var ReadRoots = []string{"/root", "/home", "/var", "/srv", "/mnt", "/media", "/boot"}

// maxWalk bounds each walk; an inventory cut short says so in Errors.
const maxWalk = 400_000

// Take lists what this process's sandbox has; extra are more trees whose
// readable entries to list (e.g. where the host keeps the lazy home).
func Take(extra ...string) Inventory {
	inv := Inventory{Status: map[string]string{}, Limits: map[string]uint64{}, Syscalls: map[string]string{}}
	inv.status()
	if b, err := os.ReadFile("/proc/self/uid_map"); err == nil {
		inv.UIDMap = strings.Join(strings.Fields(string(b)), " ")
	}
	inv.mounts()
	for _, r := range append(append([]string{}, ReadRoots...), extra...) {
		inv.readable(r)
	}
	inv.writableAndSockets()
	inv.unixSockets()
	for name, res := range map[string]int{"nofile": unix.RLIMIT_NOFILE, "nproc": unix.RLIMIT_NPROC, "as": unix.RLIMIT_AS} {
		var rl unix.Rlimit
		if err := unix.Getrlimit(res, &rl); err == nil {
			inv.Limits[name] = rl.Cur
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/tmp", &st); err == nil {
		inv.TmpBytes = st.Blocks * uint64(st.Bsize)
	}
	inv.syscalls()
	sort.Strings(inv.Mounts)
	sort.Strings(inv.Readable)
	sort.Strings(inv.Writable)
	sort.Strings(inv.Sockets)
	return inv
}

// Write prints the inventory as JSON.
func (inv Inventory) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(inv)
}

func (inv *Inventory) fail(what string, err error) {
	inv.Errors = append(inv.Errors, what+": "+err.Error())
}

func (inv *Inventory) status() {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		inv.fail("status", err)
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		if k == "Uid" || k == "Gid" || strings.HasPrefix(k, "Cap") || k == "NoNewPrivs" || k == "Seccomp" {
			inv.Status[k] = strings.Join(strings.Fields(v), " ")
		}
	}
}

func (inv *Inventory) mounts() {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		inv.fail("mountinfo", err)
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 {
			inv.Mounts = append(inv.Mounts, unescape(fields[4]))
		}
	}
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			n := 0
			ok := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				n = n*8 + int(c-'0')
			}
			if ok {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// readable lists every entry beneath root that opens for reading (a
// directory that lists, a file that opens), without following links.
func (inv *Inventory) readable(root string) {
	n := 0
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if n++; n > maxWalk {
			inv.fail("readable", errors.New("walk cut short under "+root))
			return filepath.SkipAll
		}
		if err != nil {
			return nil // not listable: not readable
		}
		if d.Type()&fs.ModeSymlink != 0 {
			if _, err := os.Readlink(p); err == nil {
				inv.Readable = append(inv.Readable, p)
			}
			return nil
		}
		if d.IsDir() {
			inv.Readable = append(inv.Readable, p)
			return nil
		}
		if d.Type().IsRegular() {
			if f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0); err == nil {
				f.Close()
				inv.Readable = append(inv.Readable, p)
			}
		}
		return nil
	})
}

// writableAndSockets walks the whole tree but /proc and /sys: a directory
// where a probe file can be created is writable; a socket file is listed.
func (inv *Inventory) writableAndSockets() {
	n := 0
	_ = filepath.WalkDir("/", func(p string, d fs.DirEntry, err error) error {
		if n++; n > maxWalk {
			inv.fail("writable", errors.New("walk cut short"))
			return filepath.SkipAll
		}
		if err != nil {
			return nil
		}
		if p == "/proc" || p == "/sys" {
			return filepath.SkipDir
		}
		if d.Type()&fs.ModeSocket != 0 {
			inv.Sockets = append(inv.Sockets, p)
			return nil
		}
		if !d.IsDir() {
			return nil
		}
		probe := filepath.Join(p, ".lazy-inventory-probe")
		fd, err := unix.Open(probe, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW, 0o600)
		if err == nil {
			unix.Close(fd)
			_ = unix.Unlink(probe)
			inv.Writable = append(inv.Writable, p)
		}
		return nil
	})
}

// unixSockets adds the named sockets of this network namespace.
func (inv *Inventory) unixSockets() {
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		return // no /proc/net here: the walk's socket files stand
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 8 {
			inv.Sockets = append(inv.Sockets, fields[7])
		}
	}
	inv.Sockets = dedupe(inv.Sockets)
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	out := in[:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// syscalls tries each call that leads out of a sandbox, harmlessly.
func (inv *Inventory) syscalls() {
	res := func(name string, err error) {
		if err == nil {
			inv.Syscalls[name] = "allowed"
		} else {
			inv.Syscalls[name] = err.Error()
		}
	}
	dir, err := os.MkdirTemp("", "inv")
	if err == nil {
		defer os.RemoveAll(dir)
		err = unix.Mount("none", dir, "tmpfs", 0, "size=4k")
		if err == nil {
			_ = unix.Unmount(dir, 0)
		}
		res("mount", err)
		err = unix.Mount("/", dir, "", unix.MS_BIND, "")
		if err == nil {
			_ = unix.Unmount(dir, 0)
		}
		res("mount_bind_root", err)
	} else {
		inv.fail("mount probe dir", err)
	}
	// unshare in a child would leave this process as it is; here a
	// success changes only this short-lived inventory process
	res("unshare_user", unix.Unshare(unix.CLONE_NEWUSER))
	res("unshare_mount", unix.Unshare(unix.CLONE_NEWNS))
	res("unshare_net", unix.Unshare(unix.CLONE_NEWNET))
	res("ptrace_attach_1", unix.PtraceAttach(1))
	_, err = unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
	res("keyctl", err)
	_, _, e := unix.Syscall(unix.SYS_BPF, 0, 0, 0)
	res("bpf", errnoErr(e))
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK}
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, 0)
	if err == nil {
		unix.Close(fd)
	}
	res("perf_event_open", err)
	_, _, e = unix.Syscall(unix.SYS_IO_URING_SETUP, 1, 0, 0)
	res("io_uring_setup", errnoErr(e))
	res("chroot", unix.Chroot("/"))
	res("setns", unix.Setns(0, 0))
}

func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}
