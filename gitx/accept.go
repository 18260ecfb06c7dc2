package gitx

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Merge methods of an accept: how a task's commits go into its parent.
const (
	// MethodMerge fast-forwards the parent when the task already holds it,
	// else makes one merge commit of the task into the parent
	MethodMerge = "merge"
	// MethodSquash makes one commit on the parent with the task's change
	MethodSquash = "squash"
	// MethodRebase replays the task's own commits onto the parent: a
	// linear history
	MethodRebase = "rebase"
)

// Methods are the merge methods, the default first.
var Methods = []string{MethodMerge, MethodSquash, MethodRebase}

// ValidMethod reports whether m is one of Methods.
func ValidMethod(m string) bool {
	for _, x := range Methods {
		if m == x {
			return true
		}
	}
	return false
}

// daemonIdentity is who commits what the daemon makes on the parent (a
// merge commit, a squash, the replayed commits): the authors of a replay's
// commits stay theirs.
var daemonIdentity = []string{"-c", "user.name=lazy", "-c", "user.email=lazy@localhost"}

// RebaseConflictError is a replay of the task's commits onto the parent that
// stopped on conflicts: Commit is the task's commit that did not apply.
type RebaseConflictError struct {
	Commit string
	Files  []string
}

func (e *RebaseConflictError) Error() string {
	return fmt.Sprintf("replaying commit %s onto the parent conflicts in %s", short(e.Commit), strings.Join(e.Files, ", "))
}

// Is makes a *RebaseConflictError match ErrConflicted.
func (e *RebaseConflictError) Is(target error) bool { return target == ErrConflicted }

// Combine makes the commit the parent moves to when head is accepted by
// method, without touching any checkout, index or ref of the project:
// merge: head itself when it holds parent's head (a fast-forward), else a
// merge commit of head into parent (parent first); squash: one commit on
// parent with head's change and message; rebase: head's own commits (no
// merge commit) replayed onto parent, head itself when that changes
// nothing. A merge or squash that conflicts returns a *ConflictError, a
// rebase a *RebaseConflictError; nothing is left behind either way.
func Combine(ctx context.Context, root, parent, head, method, message string) (string, error) {
	if !ValidMethod(method) {
		return "", fmt.Errorf("merge method %q: use one of %s", method, strings.Join(Methods, ", "))
	}
	base, err := RevParse(ctx, root, parent)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", parent, err)
	}
	_, behind, err := AheadBehind(ctx, root, base, head)
	if err != nil {
		return "", err
	}
	switch method {
	case MethodMerge:
		if behind == 0 {
			return head, nil
		}
		tree, err := mergeTree(ctx, root, base, head)
		if err != nil {
			return "", err
		}
		return commitTree(ctx, root, tree, message, base, head)
	case MethodSquash:
		tree, err := mergeTree(ctx, root, base, head)
		if err != nil {
			return "", err
		}
		return commitTree(ctx, root, tree, message, base)
	}
	merges, err := Run(ctx, root, "rev-list", "--merges", "--max-count=1", base+".."+head)
	if err != nil {
		return "", fmt.Errorf("list merges of %s: %w", head, err)
	}
	if behind == 0 && merges == "" {
		return head, nil // already a line on top of the parent
	}
	return replay(ctx, root, base, head)
}

// mergeTree is the tree of head merged into base, or a *ConflictError.
func mergeTree(ctx context.Context, root, base, head string) (string, error) {
	out, err := RunRaw(ctx, root, "merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", base, head)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return strings.TrimRight(string(out), "\x00\n"), nil
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		parts := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
		ce := &ConflictError{}
		seen := map[string]bool{}
		for _, p := range parts[min(1, len(parts)):] {
			if p != "" && !seen[p] {
				seen[p] = true
				ce.Files = append(ce.Files, p)
			}
		}
		return "", ce
	}
	return "", fmt.Errorf("merge %s into %s: %w", short(head), short(base), err)
}

