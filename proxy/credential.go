package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// Credential is a real credential as read from its file.
type Credential struct {
	Value     string
	ExpiresAt time.Time // zero: does not expire
}

// Expired reports whether c has expired at now.
func (c Credential) Expired(now time.Time) bool {
	return !c.ExpiresAt.IsZero() && !now.Before(c.ExpiresAt)
}

// CredentialFile reads a credential file and re-reads it only when its
// modification time or size changed, so a rotated credential is used on the
// next request without a relaunch, and an unchanged one costs one stat.
type CredentialFile struct {
	Path string

	mu    sync.Mutex
	mtime time.Time
	size  int64
	cred  Credential
	err   error
	read  bool
}

// ErrNoCredential is a credential file that is missing or empty.
var ErrNoCredential = errors.New("credential missing")

// Load returns the current credential.
func (f *CredentialFile) Load() (Credential, error) {
	st, err := os.Stat(f.Path)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.read = false
		return Credential{}, fmt.Errorf("%w: %s", ErrNoCredential, f.Path)
	}
	if f.read && st.ModTime().Equal(f.mtime) && st.Size() == f.size {
		return f.cred, f.err
	}
	b, err := os.ReadFile(f.Path)
	if err != nil {
		return Credential{}, fmt.Errorf("%w: %s: %v", ErrNoCredential, f.Path, err)
	}
	f.cred, f.err = ParseCredential(b)
	f.mtime, f.size, f.read = st.ModTime(), st.Size(), true
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
		return Credential{Value: s}, nil
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
	c := Credential{Value: j.Token}
	if j.ExpiresAt != "" {
		t, err := time.Parse(time.RFC3339, j.ExpiresAt)
		if err != nil {
			return Credential{}, fmt.Errorf("credential expires_at %q is not RFC 3339 (like 2026-12-31T23:00:00Z)", j.ExpiresAt)
		}
		c.ExpiresAt = t
	}
	return c, nil
}
