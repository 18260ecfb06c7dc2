package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Credential is a real credential as read from its file.
type Credential struct {
	Value     string
	ExpiresAt time.Time // zero: does not expire
	bytes     []byte    // Value, for the response scrubber
}

// Expired reports whether c has expired at now.
func (c Credential) Expired(now time.Time) bool {
	return !c.ExpiresAt.IsZero() && !now.Before(c.ExpiresAt)
}

// CredentialFile reads a credential file and re-reads it only when its
// identity changed (inode, device, modification or change time, size), so a
// rotated credential is used on the next request without a relaunch, even one
// written in place within the same second at the same size. An unchanged one
// costs one non-blocking read of an inotify watch on its directory (or one
// stat where no watch can see every change).
type CredentialFile struct {
	Path string

	mu    sync.Mutex
	watch *dirWatch
	tried bool // a watch was tried
	id    fileID
	cred  Credential
	err   error
	read  bool
	// last is the last Load's answer and when it was given, for Recent
	last    Credential
	lastErr error
	lastAt  time.Time
}

// fileID is what tells one version of a file from another.
type fileID struct {
	dev, ino     uint64
	mtime, ctime int64 // nanoseconds
	size         int64
}

func idOf(st *syscall.Stat_t) fileID {
	return fileID{dev: uint64(st.Dev), ino: st.Ino, size: st.Size,
		mtime: st.Mtim.Sec*1e9 + st.Mtim.Nsec, ctime: st.Ctim.Sec*1e9 + st.Ctim.Nsec}
}

// ErrNoCredential is a credential file that is missing or empty.
var ErrNoCredential = errors.New("credential missing")

// Recent is the credential as Load last found it, when that was less than
// maxAge ago; otherwise it loads. The scrubber uses it: a key injected in
// this request comes from Load itself, and one not injected here needs no
// stat per request to be recognised.
func (f *CredentialFile) Recent(maxAge time.Duration) (Credential, error) {
	f.mu.Lock()
	if !f.lastAt.IsZero() && time.Since(f.lastAt) < maxAge {
		c, err := f.last, f.lastErr
		f.mu.Unlock()
		return c, err
	}
	f.mu.Unlock()
	return f.Load()
}

// Load returns the current credential.
func (f *CredentialFile) Load() (c Credential, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer func() { f.last, f.lastErr, f.lastAt = c, err, time.Now() }()
	if f.read && f.watch != nil && !f.watch.changed() {
		return f.cred, f.err // nothing in the directory changed since
	}
	if !f.tried {
		// watch before the first read: a change after it is queued
		f.tried, f.watch = true, newDirWatch(f, f.Path)
	}
	// the raw call: os.Stat allocates what this does not need
	var st syscall.Stat_t
	err = syscall.Stat(f.Path, &st)
	if err != nil {
		f.read = false
		return Credential{}, fmt.Errorf("%w: %s", ErrNoCredential, f.Path)
	}
	id := idOf(&st)
	if f.read && id == f.id {
		return f.cred, f.err
	}
	b, err := os.ReadFile(f.Path)
	if err != nil {
		return Credential{}, fmt.Errorf("%w: %s: %v", ErrNoCredential, f.Path, err)
	}
	f.cred, f.err = ParseCredential(b)
	f.id, f.read = id, true
	return f.cred, f.err
}

// ParseCredential reads a bare token or {"token": "...", "expires_at": "RFC 3339"}.
func ParseCredential(b []byte) (Credential, error) {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return Credential{}, fmt.Errorf("%w: the file is empty", ErrNoCredential)
	}
	if !strings.HasPrefix(s, "{") {
		if strings.ContainsAny(s, " \t\r\n") {
			return Credential{}, errors.New("credential file holds more than one token: put the bare token alone, or JSON {\"token\": ...}")
		}
		return Credential{Value: s, bytes: []byte(s)}, nil
	}
	var j struct {
		Token     string `json:"token"`
		ExpiresAt string `json:"expires_at"`
	}
	if err := json.Unmarshal([]byte(s), &j); err != nil {
		return Credential{}, fmt.Errorf("credential file is not valid JSON (%v): write {\"token\": \"...\", \"expires_at\": \"RFC 3339\"} or the bare token", err)
	}
	if j.Token == "" {
		return Credential{}, fmt.Errorf("%w: JSON has no \"token\"", ErrNoCredential)
	}
	c := Credential{Value: j.Token, bytes: []byte(j.Token)}
	if j.ExpiresAt != "" {
		t, err := time.Parse(time.RFC3339, j.ExpiresAt)
		if err != nil {
			return Credential{}, fmt.Errorf("credential expires_at %q is not RFC 3339 (like 2026-12-31T23:00:00Z)", j.ExpiresAt)
		}
		c.ExpiresAt = t
	}
	return c, nil
}
