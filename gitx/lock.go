package gitx

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"lazy/errkind"
)

// Holder says who holds a worktree lock.
type Holder struct {
	What  string    `json:"what"` // e.g. "work turn 3", "sync"
	PID   int       `json:"pid"`
	Since time.Time `json:"since"`
}

// LockedError is a lock already held; it names the holder.
type LockedError struct {
	Path   string
	Holder Holder
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("the worktree is busy: %s holds its lock since %s; wait for it to finish and try again",
		e.Holder.What, e.Holder.Since.Format(time.RFC3339))
}

// ErrLocked matches any *LockedError with errors.Is.
var ErrLocked = errkind.New(errkind.Locked, "worktree locked")

func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// ErrorKind is errkind.Locked.
func (e *LockedError) ErrorKind() errkind.Kind { return errkind.Locked }

// Lock is a held worktree lock.
type Lock struct {
	f *os.File
}

// TryLock takes the lock file at path without waiting. It is an flock, so it
// also excludes other processes; the file records who holds it.
func TryLock(path, what string) (*Lock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create lock dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		var h Holder
		if b, rerr := os.ReadFile(path); rerr == nil {
			_ = json.Unmarshal(b, &h)
		}
		if h.What == "" {
			h.What = "another operation"
		}
		return nil, &LockedError{Path: path, Holder: h}
	}
	b, _ := json.Marshal(Holder{What: what, PID: os.Getpid(), Since: time.Now().UTC()})
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(b, 0)
	}
	return &Lock{f: f}, nil
}

// Unlock releases the lock.
func (l *Lock) Unlock() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Truncate(0)
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}
