package config

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Sandbox is the task's own environment under the bwrap and docker runners
// (CONTRACT §13): what it may read beyond the system directories, and its
// limits.
type Sandbox struct {
	// ReadOnly lists host paths shown read-only inside every sandbox
	// (module and package caches, toolchains kept in a home). Nothing else
	// of a home is shown.
	ReadOnly []string `koanf:"read_only"`
	// Env is extra "NAME=value" variables for every agent process (e.g.
	// GOMODCACHE naming a cache listed in read_only, GOFLAGS=-mod=mod).
	Env []string `koanf:"env"`
	// MaxOpenFiles and MaxProcs are each sandbox's RLIMIT_NOFILE and
	// RLIMIT_NPROC (processes and threads of its own user namespace).
	MaxOpenFiles int `koanf:"max_open_files"`
	MaxProcs     int `koanf:"max_procs"`
	// Memory bounds each agent process's address space ("4GiB"; "0": none).
	Memory string `koanf:"memory"`
	// TmpSize caps the sandbox's /tmp and /dev/shm, held in host memory.
	TmpSize string `koanf:"tmp_size"`
	// MaxConnections bounds the connections one task holds open to the
	// proxy through its socket; past it a new one waits briefly, then is
	// refused (too_many_connections), so one task cannot take the daemon's
	// file descriptors from the dashboard, the RPC and the other tasks.
	MaxConnections int `koanf:"max_connections"`
}

// MaxConnectionsLimit is the largest sandbox.max_connections accepted.
const MaxConnectionsLimit = 65536

// SandboxDefaults: generous for a real agent building and testing a
// project, far below what would starve the daemon or the host.
var SandboxDefaults = Sandbox{MaxOpenFiles: 4096, MaxProcs: 2048, Memory: "8GiB", TmpSize: "512MiB", MaxConnections: 256}

// reservedEnv are the variables the daemon sets for an agent: sandbox.env
// cannot replace them.
var reservedEnv = []string{"HOME", "TMPDIR", "PATH", "ANTHROPIC_", "CLAUDE_CODE_", "CURSOR_API_KEY", "OPENAI_", "GEMINI_", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy", "LD_"}

func (s Sandbox) validate() error {
	for i, p := range s.ReadOnly {
		p = ExpandPath(p)
		if !filepath.IsAbs(p) {
			return bad("sandbox.read_only", "%q: give an absolute path (or ~/...)", s.ReadOnly[i])
		}
		if filepath.Clean(p) == "/" {
			return bad("sandbox.read_only", "\"/\" would show the whole host: list the directories the agent needs (a module cache, a toolchain)")
		}
	}
	for _, kv := range s.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t\n") {
			return bad("sandbox.env", "%q is not NAME=value", kv)
		}
		for _, r := range reservedEnv {
			if k == r || (strings.HasSuffix(r, "_") && strings.HasPrefix(k, r)) {
				return bad("sandbox.env", "%s is set by lazy for every agent and cannot be replaced here", k)
			}
		}
	}
	if s.MaxOpenFiles < 64 || s.MaxOpenFiles > 1<<20 {
		return bad("sandbox.max_open_files", "%d is out of range: give between 64 and 1048576", s.MaxOpenFiles)
	}
	if s.MaxProcs < 16 || s.MaxProcs > 1<<20 {
		return bad("sandbox.max_procs", "%d is out of range: give between 16 and 1048576", s.MaxProcs)
	}
	if s.MaxConnections < 1 || s.MaxConnections > MaxConnectionsLimit {
		return bad("sandbox.max_connections", "%d is out of range: allow each task between 1 and %d connections to the proxy at once", s.MaxConnections, MaxConnectionsLimit)
	}
	if m, err := ParseSize(s.Memory); err != nil {
		return bad("sandbox.memory", "%v", err)
	} else if m != 0 && m < 256<<20 {
		return bad("sandbox.memory", "%q is below 256MiB, too little for an agent: give more, or \"0\" for no bound", s.Memory)
	}
	if t, err := ParseSize(s.TmpSize); err != nil {
		return bad("sandbox.tmp_size", "%v", err)
	} else if t < 1<<20 {
		return bad("sandbox.tmp_size", "%q: give at least 1MiB (it is held in host memory, so keep it modest)", s.TmpSize)
	}
	return nil
}

// MemoryBytes is sandbox.memory in bytes (0: none); validated by Load.
func (s Sandbox) MemoryBytes() uint64 { n, _ := ParseSize(s.Memory); return n }

// TmpBytes is sandbox.tmp_size in bytes; validated by Load.
func (s Sandbox) TmpBytes() uint64 { n, _ := ParseSize(s.TmpSize); return n }

// ReadOnlyPaths are sandbox.read_only with "~/" expanded.
func (s Sandbox) ReadOnlyPaths() []string {
	out := make([]string, 0, len(s.ReadOnly))
	for _, p := range s.ReadOnly {
		out = append(out, filepath.Clean(ExpandPath(p)))
	}
	return out
}

// ParseSize reads a byte count: a number with an optional unit K, M, G, T
// (powers of 1024; "KiB", "KB" and "k" mean the same), e.g. "512MiB".
func ParseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	num := strings.TrimRightFunc(t, func(r rune) bool { return r < '0' || r > '9' })
	unit := strings.ToLower(strings.TrimSpace(t[len(num):]))
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size: write it like \"512MiB\" or \"4GiB\"", s)
	}
	shift := map[string]uint{"": 0, "b": 0, "k": 10, "kb": 10, "kib": 10, "m": 20, "mb": 20, "mib": 20, "g": 30, "gb": 30, "gib": 30, "t": 40, "tb": 40, "tib": 40}
	sh, ok := shift[unit]
	if !ok {
		return 0, fmt.Errorf("%q: unknown unit %q (use KiB, MiB, GiB or TiB)", s, unit)
	}
	if sh > 0 && n > (^uint64(0))>>sh {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n << sh, nil
}
