package gitx

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Blob is one file's bytes at a commit, streamed from git as it writes
// them: Close stops git if the reader stopped early.
type Blob struct {
	Size int64
	io.Reader
	cmd    *exec.Cmd
	cancel context.CancelFunc
}

// Close ends git's run.
func (b *Blob) Close() error {
	b.cancel()
	_ = b.cmd.Wait() // cancelled: its exit status says only that
	return nil
}

// OpenBlob streams the file at path in commit rev. path is taken as it is
// (repository-relative, no pathspec magic); it must name a file, not a tree
// or a submodule. No filter or textconv runs: these are the bytes git holds.
func OpenBlob(ctx context.Context, root, rev, path string) (*Blob, error) {
	if strings.HasPrefix(path, "./") || strings.HasPrefix(path, "../") || strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("read %s at %s: not a repository path", path, rev)
	}
	oid, err := Run(ctx, root, "rev-parse", "--verify", "--quiet", rev+":"+path)
	if err != nil || oid == "" {
		return nil, fmt.Errorf("read %s at %s: no such file: %w", path, rev, err)
	}
	kind, err := Run(ctx, root, "cat-file", "-t", oid)
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", path, rev, err)
	}
	if kind != "blob" {
		return nil, fmt.Errorf("read %s at %s: a %s, not a file", path, rev, kind)
	}
	sz, err := Run(ctx, root, "cat-file", "-s", oid)
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", path, rev, err)
	}
	size, err := strconv.ParseInt(sz, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: size %q: %w", path, rev, sz, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, "git", append(append([]string{}, SafeConfig...), "cat-file", "blob", oid)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), gitEnv...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("read %s at %s: %w", path, rev, err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("read %s at %s: %w", path, rev, err)
	}
	return &Blob{Size: size, Reader: io.LimitReader(out, size), cmd: cmd, cancel: cancel}, nil
}
