package gitx

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The daemon asks a repository many small questions — what commit a
// branch is at, whether a ref exists — and each used to be a git process
// (a task's life ran dozens of `git rev-parse`). A batch is one
// long-lived `git cat-file --batch-check` per repository that answers them
// over a pipe:
//
//   - one per repository (the project's top level), shared by every caller,
//     its questions serialized;
//   - restarted when it died (the question is asked again once), and ended
//     after batchIdle without a question, or by CloseBatches when the
//     daemon stops;
//   - fed only names it validated (batchName): a name is one line of the
//     protocol, so a newline, or a rev syntax that reads more than a ref
//     (reflogs, message searches, paths), never reaches it — those go to
//     a git process of their own, where an argument is only an argument;
//   - only for the project's repository, never for a task repository: the
//     agent writes that one between turns, and the daemon asks it fresh.
//
// Its answers are as fresh as a new process's: git reads a loose ref's file
// on every lookup and re-reads packed-refs when the file changed, and looks
// for new packs when an object is not found.

// batchIdle is how long a batch waits for a question before it ends.
const batchIdle = 2 * time.Minute

// batchTimeout bounds one answer; a batch that takes longer is ended and
// the question asked of a git process instead.
const batchTimeout = 10 * time.Second

type batch struct {
	mu   sync.Mutex
	root string
	cmd  *exec.Cmd
	in   io.WriteCloser
	pipe *os.File
	out  *bufio.Reader
	idle *time.Timer
}

var batches sync.Map // root → *batch

func batchFor(root string) *batch {
	b, _ := batches.LoadOrStore(root, &batch{root: root})
	return b.(*batch)
}

// CloseBatches ends every batch process (the daemon calls it when it
// stops). A later question starts one again.
func CloseBatches() {
	batches.Range(func(k, v any) bool {
		b := v.(*batch)
		b.mu.Lock()
		b.stop()
		b.mu.Unlock()
		return true
	})
}

// batchName reports whether name may be asked of a batch: a ref or commit
// name with at most the peel suffixes the daemon appends (^{commit},
// ^{tree}), nothing that reads a reflog (@{), searches messages (:/) or
// names a path (:), no space or control character.
func batchName(name string) bool {
	if name == "" || len(name) > 1024 || strings.HasPrefix(name, "-") || strings.Contains(name, "@{") || strings.Contains(name, "..") {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("._/-^{}~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// errMissing is a name the repository does not resolve.
var errMissing = errors.New("no such object")

// lookup resolves name to an object id and its type.
func (b *batch) lookup(ctx context.Context, name string) (id, kind string, err error) {
	id, kind, _, err = b.lookupSize(ctx, name)
	return id, kind, err
}

// lookupSize resolves name to an object id, its type and its size in bytes.
func (b *batch) lookupSize(ctx context.Context, name string) (id, kind string, size int64, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for attempt := 0; attempt < 2; attempt++ {
		if b.cmd == nil {
			if err := b.start(); err != nil {
				return "", "", 0, err
			}
		}
		id, kind, size, err = b.ask(name)
		if err == nil || errors.Is(err, errMissing) {
			b.idle.Reset(batchIdle)
			return id, kind, size, err
		}
		b.stop() // died or stuck: a fresh one answers
		if ctx.Err() != nil {
			return "", "", 0, ctx.Err()
		}
	}
	return "", "", 0, err
}

func (b *batch) ask(name string) (string, string, int64, error) {
	if _, err := io.WriteString(b.in, name+"\n"); err != nil {
		return "", "", 0, err
	}
	_ = b.pipe.SetReadDeadline(time.Now().Add(batchTimeout))
	line, err := b.out.ReadString('\n')
	if err != nil {
		return "", "", 0, err
	}
	line = strings.TrimSuffix(line, "\n")
	if rest, ok := strings.CutPrefix(line, name+" "); ok && (rest == "missing" || rest == "ambiguous") {
		return "", "", 0, fmt.Errorf("%s: %w (%s)", name, errMissing, rest)
	}
	id, rest, ok := strings.Cut(line, " ")
	kind, sz, ok2 := strings.Cut(rest, " ")
	size, err := strconv.ParseInt(sz, 10, 64)
	if !ok || !ok2 || err != nil || len(id) < 40 {
		return "", "", 0, fmt.Errorf("cat-file answered %q for %s", line, name)
	}
	return id, kind, size, nil
}

func (b *batch) start() error {
	cmd := exec.Command("git", append(append([]string{}, SafeConfig...), "cat-file", "--batch-check=%(objectname) %(objecttype) %(objectsize)")...)
	cmd.Dir = b.root
	cmd.Env = append(os.Environ(), gitEnv...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd.Stdout = w
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return &Error{Args: []string{"cat-file", "--batch-check"}, Err: err}
	}
	w.Close()
	b.cmd, b.in, b.pipe, b.out = cmd, in, r, bufio.NewReader(r)
	if b.idle == nil {
		b.idle = time.AfterFunc(batchIdle, func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.stop()
		})
	}
	return nil
}

// stop ends the process (b.mu held).
func (b *batch) stop() {
	if b.cmd == nil {
		return
	}
	_ = b.in.Close() // cat-file ends at the end of its input
	done := make(chan struct{})
	go func() {
		_ = b.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
	_ = b.pipe.Close()
	b.cmd, b.in, b.pipe, b.out = nil, nil, nil, nil
}

// resolve is the object id of name in root: through root's batch when the
// name may be asked of one, else a git process.
func resolve(ctx context.Context, root, name, kind string) (string, error) {
	if batchName(name) {
		id, got, err := batchFor(root).lookup(ctx, name)
		switch {
		case err == nil && (kind == "" || got == kind):
			return id, nil
		case err == nil:
			return "", fmt.Errorf("%s is a %s, not a %s", name, got, kind)
		case errors.Is(err, errMissing):
			return "", err
		}
		// the batch could not answer: a process does
	}
	return Run(ctx, root, "rev-parse", "--verify", "--quiet", name)
}
