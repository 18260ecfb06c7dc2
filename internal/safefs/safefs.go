// Package safefs opens, reads, writes, lists and removes files beneath one
// directory without ever following a symbolic link: the daemon's only way
// into anything an agent wrote (its home, its worktree, the archive of its
// home, the markers the daemon keeps there).
//
// Every path is resolved by the kernel relative to a directory descriptor
// with openat2(2) and RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS: a link anywhere in
// the path (the last component, a parent directory, one swapped in between
// a check and a use) or a ".." that leaves the directory fails the call with
// ErrLink or ErrEscape, and nothing outside is read or written. os.Root is
// not enough: it keeps opens beneath its root but follows links that stay
// inside it. Reads are bounded by the caller's limit; a pipe or device is
// never opened for reading.
//
// It must not be used for the daemon's own files (its state dir, config):
// those are trusted and opened the ordinary way.
package safefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

var (
	// ErrLink: a symbolic link is in the path (safefs follows none).
	ErrLink = errors.New("a symbolic link is in the path (links in an agent's files are never followed)")
	// ErrEscape: the path leaves the directory it is opened beneath.
	ErrEscape = errors.New("the path leaves its directory")
	// ErrTooLarge: the file is over the caller's size limit.
	ErrTooLarge = errors.New("the file is over its size limit")
	// ErrNotRegular: a read or write found a directory, pipe, socket or
	// device where a regular file was expected.
	ErrNotRegular = errors.New("not a regular file")
	// ErrUnsupported: the kernel has no openat2(2).
	ErrUnsupported = errors.New("openat2(2) is unavailable: the daemon needs Linux 5.6 or later " +
		"(or a container seccomp profile that allows openat2) to open an agent's files without following links; " +
		"upgrade the kernel or allow the syscall")
)

// Entry is one entry of a Walk: its path relative to the walked directory
// (slash-separated), what fstat says of it, and for a regular file the file
// open for reading (nil otherwise; Walk closes it after the callback).
type Entry struct {
	Rel  string
	Info fs.FileInfo
	File *os.File
}

// pathError wraps err as an *fs.PathError of op on name.
func pathError(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// tooLarge says which file and limit.
func tooLarge(name string, limit int64) error {
	return pathError("read", name, fmt.Errorf("%w (%d bytes)", ErrTooLarge, limit))
}