// commitTree writes a commit of tree with parents and message.
func commitTree(ctx context.Context, root, tree, message string, parents ...string) (string, error) {
	args := append(append([]string{}, daemonIdentity...), "commit-tree", tree)
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	args = append(args, "-m", message)
	out, err := Run(ctx, root, args...)
	if err != nil {
		return "", fmt.Errorf("commit the accepted change: %w", err)
	}
	return out, nil
}

// replay rebases head's own commits onto base in a detached worktree of its
// own, made for this and removed after: the project's refs, index and every
// checkout stay as they were.
func replay(ctx context.Context, root, base, head string) (string, error) {
	dir, err := os.MkdirTemp("", "lazy-rebase-")
	if err != nil {
		return "", fmt.Errorf("make a worktree to rebase in: %w", err)
	}
	defer func() {
		// a fresh context: the worktree goes even when ctx ended
		_, _ = Run(context.Background(), root, "worktree", "remove", "--force", dir)
		_ = os.RemoveAll(dir)
		_, _ = Run(context.Background(), root, "worktree", "prune")
	}()
	if _, err := Run(ctx, root, "worktree", "add", "--detach", "--quiet", dir, head); err != nil {
		return "", fmt.Errorf("make a worktree to rebase in: %w", err)
	}
	cfg := append(append([]string{}, daemonIdentity...),
		"-c", "rebase.autoStash=false", "-c", "rebase.autoSquash=false", "-c", "rebase.updateRefs=false",
		"-c", "rerere.enabled=false", "-c", "gc.auto=0", "-c", "advice.detachedHead=false")
	if _, err := Run(ctx, dir, append(cfg, "rebase", "--quiet", "--no-stat", base)...); err != nil {
		files, _ := Run(ctx, dir, "diff", "--no-ext-diff", "--no-textconv", "--name-only", "--diff-filter=U")
		stopped, _ := Run(ctx, dir, "rev-parse", "--verify", "--quiet", "REBASE_HEAD")
		_, _ = Run(ctx, dir, "rebase", "--abort")
		if files != "" {
			return "", &RebaseConflictError{Commit: stopped, Files: strings.Split(files, "\n")}
		}
		return "", fmt.Errorf("rebase %s onto %s: %w", short(head), short(base), err)
	}
	return RevParse(ctx, dir, "HEAD")
}

// PublishCommit moves parent on remote to commit, only as a fast-forward:
// when the remote's parent has moved on, it is refused and nothing changes.
func PublishCommit(ctx context.Context, root, remote, commit, parent string) error {
	defer lockClone(root)()
	if _, err := runRemote(ctx, root, "push", "--quiet", remote, commit+":refs/heads/"+parent); err != nil {
		return fmt.Errorf("move %s on %s to %s: %w", parent, remote, short(commit), err)
	}
	return nil
}

// EndedRef is where the commits of an ended task stay reachable once its
// branch is deleted: refs/lazy/ended/<task id>. Its review page, which shows
// what the task merged or left, reads them; no `git branch` lists it.
func EndedRef(taskID string) string { return "refs/lazy/ended/" + taskID }

// RetireBranch deletes refs/heads/<branch> after pointing keepRef at keep
// (the commit the task's record needs; "" keeps the branch's head). A branch
// checked out somewhere is left alone and reported, as git would.
func RetireBranch(ctx context.Context, root, branch, keepRef, keep string) error {
	old, err := RevParse(ctx, root, "refs/heads/"+branch)
	if err != nil {
		return nil // gone already
	}
	if dir, ok, err := WorktreeOf(ctx, root, branch); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("branch %s is checked out at %s: check out another branch there, then prune again", branch, dir)
	}
	if keep == "" {
		keep = old
	}
	if _, err := Run(ctx, root, "update-ref", keepRef, keep); err != nil {
		return fmt.Errorf("keep the commits of %s at %s: %w", branch, keepRef, err)
	}
	if _, err := Run(ctx, root, "update-ref", "-d", "refs/heads/"+branch, old); err != nil {
		return fmt.Errorf("delete branch %s: %w", branch, err)
	}
	return nil
}
