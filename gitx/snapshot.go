package gitx

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// Snapshot is what a worktree's checkout was before a turn that must
// change nothing (an ask): its HEAD commit and the status of each path
// that differed from HEAD then.
type Snapshot struct {
	Head  string
	Dirty map[string]string // path → porcelain status code
}

// gitFunc runs one git command on a checkout, the daemon's hardened way.
type gitFunc func(ctx context.Context, args ...string) (string, error)

// Snapshot records the task's HEAD and status (its repository and config
// first written back as the daemon made them).
func (t TaskRepo) Snapshot(ctx context.Context) (Snapshot, error) {
	git, err := t.hardened(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	head, dirty, err := porcelain(ctx, git)
	if err != nil {
		return Snapshot{}, err
	}
	return Snapshot{Head: head, Dirty: dirty}, nil
}

// Restore puts the task back as s recorded it (see restoreSnapshot), after
// writing back what the daemon owns in its repository.
func (t TaskRepo) Restore(ctx context.Context, s Snapshot) (Undone, error) {
	git, err := t.hardened(ctx)
	if err != nil {
		return Undone{}, err
	}
	return restoreSnapshot(ctx, git, s)
}

// hardened writes back the task repository's config, alternates and .git
// file, then gives the daemon's git on it (taskEnv: nothing the agent wrote
// is read as config or program).
func (t TaskRepo) hardened(ctx context.Context) (gitFunc, error) {
	objects, err := ProjectObjects(ctx, t.Project)
	if err != nil {
		return nil, err
	}
	if err := t.restore(objects); err != nil {
		return nil, err
	}
	return func(ctx context.Context, args ...string) (string, error) { return t.run(ctx, objects, args...) }, nil
}

// porcelain is the checkout's HEAD commit and the status code (as
// porcelain v1 writes it: "??" untracked, " M" changed in the worktree, …)
// of each path that differs from it: one git process for both.
func porcelain(ctx context.Context, git gitFunc) (string, map[string]string, error) {
	out, err := git(ctx, "status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all", "--no-renames")
	if err != nil {
		return "", nil, err
	}
	head := ""
	m := map[string]string{}
	for _, rec := range strings.Split(out, "\x00") {
		switch {
		case strings.HasPrefix(rec, "# branch.oid "):
			head = strings.TrimPrefix(rec, "# branch.oid ")
		case strings.HasPrefix(rec, "? "):
			m[rec[2:]] = "??"
		case strings.HasPrefix(rec, "1 "):
			// 1 XY sub mH mI mW hH hI path
			if f := strings.SplitN(rec, " ", 9); len(f) == 9 {
				m[f[8]] = strings.ReplaceAll(f[1], ".", " ")
			}
		case strings.HasPrefix(rec, "u "):
			// u XY sub m1 m2 m3 mW h1 h2 h3 path
			if f := strings.SplitN(rec, " ", 11); len(f) == 11 {
				m[f[10]] = f[1]
			}
		}
	}
	if len(head) < 40 {
		return "", nil, fmt.Errorf("the task's checkout has no HEAD commit (%q)", head)
	}
	return head, m, nil
}

// Undone is what Restore put back: the commits dropped from the branch
// and the paths restored, or left because they had changed before.
type Undone struct {
	MovedFrom, MovedTo string   // the branch was at MovedTo; it is back at MovedFrom
	Restored, Left     []string // paths
}

// Changed reports whether there was anything to undo.
func (u Undone) Changed() bool {
	return u.MovedTo != "" || len(u.Restored) > 0 || len(u.Left) > 0
}

// Say words u for the reviewer.
func (u Undone) Say() string {
	var parts []string
	if u.MovedTo != "" {
		parts = append(parts, fmt.Sprintf("it moved the task branch to %s; the branch is back at %s", short(u.MovedTo), short(u.MovedFrom)))
	}
	if len(u.Restored) > 0 {
		parts = append(parts, "it changed "+strings.Join(u.Restored, ", ")+"; those changes were discarded")
	}
	if len(u.Left) > 0 {
		parts = append(parts, "it changed "+strings.Join(u.Left, ", ")+", which had uncommitted changes before the ask; they were left as they are")
	}
	return "This ask was read-only, but " + strings.Join(parts, "; ") + "."
}

func short(sha string) string {
	if len(sha) > 10 {
		return sha[:10]
	}
	return sha
}

// restoreSnapshot puts a checkout back as s recorded it: the branch
// checked out moves back to s.Head (the files stay), then every path clean
// at s and changed now is restored from HEAD (or removed, when HEAD lacks
// it). A path that had changes of its own at s is left and listed.
func restoreSnapshot(ctx context.Context, git gitFunc, s Snapshot) (Undone, error) {
	var u Undone
	head, now, err := porcelain(ctx, git)
	if err != nil {
		// a HEAD the daemon's git cannot read (a commit the agent wrote
		// is in the task repository's objects, which it never reads):
		// the ref alone says where the branch went
		if head, err = git(ctx, "rev-parse", "--verify", "HEAD"); err != nil {
			return u, err
		}
		if head == s.Head {
			return u, fmt.Errorf("read the task's checkout at %s: %w", short(head), err)
		}
	}
	if head != s.Head {
		if _, err := git(ctx, "reset", "-q", "--soft", s.Head); err != nil {
			return u, fmt.Errorf("move the branch back to %s: %w", short(s.Head), err)
		}
		u.MovedFrom, u.MovedTo = s.Head, head
		// the index now holds the moved-from commit's tree: read again
		if _, now, err = porcelain(ctx, git); err != nil {
			return u, err
		}
	}
	for p, code := range now {
		before, was := s.Dirty[p]
		switch {
		case was && before == code:
			continue // as it was
		case was:
			u.Left = append(u.Left, p)
			continue
		}
		u.Restored = append(u.Restored, p)
	}
	// a path dirty before that is clean now was changed back: left too
	for p := range s.Dirty {
		if _, still := now[p]; !still {
			u.Left = append(u.Left, p)
		}
	}
	sort.Strings(u.Restored)
	sort.Strings(u.Left)
	for _, p := range u.Restored {
		if _, err := git(ctx, "cat-file", "-e", "HEAD:"+p); err == nil {
			if _, err := git(ctx, "checkout", "-q", "HEAD", "--", p); err != nil {
				return u, fmt.Errorf("restore %s: %w", p, err)
			}
			continue
		}
		// not in HEAD: the ask added it
		if _, err := git(ctx, "rm", "-q", "--cached", "--ignore-unmatch", "--", p); err != nil {
			return u, err
		}
		if _, err := git(ctx, "clean", "-q", "-f", "--", p); err != nil {
			return u, fmt.Errorf("remove %s: %w", p, err)
		}
	}
	return u, nil
}
