// Package gitx drives git through its command-line tool: the project's top
// level, task branches and worktrees, the diff of a task branch against its
// parent parsed into files, hunks and lines with independent old and new line
// numbers, commits ahead and behind, merges and half-finished merges, changed
// paths, and the worktree lock. It knows nothing of tasks or reviews.
package gitx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"lazy/api"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Error is a failed git command with what git said.
type Error struct {
	Args   []string
	Stderr string
	Err    error
}

func (e *Error) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.Args, " "), msg)
}

func (e *Error) Unwrap() error { return e.Err }

// env keeps git from prompting or reading the user's global hooks config.
var gitEnv = []string{"GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C"}

// SafeConfig goes before every git command the daemon runs. An agent can
// write files in its worktree (and, without a sandbox, in the repository's
// git dir); none of what it writes may make the daemon run a program: no
// hooks, no fsmonitor, no external diff or pager, no credential helper or
// ssh command, no signing program. Command-line settings win over every
// config file, so a planted .git/config or hook changes nothing.
var SafeConfig = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "core.pager=cat",
	"-c", "core.editor=false",
	"-c", "core.askPass=",
	"-c", "core.sshCommand=false",
	"-c", "core.gitProxy=",
	"-c", "core.alternateRefsCommand=",
	"-c", "credential.helper=",
	"-c", "diff.external=",
	"-c", "commit.gpgSign=false",
	"-c", "tag.gpgSign=false",
	"-c", "gpg.program=false",
	"-c", "protocol.ext.allow=never",
	"-c", "safe.bareRepository=explicit",
}

// Run runs git in dir and returns its trimmed stdout.
func Run(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := RunRaw(ctx, dir, args...)
	return strings.TrimRight(string(out), "\n"), err
}

// RunRaw runs git in dir and returns its stdout untouched.
func RunRaw(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append(append([]string{}, SafeConfig...), args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), gitEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), &Error{Args: args, Stderr: stderr.String(), Err: err}
	}
	return stdout.Bytes(), nil
}

// TopLevel is the git top level of dir.
func TopLevel(ctx context.Context, dir string) (string, error) {
	out, err := Run(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", fmt.Errorf("%s is not inside a git repository (run `git init` there, or pass --project DIR): %w", dir, err)
	}
	return filepath.Clean(out), nil
}

// CurrentBranch is the branch checked out at dir.
func CurrentBranch(ctx context.Context, dir string) (string, error) {
	if b, ok := headBranch(dir); ok {
		return b, nil
	}
	out, err := Run(ctx, dir, "symbolic-ref", "--short", "-q", "HEAD")
	if err != nil || out == "" {
		return "", fmt.Errorf("%s has no branch checked out (detached HEAD?): check out a branch or pass --parent BRANCH", dir)
	}
	return out, nil
}

// headBranch is the branch checked out at dir when dir is a repository's
// main worktree (dir/.git a directory) whose HEAD names a branch, read as
// git reads it, with no git process; false for any other shape.
func headBranch(dir string) (string, bool) {
	gd := filepath.Join(dir, ".git")
	if fi, err := os.Lstat(gd); err != nil || !fi.IsDir() {
		return "", false
	}
	fi, err := os.Lstat(filepath.Join(gd, "HEAD"))
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > 1024 {
		return "", false
	}
	b, err := os.ReadFile(filepath.Join(gd, "HEAD"))
	if err != nil {
		return "", false
	}
	ref, ok := strings.CutPrefix(strings.TrimSuffix(string(b), "\n"), "ref: refs/heads/")
	if !ok || ref == "" || strings.ContainsAny(ref, "\n\r ") {
		return "", false
	}
	return ref, true
}

// BranchExists reports whether refs/heads/name exists.
func BranchExists(ctx context.Context, root, name string) bool {
	_, err := resolve(ctx, root, "refs/heads/"+name, "")
	return err == nil
}

// RevParse resolves rev to a full commit id.
// It is answered by the repository's batch (see batch.go) when rev is a
// plain ref or commit name.
func RevParse(ctx context.Context, dir, rev string) (string, error) {
	return resolve(ctx, dir, rev+"^{commit}", "commit")
}

// AheadBehind counts commits branch has that parent lacks, and the reverse.
// Between two commit ids the answer never changes: it is kept (an accept
// asks it of the same pair twice).
func AheadBehind(ctx context.Context, root, parent, branch string) (ahead, behind int, err error) {
	var key string
	if p, err := RevParse(ctx, root, parent); err == nil {
		if b, err := RevParse(ctx, root, branch); err == nil {
			key = root + "\x00" + p + "..." + b
			if v, ok := aheadBehind.Load(key); ok {
				ab := v.([2]int)
				return ab[0], ab[1], nil
			}
			parent, branch = p, b
		}
	}
	defer func() {
		if err == nil && key != "" {
			if aheadBehindN.Add(1) > 4096 { // bounded: start over
				aheadBehind.Clear()
				aheadBehindN.Store(0)
			}
			aheadBehind.Store(key, [2]int{ahead, behind})
		}
	}()
	out, err := Run(ctx, root, "rev-list", "--left-right", "--count", parent+"..."+branch)
	if err != nil {
		return 0, 0, fmt.Errorf("compare %s with %s: %w", branch, parent, err)
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("compare %s with %s: unexpected output %q", branch, parent, out)
	}
	behind, _ = strconv.Atoi(f[0])
	ahead, _ = strconv.Atoi(f[1])
	return ahead, behind, nil
}

// ChangedPaths lists paths that differ between parent and branch (three-dot).
func ChangedPaths(ctx context.Context, root, parent, branch string) ([]string, error) {
	out, err := Run(ctx, root, "diff", "--name-only", "--no-renames", parent+"..."+branch)
	if err != nil {
		return nil, fmt.Errorf("list changed paths of %s: %w", branch, err)
	}
	if out == "" {
		return nil, nil
	}
	return strings.Split(out, "\n"), nil
}

