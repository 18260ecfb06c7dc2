package safefs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Dir is a directory opened as a root: every name given to its methods is
// resolved beneath it, and no link is followed.
type Dir struct {
	f    *os.File
	fd   int
	path string
}

const resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// Open opens the directory at path as a root. path is the daemon's own
// (trusted up to its last component); its last component must be a
// directory, not a link to one.
func Open(path string) (*Dir, error) {
	fd, err := retry(func() (int, error) {
		return unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			err = unix.ELOOP
		}
	}
	if err != nil {
		return nil, pathError("open", path, mapErr(err))
	}
	if err := probe(fd); err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	return &Dir{f: os.NewFile(uintptr(fd), path), fd: fd, path: path}, nil
}

// openat2Missing is set once the kernel said it has no openat2.
var openat2Missing atomic.Bool

// probe checks once that the kernel has openat2, so a missing one is said
// when a root is opened rather than as a puzzling failure later.
func probe(fd int) error {
	if openat2Missing.Load() {
		return ErrUnsupported
	}
	nfd, err := openat2(fd, ".", unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	return unix.Close(nfd)
}

// Close releases the directory.
func (d *Dir) Close() error { return d.f.Close() }

// Path is the path the directory was opened at (for messages).
func (d *Dir) Path() string { return d.path }

func openat2(dirfd int, name string, flags int, mode uint32) (int, error) {
	if flags&unix.O_PATH == 0 {
		flags |= unix.O_NOFOLLOW
	}
	// (O_PATH with O_NOFOLLOW would open a trailing link itself; without
	// it, RESOLVE_NO_SYMLINKS refuses the link like any other)
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolve}
	fd, err := retry(func() (int, error) { return unix.Openat2(dirfd, name, &how) })
	if errors.Is(err, unix.ENOSYS) {
		openat2Missing.Store(true)
		return -1, ErrUnsupported
	}
	return fd, mapErr(err)
}

// retry repeats a call interrupted by a signal, or refused by openat2
// because a rename raced with the lookup (EAGAIN).
func retry(call func() (int, error)) (int, error) {
	for i := 0; ; i++ {
		fd, err := call()
		if (errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN)) && i < 100 {
			continue
		}
		return fd, err
	}
}

// mapErr turns openat2's refusals into this package's errors.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ELOOP):
		return ErrLink
	case errors.Is(err, unix.EXDEV):
		return ErrEscape
	}
	return err
}

// clean checks name is a relative path beneath the directory and returns
// it cleaned ("." for the directory itself).
func clean(name string) (string, error) {
	if name == "" || name == "." {
		return ".", nil
	}
	if strings.IndexByte(name, 0) >= 0 {
		return "", errors.New("a NUL byte in a path")
	}
	if !filepath.IsLocal(name) {
		return "", ErrEscape
	}
	return filepath.Clean(name), nil
}

// parent opens the directory that holds name and returns it with name's
// last component. The caller closes the fd.
func (d *Dir) parent(op, name string) (int, string, error) {
	c, err := clean(name)
	if err != nil {
		return -1, "", pathError(op, name, err)
	}
	if c == "." {
		return -1, "", pathError(op, name, errors.New("needs a name beneath the directory"))
	}
	dir, base := filepath.Split(c)
	if dir == "" {
		dir = "."
	}
	fd, err := openat2(d.fd, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, "", pathError(op, name, err)
	}
	return fd, base, nil
}

// OpenFile opens name beneath the directory with flag and perm (O_NOFOLLOW
// and O_CLOEXEC added). A read-only open of anything but a regular file or
// directory fails with ErrNotRegular, without blocking on a pipe.
func (d *Dir) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	c, err := clean(name)
	if err != nil {
		return nil, pathError("open", name, err)
	}
	if flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		flag |= unix.O_NONBLOCK // a pipe swapped in never holds the daemon
	}
	fd, err := openat2(d.fd, c, flag, uint32(perm.Perm()))
	if err != nil {
		return nil, pathError("open", name, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(d.path, c))
	if flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		st, err := f.Stat()
		if err != nil {
			_ = f.Close()
			return nil, err
		}
		if !st.Mode().IsRegular() && !st.IsDir() {
			_ = f.Close()
			return nil, pathError("open", name, ErrNotRegular)
		}
	}
	return f, nil
}

