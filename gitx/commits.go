package gitx

import (
	"context"
	"strconv"
	"strings"
)

// maxCommitsSince bounds what CommitsSince lists.
const maxCommitsSince = 50

// CommitsSince lists the commits reachable from head but not from seen,
// newest first, as "<short sha> <subject>" (at most 50). It is empty when
// seen is not an ancestor of head (the branch was rewritten) or unknown.
func CommitsSince(ctx context.Context, root, seen, head string) ([]string, error) {
	if _, err := Run(ctx, root, "merge-base", "--is-ancestor", seen, head); err != nil {
		return nil, nil
	}
	out, err := Run(ctx, root, "log", "--no-decorate", "--format=%h %s", "-n", strconv.Itoa(maxCommitsSince), seen+".."+head, "--")
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines, nil
}

// NoBlob is the blob id Blobs gives a path that rev does not have.
const NoBlob = "-"

// Blobs maps each path to its blob id at rev (NoBlob where rev lacks it).
func Blobs(ctx context.Context, root, rev string, paths []string) (map[string]string, error) {
	out := make(map[string]string, len(paths))
	for _, p := range paths {
		out[p] = NoBlob
	}
	if len(paths) == 0 {
		return out, nil
	}
	raw, err := RunRaw(ctx, root, append([]string{"ls-tree", "-z", "--full-tree", rev, "--"}, paths...)...)
	if err != nil {
		return nil, err
	}
	for _, rec := range strings.Split(string(raw), "\x00") {
		meta, path, ok := strings.Cut(rec, "\t")
		if !ok {
			continue
		}
		if f := strings.Fields(meta); len(f) == 3 && f[1] == "blob" {
			if _, want := out[path]; want {
				out[path] = f[2]
			}
		}
	}
	return out, nil
}

// DirtyCheckout lists the paths among changed (all paths when changed is
// nil) that have uncommitted changes (staged, unstaged or untracked) where
// parent is checked out: a fast-forward there would have to overwrite
// them. Nothing when parent is checked out nowhere.
func DirtyCheckout(ctx context.Context, root, parent string, changed []string) (dir string, dirty []string, err error) {
	dir, ok, err := WorktreeOf(ctx, root, parent)
	if err != nil || !ok {
		return dir, nil, err
	}
	args := []string{"status", "--porcelain=v1", "-z", "--untracked-files=no", "--no-renames"}
	if changed != nil {
		if len(changed) == 0 {
			return dir, nil, nil
		}
		args = append(append(args, "--untracked-files=all", "--"), changed...)
	}
	out, err := RunRaw(ctx, dir, args...)
	if err != nil {
		return dir, nil, err
	}
	for _, rec := range strings.Split(string(out), "\x00") {
		if len(rec) > 3 {
			dirty = append(dirty, rec[3:])
		}
	}
	return dir, dirty, nil
}