var (
	aheadBehind  sync.Map // root NUL parent id...branch id → [ahead, behind]
	aheadBehindN atomic.Int64
)

// ConflictError is a merge that stopped on conflicts.
type ConflictError struct{ Files []string }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("merge conflicts in %s: resolve them in the task's worktree, or ask the agent to", strings.Join(e.Files, ", "))
}

// ErrConflicted matches any *ConflictError with errors.Is.
var ErrConflicted = errors.New("merge conflicts")

func (e *ConflictError) Is(target error) bool { return target == ErrConflicted }

// WorktreeOf returns the checkout where branch is checked out, if any.
func WorktreeOf(ctx context.Context, root, branch string) (string, bool, error) {
	if b, ok := headBranch(root); ok && b == branch {
		return root, true, nil // git checks a branch out in one worktree at most
	}
	out, err := Run(ctx, root, "worktree", "list", "--porcelain")
	if err != nil {
		return "", false, fmt.Errorf("list worktrees: %w", err)
	}
	var path string
	for _, l := range strings.Split(out, "\n") {
		if p, ok := strings.CutPrefix(l, "worktree "); ok {
			path = p
		}
		if b, ok := strings.CutPrefix(l, "branch "); ok && b == "refs/heads/"+branch {
			return path, true, nil
		}
	}
	return "", false, nil
}

// FastForward moves parent to branch's head. Where parent is checked out the
// checkout is fast-forwarded (its working tree follows); elsewhere only the
// ref moves, guarded by its old value.
func FastForward(ctx context.Context, root, parent, branch string) error {
	head, err := RevParse(ctx, root, branch)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", branch, err)
	}
	if dir, ok, err := WorktreeOf(ctx, root, parent); err != nil {
		return err
	} else if ok {
		if _, err := Run(ctx, dir, "merge", "--ff-only", "-q", head); err != nil {
			return fmt.Errorf("fast-forward %s in %s: %w (commit or stash the local changes there, then accept again)", parent, dir, err)
		}
		return nil
	}
	old, err := RevParse(ctx, root, parent)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", parent, err)
	}
	if _, err := Run(ctx, root, "update-ref", "refs/heads/"+parent, head, old); err != nil {
		return fmt.Errorf("move %s to %s: %w", parent, branch, err)
	}
	return nil
}

// Commit is one commit's identity.
type Commit struct {
	SHA, Subject, Author string
	Time                 time.Time // committer time
}

// commitFormat is what parseCommit reads.
const commitFormat = "--format=%H%x1f%s%x1f%an%x1f%cI"

func parseCommit(line string) (Commit, bool) {
	f := strings.Split(line, "\x1f")
	if len(f) != 4 {
		return Commit{}, false
	}
	at, _ := time.Parse(time.RFC3339, f[3])
	return Commit{SHA: f[0], Subject: f[1], Author: f[2], Time: at}, true
}

// Log lists the commits of branch that parent lacks, newest first.
func Log(ctx context.Context, root, parent, branch string) ([]Commit, error) {
	out, err := Run(ctx, root, "log", commitFormat, parent+".."+branch)
	if err != nil {
		return nil, fmt.Errorf("list commits of %s: %w", branch, err)
	}
	var cs []Commit
	for _, l := range strings.Split(out, "\n") {
		if c, ok := parseCommit(l); ok {
			cs = append(cs, c)
		}
	}
	return cs, nil
}

// Show is one commit and its diff against its first parent (or the empty
// tree for a root commit).
func Show(ctx context.Context, root, sha string) (Commit, *Diff, error) {
	out, err := Run(ctx, root, "show", "-s", commitFormat, sha+"^{commit}")
	if err != nil {
		return Commit{}, nil, fmt.Errorf("no commit %s: %w", sha, err)
	}
	c, ok := parseCommit(out)
	if !ok {
		return Commit{}, nil, fmt.Errorf("read commit %s: unexpected %q", sha, out)
	}
	var d *Diff
	err = stream(ctx, root, []string{"show", "--format=", "--no-color", "--no-ext-diff", "--no-textconv", "-M", "--first-parent", "--src-prefix=a/", "--dst-prefix=b/", c.SHA}, func(r io.Reader) (err error) {
		d, err = ReadDiff(r)
		return err
	})
	if err != nil {
		return c, nil, fmt.Errorf("diff of %s: %w", sha, err)
	}
	blobSizes(ctx, root, d)
	return c, d, nil
}

// MergeCheck is a dry-run merge of a task branch into its parent.
type MergeCheck = api.MergeCheck

// DryMerge merges branch into parent in memory (git merge-tree
// --write-tree): nothing in any worktree, index or ref changes.
func DryMerge(ctx context.Context, root, parent, branch string) (MergeCheck, error) {
	var m MergeCheck
	var err error
	if m.Ahead, m.Behind, err = AheadBehind(ctx, root, parent, branch); err != nil {
		return m, err
	}
	out, err := RunRaw(ctx, root, "merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", parent, branch)
	var ee *exec.ExitError
	switch {
	case err == nil:
		m.Clean = true
		return m, nil
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		// conflicts: the tree id, then each conflicted path, NUL-separated
		parts := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
		seen := map[string]bool{}
		for _, p := range parts[min(1, len(parts)):] {
			if p != "" && !seen[p] {
				seen[p] = true
				m.Conflicts = append(m.Conflicts, p)
			}
		}
		return m, nil
	}
	return m, fmt.Errorf("dry-run merge of %s into %s: %w", branch, parent, err)
}