// OpenDir opens the directory name beneath d as a root of its own.
func (d *Dir) OpenDir(name string) (*Dir, error) {
	c, err := clean(name)
	if err != nil {
		return nil, pathError("open", name, err)
	}
	fd, err := openat2(d.fd, c, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, pathError("open", name, err)
	}
	p := filepath.Join(d.path, c)
	return &Dir{f: os.NewFile(uintptr(fd), p), fd: fd, path: p}, nil
}

// ReadFile reads the regular file name, refusing one over limit bytes
// (ErrTooLarge) whatever it grows to while read.
func (d *Dir) ReadFile(name string, limit int64) ([]byte, error) {
	f, err := d.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, pathError("read", name, ErrNotRegular)
	}
	if st.Size() > limit {
		return nil, tooLarge(name, limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(name, limit)
	}
	return b, nil
}

var tmpSeq atomic.Int64

// WriteFile replaces name by a regular file holding data: it is written
// under a fresh name in the same directory and renamed over name, so a link
// that stood at name is replaced, never followed, and a reader never sees
// half a file.
func (d *Dir) WriteFile(name string, data []byte, perm fs.FileMode) error {
	pfd, base, err := d.parent("write", name)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	tmp := "." + base + ".tmp-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(tmpSeq.Add(1), 10) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	fd, err := openat2(pfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, uint32(perm.Perm()))
	if err != nil {
		return pathError("write", name, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(pfd, tmp, pfd, base)
	}
	if err != nil {
		_ = unix.Unlinkat(pfd, tmp, 0)
		return pathError("write", name, err)
	}
	return nil
}

// Stat describes name itself; a link (there or in a parent) is ErrLink.
func (d *Dir) Stat(name string) (fs.FileInfo, error) {
	c, err := clean(name)
	if err != nil {
		return nil, pathError("stat", name, err)
	}
	fd, err := openat2(d.fd, c, unix.O_PATH, 0)
	if err != nil {
		return nil, pathError("stat", name, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(d.path, c))
	defer f.Close()
	return f.Stat()
}

// MkdirAll makes directory name and any parents missing, beneath d; a link
// on the way is ErrLink.
func (d *Dir) MkdirAll(name string, perm fs.FileMode) error {
	c, err := clean(name)
	if err != nil {
		return pathError("mkdir", name, err)
	}
	if c == "." {
		return nil
	}
	cur := -1 // d.fd until the first component is open
	defer func() {
		if cur >= 0 {
			_ = unix.Close(cur)
		}
	}()
	for _, part := range strings.Split(c, string(filepath.Separator)) {
		at := d.fd
		if cur >= 0 {
			at = cur
		}
		if err := unix.Mkdirat(at, part, uint32(perm.Perm())); err != nil && !errors.Is(err, unix.EEXIST) {
			return pathError("mkdir", name, err)
		}
		next, err := openat2(at, part, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return pathError("mkdir", name, err)
		}
		if cur >= 0 {
			_ = unix.Close(cur)
		}
		cur = next
	}
	return nil
}

// Remove removes the file, link or empty directory name (a link itself,
// never what it points at).
func (d *Dir) Remove(name string) error {
	pfd, base, err := d.parent("remove", name)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	err = unix.Unlinkat(pfd, base, 0)
	if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) {
		err = unix.Unlinkat(pfd, base, unix.AT_REMOVEDIR)
	}
	if err != nil {
		return pathError("remove", name, err)
	}
	return nil
}

// RemoveAll removes name and everything beneath it; links are removed, not
// followed. A name that does not exist is no error.
func (d *Dir) RemoveAll(name string) error {
	pfd, base, err := d.parent("remove", name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := removeAllAt(pfd, base, 0); err != nil {
		return pathError("remove", name, err)
	}
	return nil
}

// removeAllAt removes base in the directory pfd, depth-first.
func removeAllAt(pfd int, base string, depth int) error {
	err := unix.Unlinkat(pfd, base, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	if depth > 256 {
		return errors.New("directories nested over 256 deep")
	}
	fd, err := openat2(pfd, base, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	dir := os.NewFile(uintptr(fd), base)
	for {
		names, rerr := dir.Readdirnames(256)
		for _, n := range names {
			if err := removeAllAt(fd, n, depth+1); err != nil {
				_ = dir.Close()
				return err
			}
		}
		if rerr != nil || len(names) == 0 {
			break
		}
	}
	_ = dir.Close()
	err = unix.Unlinkat(pfd, base, unix.AT_REMOVEDIR)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// Rename moves oldName to newName, both beneath d; neither is followed if
// it is a link (a link at newName is replaced).
func (d *Dir) Rename(oldName, newName string) error {
	ofd, obase, err := d.parent("rename", oldName)
	if err != nil {
		return err
	}
	defer unix.Close(ofd)
	nfd, nbase, err := d.parent("rename", newName)
	if err != nil {
		return err
	}
	defer unix.Close(nfd)
	if err := unix.Renameat(ofd, obase, nfd, nbase); err != nil {
		return pathError("rename", oldName, err)
	}
	return nil
}

// Walk calls fn for every entry beneath d, parents before children, names in
// lexical order. Each directory is listed through its own descriptor and
// each entry opened relative to it, without following links: a link is
// skipped (it never reaches fn), and an entry swapped for a link or moved
// between its listing and its open is skipped too. A regular file comes
// with File open for reading; other kinds (pipes, sockets, devices) come
// with File nil and are never opened for reading.
func (d *Dir) Walk(fn func(Entry) error) error {
	return walk(d.fd, "", fn, 0)
}

func walk(dirfd int, rel string, fn func(Entry) error, depth int) error {
	if depth > 256 {
		return pathError("walk", rel, errors.New("directories nested over 256 deep"))
	}
	// a description of its own: the listing starts at the first entry
	fd, err := openat2(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return pathError("walk", rel, err)
	}
	dir := os.NewFile(uintptr(fd), rel)
	names, err := dir.Readdirnames(-1)
	_ = dir.Close()
	if errors.Is(err, fs.ErrNotExist) && rel != "" {
		return nil // removed while it was walked
	}
	if err != nil {
		return pathError("walk", rel, err)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := walkOne(dirfd, rel, n, fn, depth); err != nil {
			return err
		}
	}
	return nil
}

func walkOne(dirfd int, rel, name string, fn func(Entry) error, depth int) error {
	r := path.Join(rel, name)
	pfd, err := openat2(dirfd, name, unix.O_PATH, 0)
	if err != nil {
		// a link, or gone since the listing
		return nil
	}
	var st unix.Stat_t
	err = unix.Fstat(pfd, &st)
	_ = unix.Close(pfd)
	if err != nil {
		return nil
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		fd, err := openat2(dirfd, name, unix.O_RDONLY|unix.O_NONBLOCK, 0)
		if err != nil {
			return nil
		}
		f := os.NewFile(uintptr(fd), r)
		defer f.Close()
		info, err := f.Stat()
		if err != nil || !info.Mode().IsRegular() || !same(info, &st) {
			return nil // swapped since it was looked at
		}
		return fn(Entry{Rel: r, Info: info, File: f})
	case unix.S_IFDIR:
		fd, err := openat2(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return nil
		}
		f := os.NewFile(uintptr(fd), r)
		defer f.Close()
		info, err := f.Stat()
		if err != nil || !same(info, &st) {
			return nil
		}
		if err := fn(Entry{Rel: r, Info: info}); err != nil {
			return err
		}
		return walk(fd, r, fn, depth+1)
	default:
		fd, err := openat2(dirfd, name, unix.O_PATH, 0)
		if err != nil {
			return nil
		}
		f := os.NewFile(uintptr(fd), r)
		defer f.Close()
		info, err := f.Stat()
		if err != nil {
			return nil
		}
		return fn(Entry{Rel: r, Info: info})
	}
}

// same reports whether info is of the inode st describes.
func same(info fs.FileInfo, st *unix.Stat_t) bool {
	now, ok := info.Sys().(*syscall.Stat_t)
	return ok && uint64(now.Dev) == st.Dev && now.Ino == st.Ino
}

// String names the directory.
func (d *Dir) String() string { return fmt.Sprintf("safefs.Dir(%s)", d.path) }
