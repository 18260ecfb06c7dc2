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
)

// MaxHomeArchive bounds a task's agent home as it travels between the
// members of a cluster (compressed) and as it is unpacked.
const MaxHomeArchive = 64 << 20

// ArchiveHome packs a task's agent home (its sessions and settings) as
// tar.gz: regular files and directories only.
func ArchiveHome(dir string) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
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
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.Copy(tw, f); err != nil {
				return err
			}
		}
		if buf.Len() > MaxHomeArchive {
			return fmt.Errorf("the agent home %s is over %d MiB packed", dir, MaxHomeArchive>>20)
		}
		return nil
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
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
