package proxy

import (
	"os"
	"path/filepath"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// dirWatch tells whether anything changed in a directory since it was last
// asked, with one non-blocking read of an inotify descriptor: the kernel
// queues an event before the writer's rename or write returns, so a change
// made before a request is always seen by it, and an unchanged file costs no
// path lookup at all.
type dirWatch struct {
	fd  int
	buf [4096]byte
}

const watchMask = syscall.IN_ATTRIB | syscall.IN_CLOSE_WRITE | syscall.IN_CREATE | syscall.IN_DELETE | syscall.IN_MODIFY |
	syscall.IN_MOVED_FROM | syscall.IN_MOVED_TO | syscall.IN_DELETE_SELF | syscall.IN_MOVE_SELF

// newDirWatch watches the directory of path, or returns nil when a watch
// could not see every change: path or its directory behind a symlink (the
// change would happen elsewhere), or no inotify instance to be had. The
// caller then stats on every request.
func newDirWatch(owner *CredentialFile, path string) *dirWatch {
	dir := filepath.Dir(path)
	if real, err := filepath.EvalSymlinks(dir); err != nil || real != dir {
		return nil
	}
	if st, err := os.Lstat(path); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	if _, err := syscall.InotifyAddWatch(fd, dir, watchMask); err != nil {
		syscall.Close(fd)
		return nil
	}
	w := &dirWatch{fd: fd}
	runtime.AddCleanup(owner, func(fd int) { syscall.Close(fd) }, fd)
	return w
}

// pending reports whether the queue holds anything, without draining it
// (an error counts as something: the caller takes the slow way).
func (w *dirWatch) pending() bool {
	n, err := unix.IoctlGetInt(w.fd, unix.TIOCINQ) // FIONREAD: bytes queued
	return err != nil || n > 0
}

// changed drains the queue and reports whether it held anything; an error
// other than "nothing queued" counts as a change (the caller stats).
func (w *dirWatch) changed() bool {
	n, err := syscall.Read(w.fd, w.buf[:])
	if err == syscall.EAGAIN {
		return false
	}
	for err == nil && n > 0 {
		n, err = syscall.Read(w.fd, w.buf[:])
	}
	return true
}
