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

// TakeSnapshot records dir's HEAD and status.
func TakeSnapshot(ctx context.Context, dir string) (Snapshot, error) {
	head, err := RevParse(ctx, dir, "HEAD")
	if err != nil {
		return Snapshot{}, err
	}
	dirty, err := porcelain(ctx, dir)
	if err != nil {
		return Snapshot{}, err
	}
	return Snapshot{Head: head, Dirty: dirty}, nil
}

func porcelain(ctx context.Context, dir string) (map[string]string, error) {
	out, err := RunRaw(ctx, dir, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, rec := range strings.Split(string(out), "\x00") {
		if len(rec) > 3 {
			m[rec[3:]] = rec[:2]
		}
	}
	return m, nil
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

// Restore puts dir back as s recorded it: the branch checked out moves
// back to s.Head (the files stay), then every path clean at s and changed
// now is restored from HEAD (or removed, when HEAD lacks it). A path that
// had changes of its own at s is left and listed.
func Restore(ctx context.Context, dir string, s Snapshot) (Undone, error) {
	var u Undone
	head, err := RevParse(ctx, dir, "HEAD")
	if err != nil {
		return u, err
	}
	if head != s.Head {
		if _, err := Run(ctx, dir, "reset", "-q", "--soft", s.Head); err != nil {
			return u, fmt.Errorf("move the branch back to %s: %w", short(s.Head), err)
		}
		u.MovedFrom, u.MovedTo = s.Head, head
	}
	now, err := porcelain(ctx, dir)
	if err != nil {
		return u, err
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
		if _, err := Run(ctx, dir, "cat-file", "-e", "HEAD:"+p); err == nil {
			if _, err := Run(ctx, dir, "checkout", "-q", "HEAD", "--", p); err != nil {
				return u, fmt.Errorf("restore %s: %w", p, err)
			}
			continue
		}
		// not in HEAD: the ask added it
		if _, err := Run(ctx, dir, "rm", "-q", "--cached", "--ignore-unmatch", "--", p); err != nil {
			return u, err
		}
		if _, err := Run(ctx, dir, "clean", "-q", "-f", "--", p); err != nil {
			return u, fmt.Errorf("remove %s: %w", p, err)
		}
	}
	return u, nil
}
