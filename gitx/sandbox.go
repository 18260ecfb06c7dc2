package gitx

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// SandboxPaths is what a sandbox shows of git for one task, for the runner to
// bind, in this order: Visible read-only, then Writable read-write, then
// ReadOnly read-only on top of the writable ones.
//
//   - Visible: the project's object directory (and any it borrows from
//     through its own alternates), which the task repository names as its
//     alternate: read-only.
//   - Writable (work turns): the task repository, and its objects/ again as
//     its own mount (so it cannot be renamed away from under objects/info).
//   - ReadOnly: in an ask turn the whole task repository; then its config,
//     hooks/, info/ and objects/info/ (the alternates), and the worktree's
//     .git file.
//
// Nothing else of the project's git dir: its refs, config, hooks and other
// tasks' repositories are out of sight.
type SandboxPaths struct {
	Visible  []string
	Writable []string
	ReadOnly []string
}

// ForSandbox lists the paths for a turn in worktree. It reads the task
// repository's alternates (written by the daemon, read-only to the agent),
// never the worktree's .git file. ask makes the task repository read-only.
func ForSandbox(worktree string, ask bool) (SandboxPaths, error) {
	gd := TaskGitDir(worktree)
	if _, err := os.Lstat(filepath.Join(gd, "config")); err != nil {
		return SandboxPaths{}, fmt.Errorf("the task has no repository at %s (%v): relaunch the task so the daemon makes it", gd, err)
	}
	visible, err := alternatesOf(filepath.Join(gd, "objects"), 0)
	if err != nil {
		return SandboxPaths{}, err
	}
	sp := SandboxPaths{Visible: visible}
	if ask {
		// read-only, and bound last: a runner that hides the state dir
		// hides it after Visible, before ReadOnly
		sp.ReadOnly = []string{gd}
	} else {
		sp.Writable = []string{gd, filepath.Join(gd, "objects")}
	}
	for _, p := range []string{
		filepath.Join(gd, "config"), filepath.Join(gd, "hooks"), filepath.Join(gd, "info"),
		filepath.Join(gd, "objects", "info"), filepath.Join(worktree, ".git"),
	} {
		if _, err := os.Lstat(p); err == nil {
			sp.ReadOnly = append(sp.ReadOnly, p)
		}
	}
	return sp, nil
}

// alternatesOf lists the object directories objects borrows from, and
// theirs, depth first.
func alternatesOf(objects string, depth int) ([]string, error) {
	if depth > 5 {
		return nil, fmt.Errorf("the alternates of %s nest too deep", objects)
	}
	f, err := os.Open(filepath.Join(objects, "info", "alternates"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the alternates of %s: %w", objects, err)
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if !filepath.IsAbs(l) {
			l = filepath.Join(objects, l)
		}
		l = filepath.Clean(l)
		dirs = append(dirs, l)
		more, err := alternatesOf(l, depth+1)
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, more...)
	}
	return dirs, sc.Err()
}

// adminDir is <common>/worktrees/<name> whose gitdir file points at
// worktree/.git (a linked worktree of the project, from before task
// repositories).
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
	return "", fmt.Errorf("no git admin dir under %s/worktrees points at %s", commonDir, worktree)
}
