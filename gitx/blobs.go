package gitx

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// ReadBlobs reads the blobs named by ids (object ids, full or abbreviated
// as a diff's index line gives them) in one `git cat-file --batch-command`
// run: first every id's type and size, then the contents of those that are
// blobs of at most max bytes, while their sum stays within total. The
// answer is keyed by the id as asked; an id git does not know, an
// ambiguous one, a tree or a larger blob is left out (its reader shows it
// without its bytes). ids that are not hex are never sent to git.
func ReadBlobs(ctx context.Context, root string, ids []string, max, total int64) (map[string][]byte, error) {
	var ask []string
	seen := map[string]bool{}
	for _, id := range ids {
		if len(id) < 4 || len(id) > 64 || strings.Trim(id, "0123456789abcdef") != "" || seen[id] || strings.Trim(id, "0") == "" {
			continue
		}
		seen[id] = true
		ask = append(ask, id)
	}
	out := map[string][]byte{}
	if len(ask) == 0 {
		return out, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append(append([]string{}, SafeConfig...), "cat-file", "--batch-command=%(objectname) %(objecttype) %(objectsize)", "--buffer")...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), gitEnv...)
	in, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("read blobs: %w", err)
	}
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("read blobs: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("read blobs: %w", err)
	}
	defer func() {
		_ = w.Close()
		cancel()
		_ = cmd.Wait() // ended early or cancelled: its status says only that
	}()
	// each phase's questions are written beside the reading of its
	// answers: git answers as it reads, and a full pipe must not stop both
	send := func(lines []string) <-chan error {
		done := make(chan error, 1)
		go func() {
			var b strings.Builder
			for _, l := range lines {
				b.WriteString(l + "\n")
			}
			b.WriteString("flush\n")
			_, err := io.WriteString(w, b.String())
			done <- err
		}()
		return done
	}
	r := bufio.NewReaderSize(in, 64<<10)
	infos := make([]string, len(ask))
	for i, id := range ask {
		infos[i] = "info " + id
	}
	sent := send(infos)
	type want struct{ asked, oid string }
	var wants []want
	var sum int64
	for _, id := range ask {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("read blobs: cat-file: %w", err)
		}
		f := strings.Fields(line)
		if len(f) != 3 || f[1] != "blob" {
			continue // missing, ambiguous, or not a file
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || size > max || sum+size > total {
			continue
		}
		sum += size
		wants = append(wants, want{id, f[0]})
	}
	if err := <-sent; err != nil {
		return nil, fmt.Errorf("read blobs: cat-file: %w", err)
	}
	if len(wants) == 0 {
		return out, nil
	}
	cmds := make([]string, len(wants))
	for i, x := range wants {
		cmds[i] = "contents " + x.oid
	}
	sent = send(cmds)
	for _, x := range wants {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("read blobs: cat-file: %w", err)
		}
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != x.oid {
			return nil, fmt.Errorf("read blobs: cat-file answered %q for %s", strings.TrimSpace(line), x.oid)
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || size > max {
			return nil, fmt.Errorf("read blobs: cat-file answered %q for %s", strings.TrimSpace(line), x.oid)
		}
		data := make([]byte, size+1) // and the newline after it
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, fmt.Errorf("read blobs: cat-file: %w", err)
		}
		out[x.asked] = data[:size]
	}
	if err := <-sent; err != nil {
		return nil, fmt.Errorf("read blobs: cat-file: %w", err)
	}
	return out, nil
}
