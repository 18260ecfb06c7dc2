package agent

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// MaxHomeArchive bounds a task's agent home as it travels between the
// members of a cluster (compressed) and as it is unpacked.
const MaxHomeArchive = 64 << 20

// ArchiveHome packs a task's agent home (its sessions and settings) as
// tar.gz: regular files and directories only. The agent wrote the home, so
// nothing in it is trusted: a link is never followed (not even one swapped
// in for a file while packing), a pipe or device is never opened, and a
// home over MaxHomeArchive (unpacked, or packed) is refused before it is
// read whole.
func ArchiveHome(dir string) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&limitedWriter{w: &buf, left: MaxHomeArchive})
	tw := tar.NewWriter(zw)
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() && !info.IsDir() {
			return nil // sockets, links: not part of a session
		}
		var f *os.File
		if info.Mode().IsRegular() {
			// the file as opened, not as listed: no link followed, no pipe
			// waited on
			if f, err = os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0); err != nil {
				return nil // gone or swapped for a link since the listing
			}
			defer f.Close()
			if info, err = f.Stat(); err != nil || !info.Mode().IsRegular() {
				return nil
			}
			if total += info.Size(); total > MaxHomeArchive {
				return fmt.Errorf("the agent home %s is over %d MiB", dir, MaxHomeArchive>>20)
			}
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if f != nil {
			// as much as the header says, even if the file grows meanwhile
			if _, err := io.CopyN(tw, f, info.Size()); err != nil {
				return fmt.Errorf("pack %s: %w", rel, err)
			}
		}
		return nil
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = zw.Close()
	}
	if errors.Is(err, errTooBig) {
		err = fmt.Errorf("the agent home %s is over %d MiB packed", dir, MaxHomeArchive>>20)
	}
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

var errTooBig = errors.New("over the limit")

// limitedWriter writes to w until left bytes are written, then fails.
type limitedWriter struct {
	w    io.Writer
	left int64
}

func (c *limitedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		return 0, errTooBig
	}
	c.left -= int64(len(p))
	return c.w.Write(p)
}

// RestoreHome replaces the agent home at dir by an archive ArchiveHome
// made (on another member). Entries that would land outside dir, and more
// than MaxHomeArchive bytes unpacked, are refused.
func RestoreHome(dir string, archive []byte) error {
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return fmt.Errorf("agent home archive: %w", err)
	}
	tmp := dir + ".restore"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			_ = os.RemoveAll(tmp)
			return fmt.Errorf("agent home archive: %w", err)
		}
		name := filepath.FromSlash(h.Name)
		if !filepath.IsLocal(name) {
			_ = os.RemoveAll(tmp)
			return fmt.Errorf("agent home archive: entry %q leaves the home", h.Name)
		}
		target := filepath.Join(tmp, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			total += h.Size
			if total > MaxHomeArchive {
				_ = os.RemoveAll(tmp)
				return fmt.Errorf("agent home archive unpacks to over %d MiB", MaxHomeArchive>>20)
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
				return err
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o700|0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, io.LimitReader(tr, h.Size))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				_ = os.RemoveAll(tmp)
				return err
			}
		default:
			// nothing else is written by ArchiveHome
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	return nil
}

// MoveSessions re-keys the claude CLI's sessions in home from the directory
// the agent ran in on one member (oldCwd) to the one it runs in here
// (newCwd): claude keeps a project's sessions under .claude/projects/<cwd
// with every character but letters and digits as '-'>, and --resume looks
// there. Nothing to move is not an error.
func MoveSessions(home, oldCwd, newCwd string) error {
	if oldCwd == "" || oldCwd == newCwd {
		return nil
	}
	from := filepath.Join(home, ".claude", "projects", claudeProjectKey(oldCwd))
	to := filepath.Join(home, ".claude", "projects", claudeProjectKey(newCwd))
	if _, err := os.Stat(from); err != nil {
		return nil
	}
	if err := os.RemoveAll(to); err != nil {
		return err
	}
	return os.Rename(from, to)
}

// claudeProjectKey is claude's name for a project directory (paths up to 200
// characters; longer ones it shortens with a hash of its own).
func claudeProjectKey(cwd string) string {
	return strings.Map(func(r rune) rune {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, cwd)
}
