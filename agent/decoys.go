package agent

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"lazy/canary"
)

// WriteDecoys writes a task's decoy files into its home, before a turn. The
// home is the agent's: whatever it left at a decoy's place (an edited copy,
// a link to elsewhere, a directory) is replaced, and nothing it planted is
// followed. Each directory is opened beneath the home one component at a
// time with O_NOFOLLOW (a link or a file where a directory belongs is
// removed and made anew), and each file is written under a fresh name in
// its directory and renamed over the old entry, which renames a link
// itself, never its target.
func WriteDecoys(home string, files []canary.File) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("create agent home: %w", err)
	}
	root, err := unix.Open(home, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open agent home: %w", err)
	}
	defer unix.Close(root)
	for _, f := range files {
		if err := writeDecoy(root, f); err != nil {
			return fmt.Errorf("write decoy %s in %s: %w", f.Path, home, err)
		}
	}
	return nil
}

func writeDecoy(root int, f canary.File) error {
	p := path.Clean(f.Path)
	if path.IsAbs(p) || p == "." || strings.HasPrefix(p, "../") || p == ".." {
		return errors.New("not a path inside the home")
	}
	parts := strings.Split(p, "/")
	dir := root
	for _, name := range parts[:len(parts)-1] {
		next, err := openDirBeneath(dir, name)
		if dir != root {
			unix.Close(dir)
		}
		if err != nil {
			return err
		}
		dir = next
	}
	if dir != root {
		defer unix.Close(dir)
	}
	name := parts[len(parts)-1]
	tmp := "." + name + ".lazy-" + strconv.Itoa(os.Getpid())
	_ = unix.Unlinkat(dir, tmp, 0)
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, f.Mode&0o777)
	if err != nil {
		return err
	}
	file := os.NewFile(uintptr(fd), tmp)
	_, err = file.Write(f.Body)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Fchmodat(dir, tmp, f.Mode&0o777, 0)
	}
	if err == nil {
		err = unix.Renameat(dir, tmp, dir, name)
		if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
			// a directory where the decoy belongs: it goes, then the rename
			if err = removeBeneath(dir, name); err == nil {
				err = unix.Renameat(dir, tmp, dir, name)
			}
		}
	}
	if err != nil {
		_ = unix.Unlinkat(dir, tmp, 0)
	}
	return err
}

// openDirBeneath opens (making it if missing) the directory name in dir,
// never through a link: a link or a non-directory there is removed first.
func openDirBeneath(dir int, name string) (int, error) {
	for range 3 {
		fd, err := unix.Openat(dir, name, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			return fd, nil
		}
		switch {
		case errors.Is(err, unix.ENOENT):
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
			if err := unix.Unlinkat(dir, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
				return -1, err
			}
		default:
			return -1, err
		}
		if err := unix.Mkdirat(dir, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, err
		}
	}
	return -1, fmt.Errorf("%s keeps changing under the daemon", name)
}

// removeBeneath removes the tree name in dir without following any link
// (os.RemoveAll opens each level with O_NOFOLLOW; the path goes through
// the descriptor, so no link above it is followed either).
func removeBeneath(dir int, name string) error {
	return os.RemoveAll("/proc/self/fd/" + strconv.Itoa(dir) + "/" + name)
}
