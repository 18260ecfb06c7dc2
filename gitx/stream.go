package gitx

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
)

// maxStderr bounds what is kept of a streaming git command's stderr (its
// error message).
const maxStderr = 64 << 10

// stream runs git in dir and hands its stdout to read as it is written: the
// output is never held whole. When read returns early (an error) git is
// stopped; read's error wins over git's.
func stream(ctx context.Context, dir string, args []string, read func(io.Reader) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append(append([]string{}, SafeConfig...), args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), gitEnv...)
	stderr := &capped{max: maxStderr}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return &Error{Args: args, Err: err}
	}
	if err := cmd.Start(); err != nil {
		return &Error{Args: args, Err: err}
	}
	rerr := read(out)
	if rerr != nil {
		cancel()
	} else {
		_, rerr = io.Copy(io.Discard, out) // whatever read left
	}
	werr := cmd.Wait()
	if rerr != nil {
		return rerr
	}
	if werr != nil {
		return &Error{Args: args, Stderr: stderr.String(), Err: werr}
	}
	return nil
}

// capped keeps the first max bytes written to it and drops the rest.
type capped struct {
	bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
