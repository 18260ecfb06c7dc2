package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
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
// costs one non-blocking look at an inotify watch on its directory (or one
// stat where no watch can see every change), taken without a lock: the
// calls of many requests at once do not queue behind each other's system
// call.
type CredentialFile struct {
	Path string

	mu    sync.Mutex
	watch *dirWatch
	tried bool // a watch was tried
	id    fileID
	cred  Credential
	err   error
	read  bool
	// cur is the answer while the watch sees nothing queued (nil: none, or
	// no watch: Load takes mu and stats); reloading is set while a Load
	// holds mu, from before it drains the watch until it stored what it read
	cur       atomic.Pointer[loaded]
	reloading atomic.Bool
	// last is the last Load's answer and lastAt when it was given (unix
	// nanoseconds), for Recent
	last   atomic.Pointer[loaded]
	lastAt atomic.Int64
}

// loaded is one answer of Load.
type loaded struct {
	cred Credential
	err  error
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
	if l := f.last.Load(); l != nil && time.Since(time.Unix(0, f.lastAt.Load())) < maxAge {
		return l.cred, l.err
	}
	return f.Load()
}

// Load returns the current credential. While the directory's watch has
// nothing queued and no other Load is reading the file again, it is the
// answer stored last, read without the lock: a change made before this
// call either is still queued (seen here) or was drained by a Load that
// set reloading first and stores what it read before clearing it.
func (f *CredentialFile) Load() (Credential, error) {
	if f.cur.Load() != nil && !f.watch.pending() && !f.reloading.Load() {
		if cur := f.cur.Load(); cur != nil {
			f.answered(cur)
			return cur.cred, cur.err
		}
	}
	c, err := f.load()
	f.answered(&loaded{c, err})
	return c, err
}

func (f *CredentialFile) answered(l *loaded) {
	f.last.Store(l)
	f.lastAt.Store(time.Now().UnixNano())
}

// load reads the file again if it changed, under mu.
func (f *CredentialFile) load() (Credential, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reloading.Store(true)
	defer f.reloading.Store(false)
	if f.read && f.watch != nil && !f.watch.changed() {
		return f.cred, f.err // nothing in the directory changed since
	}
	if !f.tried {
		// watch before the first read: a change after it is queued
		f.tried, f.watch = true, newDirWatch(f, f.Path)
	}
	// the raw call: os.Stat allocates what this does not need
	var st syscall.Stat_t
	if err := syscall.Stat(f.Path, &st); err != nil {
		f.read = false
		f.cur.Store(nil)
		return Credential{}, fmt.Errorf("%w: %s", ErrNoCredential, f.Path)
	}
	id := idOf(&st)
	if f.read && id == f.id {
		f.stored()
		return f.cred, f.err
	}
	b, err := os.ReadFile(f.Path)
	if err != nil {
		return Credential{}, fmt.Errorf("%w: %s: %v", ErrNoCredential, f.Path, err)
	}
	f.cred, f.err = ParseCredential(b)
	f.id, f.read = id, true
	f.stored()
	return f.cred, f.err
}

// stored makes what was read the answer while the watch sees no change;
// mu held.
func (f *CredentialFile) stored() {
	if f.watch != nil {
		f.cur.Store(&loaded{f.cred, f.err})
	}
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
