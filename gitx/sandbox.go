package gitx

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// SandboxPaths is what a sandboxed agent needs of the repository's common git
// dir to commit on its branch, and no more. Writable: the object store, the
// directory of the task branch's ref and of its reflog, and the worktree's
// own admin dir. Read-only on top of those: the files that tell git where
// the repository is (the worktree's .git file, the admin dir's commondir,
// gitdir, HEAD and config.worktree), so an agent cannot point the daemon's
// git at a repository of its own making. Everything else of the git dir
// (config, hooks/, info/, packed-refs, other branches) stays read-only.
type SandboxPaths struct {
	Writable []string
	ReadOnly []string
}

// ForSandbox finds the admin dir of worktree in the common git dir by the
// back-pointers git keeps (never by the worktree's own .git file, which the
// agent can write) and lists the paths. branch is the task's branch, from
// the daemon's record.
func ForSandbox(commonDir, worktree, branch string) (SandboxPaths, error) {
	admin, err := adminDir(commonDir, worktree)
	if err != nil {
		return SandboxPaths{}, err
	}
	refDir := filepath.Dir(filepath.Join(commonDir, "refs", "heads", filepath.FromSlash(branch)))
	logDir := filepath.Dir(filepath.Join(commonDir, "logs", "refs", "heads", filepath.FromSlash(branch)))
	for _, d := range []string{refDir, logDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return SandboxPaths{}, fmt.Errorf("prepare %s for the sandbox: %w", d, err)
		}
	}
	sp := SandboxPaths{Writable: []string{filepath.Join(commonDir, "objects"), refDir, logDir, admin}}
	for _, f := range []string{filepath.Join(worktree, ".git"), filepath.Join(admin, "commondir"), filepath.Join(admin, "gitdir"), filepath.Join(admin, "HEAD"), filepath.Join(admin, "config.worktree")} {
		if _, err := os.Lstat(f); err == nil {
			sp.ReadOnly = append(sp.ReadOnly, f)
		}
	}
	return sp, nil
}

// adminDir is <common>/worktrees/<name> whose gitdir file points at
// worktree/.git.
func adminDir(commonDir, worktree string) (string, error) {
	want := filepath.Join(worktree, ".git")
	dirs, err := filepath.Glob(filepath.Join(commonDir, "worktrees", "*", "gitdir"))
	if err != nil {
		return "", err
	}
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if filepath.Clean(strings.TrimSpace(string(b))) == want {
			return filepath.Dir(f), nil
		}
	}
	return "", fmt.Errorf("no git admin dir under %s/worktrees points at %s: the worktree is broken; run `git worktree prune` in the project and relaunch the task", commonDir, worktree)
}
