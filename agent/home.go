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

	"lazy/internal/safefs"
)

// MaxHomeArchive bounds a task's agent home as it travels between the
// members of a cluster (compressed) and as it is unpacked.
const MaxHomeArchive = 64 << 20

// ArchiveHome packs a task's agent home (its sessions and settings) as
// tar.gz: regular files and directories only. The agent wrote the home, so
// nothing in it is trusted: it is walked beneath the home through
// descriptors (safefs), so a link is never followed, not even one swapped in
// for a file or a parent directory while packing; a pipe or device is never
// opened; and a home over MaxHomeArchive (unpacked, or packed) is refused
// before it is read whole.
func ArchiveHome(dir string) ([]byte, error) {
	root, err := safefs.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("pack the agent home: %w", err)
	}
	defer root.Close()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&limitedWriter{w: &buf, left: MaxHomeArchive})
	tw := tar.NewWriter(zw)
	var total int64
	err = root.Walk(func(e safefs.Entry) error {
		info := e.Info
		if !info.Mode().IsRegular() && !info.IsDir() {
			return nil // sockets, pipes, devices: not part of a session
		}
		if e.File != nil {
			if total += info.Size(); total > MaxHomeArchive {
				return fmt.Errorf("the agent home %s is over %d MiB", dir, MaxHomeArchive>>20)
			}
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = e.Rel
		h.Uname, h.Gname = "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if e.File != nil {
			// as much as the header says, even if the file grows meanwhile
			if _, err := io.CopyN(tw, e.File, info.Size()); err != nil {
				return fmt.Errorf("pack %s: %w", e.Rel, err)
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
// made (on another member). The archive came from an agent's home, so it is
// data: only directories and regular files are unpacked, each beneath a
// fresh directory without following a link; entries that would land outside
// it, and more than MaxHomeArchive bytes unpacked, are refused.
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
	if err := unpack(tmp, zr); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// unpack writes the tar stream r beneath dir.
func unpack(dir string, r io.Reader) error {
	root, err := safefs.Open(dir)
	if err != nil {
		return fmt.Errorf("unpack the agent home: %w", err)
	}
	defer root.Close()
	tr := tar.NewReader(r)
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("agent home archive: %w", err)
		}
		name := filepath.FromSlash(h.Name)
		if !filepath.IsLocal(name) {
			return fmt.Errorf("agent home archive: entry %q leaves the home", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o700); err != nil {
				return fmt.Errorf("agent home archive: %w", err)
			}
		case tar.TypeReg:
			if h.Size < 0 {
				return fmt.Errorf("agent home archive: entry %q has a negative size", h.Name)
			}
			if total += h.Size; total > MaxHomeArchive {
				return fmt.Errorf("agent home archive unpacks to over %d MiB", MaxHomeArchive>>20)
			}
			if err := root.MkdirAll(filepath.Dir(name), 0o700); err != nil {
				return fmt.Errorf("agent home archive: %w", err)
			}
			f, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o700|0o600)
			if err != nil {
				return fmt.Errorf("agent home archive: %w", err)
			}
			_, err = io.Copy(f, io.LimitReader(tr, h.Size))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("agent home archive: %w", err)
			}
		default:
			// links, devices, pipes: nothing else is written by ArchiveHome
		}
	}
}

// MoveSessions re-keys the claude CLI's sessions in home from the directory
// the agent ran in on one member (oldCwd) to the one it runs in here
// (newCwd): claude keeps a project's sessions under .claude/projects/<cwd
// with every character but letters and digits as '-'>, and --resume looks
// there. Nothing to move is not an error. The home is the agent's: every
// step stays beneath it and follows no link.
func MoveSessions(home, oldCwd, newCwd string) error {
	if oldCwd == "" || oldCwd == newCwd {
		return nil
	}
	root, err := safefs.Open(home)
	if err != nil {
		return fmt.Errorf("move the agent's sessions: %w", err)
	}
	defer root.Close()
	from := filepath.Join(".claude", "projects", claudeProjectKey(oldCwd))
	to := filepath.Join(".claude", "projects", claudeProjectKey(newCwd))
	if fi, err := root.Stat(from); errors.Is(err, fs.ErrNotExist) || err == nil && !fi.IsDir() {
		return nil
	} else if err != nil {
		return fmt.Errorf("move the agent's sessions: %w", err)
	}
	if err := root.RemoveAll(to); err != nil {
		return fmt.Errorf("move the agent's sessions: %w", err)
	}
	if err := root.Rename(from, to); err != nil {
		return fmt.Errorf("move the agent's sessions: %w", err)
	}
	return nil
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
