package agent

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A sandbox's memory and process count are bounded as a whole by a control
// group of its own, where the machine lets the daemon make one: cgroup v2
// (memory.max, pids.max) or, on a machine still on v1, the v1 memory and
// pids controllers (memory.limit_in_bytes, pids.max). The group is made
// beneath the daemon's own (so the host's accounting of the daemon still
// holds the agents) for each turn, and removed after it. The process that
// becomes bwrap puts itself into the group before it execs (`lazy
// cgroup-exec`), so nothing of the sandbox ever runs outside it. Where no
// group can be made (no permission, no controller), the rlimits the
// forwarder sets are the bound, and `lazy daemon status` says so.

// cgroups is what this machine offers, found once.
type cgroups struct {
	kind string            // "v2", "v1" or "" (none usable)
	dirs map[string]string // controller ("memory", "pids"; "" for v2) → the daemon's own group's directory
	why  string            // why none is usable
}

var (
	cgOnce sync.Once
	cg     cgroups
)

// cgroupRoot is where the cgroup filesystems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

func detectCgroups() cgroups {
	cgOnce.Do(func() { cg = findCgroups(cgroupRoot, "/proc/self/cgroup") })
	return cg
}

// findCgroups reads which groups this process is in and whether it may make
// children there with the controllers a sandbox needs.
func findCgroups(root, self string) cgroups {
	f, err := os.Open(self)
	if err != nil {
		return cgroups{why: "no /proc/self/cgroup"}
	}
	defer f.Close()
	v1 := map[string]string{}
	v2 := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2 = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" || c == "pids" {
				v1[c] = filepath.Join(root, c, parts[2])
			}
		}
	}
	if len(v1) == 2 && writable(v1["memory"]) && writable(v1["pids"]) {
		return cgroups{kind: "v1", dirs: v1}
	}
	if v2 != "" {
		d := filepath.Join(root, v2)
		ctl, _ := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
		if strings.Contains(string(ctl), "memory") && strings.Contains(string(ctl), "pids") && writable(d) {
			return cgroups{kind: "v2", dirs: map[string]string{"": d}}
		}
		return cgroups{why: "cgroup v2 without the memory and pids controllers the daemon may use"}
	}
	return cgroups{why: "no cgroup the daemon may make groups in (run it as root, or delegate a cgroup v2 subtree to its user)"}
}

func writable(dir string) bool {
	probe, err := os.MkdirTemp(dir, ".lazy-probe-")
	if err != nil {
		return false
	}
	_ = os.Remove(probe)
	return true
}

// describe says how a sandbox's memory is bounded, for `lazy daemon status`.
func (c cgroups) describe() string {
	switch c.kind {
	case "v1", "v2":
		return "per sandbox (cgroup " + c.kind + ")"
	}
	return "per process (RLIMIT_AS: " + c.why + ")"
}

// turnGroup is one turn's control group: the cgroup.procs files the
// sandbox's first process joins, and how to remove it.
type turnGroup struct {
	procs []string
	dirs  []string
}

// v2 keeps the daemon out of the groups it makes: a v2 group with
// processes cannot give controllers to children, so the daemon moves into
// a leaf of its own group first, once.
var v2Leaf sync.Once

// newTurnGroup makes the group of one turn and sets its limits; nil when
// the machine offers none.
func newTurnGroup(name string, l Limits) (*turnGroup, error) {
	c := detectCgroups()
	if c.kind == "" || (l.Memory == 0 && l.Procs == 0) {
		return nil, nil
	}
	name = "lazy-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, name) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	g := &turnGroup{}
	set := func(dir, file string, v uint64) error {
		if v == 0 {
			return nil
		}
		return os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatUint(v, 10)), 0o644)
	}
	switch c.kind {
	case "v1":
		for _, ctl := range []string{"memory", "pids"} {
			d := filepath.Join(c.dirs[ctl], name)
			if err := os.Mkdir(d, 0o755); err != nil {
				g.remove()
				return nil, fmt.Errorf("make the sandbox's %s cgroup: %w", ctl, err)
			}
			g.dirs = append(g.dirs, d)
			g.procs = append(g.procs, filepath.Join(d, "cgroup.procs"))
		}
		if err := set(g.dirs[0], "memory.limit_in_bytes", l.Memory); err != nil {
			g.remove()
			return nil, fmt.Errorf("bound the sandbox's memory: %w", err)
		}
		if err := set(g.dirs[1], "pids.max", l.Procs); err != nil {
			g.remove()
			return nil, fmt.Errorf("bound the sandbox's processes: %w", err)
		}
	case "v2":
		base := c.dirs[""]
		var err error
		v2Leaf.Do(func() { err = enterLeaf(base) })
		if err != nil {
			return nil, err
		}
		d := filepath.Join(base, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, fmt.Errorf("make the sandbox's cgroup: %w", err)
		}
		g.dirs, g.procs = []string{d}, []string{filepath.Join(d, "cgroup.procs")}
		if err := set(d, "memory.max", l.Memory); err != nil {
			g.remove()
			return nil, fmt.Errorf("bound the sandbox's memory: %w", err)
		}
		_ = set(d, "memory.swap.max", 1) // no swap beyond the bound
		if err := set(d, "pids.max", l.Procs); err != nil {
			g.remove()
			return nil, fmt.Errorf("bound the sandbox's processes: %w", err)
		}
	}
	return g, nil
}

// enterLeaf moves the daemon into base/lazy-daemon and gives base's
// children the memory and pids controllers.
func enterLeaf(base string) error {
	leaf := filepath.Join(base, "lazy-daemon")
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("make the daemon's own cgroup leaf: %w", err)
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fmt.Errorf("move the daemon into its cgroup leaf: %w", err)
	}
	if err := os.WriteFile(filepath.Join(base, "cgroup.subtree_control"), []byte("+memory +pids"), 0o644); err != nil {
		return fmt.Errorf("give the sandboxes' cgroups memory and pids: %w", err)
	}
	return nil
}

// remove deletes the group once its processes are gone (the turn's
// process group was killed; the kernel may take a moment to reap).
func (g *turnGroup) remove() {
	if g == nil {
		return
	}
	for _, d := range g.dirs {
		for i := 0; i < 50; i++ {
			if err := os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// MemoryBound says how a sandbox's memory is bounded on this machine.
func MemoryBound() string { return detectCgroups().describe() }
