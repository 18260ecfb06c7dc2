package api

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// TestStatePaths: the state dir is <home>/daemon/<base>-<8 hex of sha256(root)>
// (CONTRACT §1), and its files are where the client and the daemon both
// look for them.
func TestStatePaths(t *testing.T) {
	sum := sha256.Sum256([]byte("/src/proj"))
	state := "/h/daemon/proj-" + hex.EncodeToString(sum[:4])
	p := StatePaths("/h", "/src/proj")
	for _, c := range []struct{ name, got, want string }{
		{"state", p.State, state},
		{"daemon.json", p.DaemonJSON, state + "/daemon.json"},
		{"auth-token", p.AuthToken, state + "/auth-token"},
		{"proxy-tokens.json", p.ProxyTokens, state + "/proxy-tokens.json"},
		{"lazy.db", p.DB, state + "/lazy.db"},
		{"passphrase", p.Passphrase, state + "/passphrase"},
		{"log", p.Log, state + "/logs/daemon.log"},
		{"recovery", p.Recovery, "/src/proj/.lazy/recovery"},
		{"credentials", p.CredentialsDir, "/h/credentials"},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, c.got, c.want)
		}
	}
	if a, b := StateSlug("/a/proj"), StateSlug("/b/proj"); a == b {
		t.Errorf("two roots of one base name share the slug %s", a)
	}
}

func TestLazyHome(t *testing.T) {
	h, err := LazyHome([]string{"PATH=/bin", "LAZY_HOME=/tmp/lh"})
	if err != nil || h != "/tmp/lh" {
		t.Errorf("LAZY_HOME=/tmp/lh: got %q, %v, want /tmp/lh", h, err)
	}
	// relative: made absolute against the working directory
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if h, err := LazyHome([]string{"LAZY_HOME=rel"}); err != nil || h != filepath.Join(wd, "rel") {
		t.Errorf("LAZY_HOME=rel: got %q, %v, want %s", h, err, filepath.Join(wd, "rel"))
	}
	// empty: the user's ~/.lazy
	uh, err := os.UserHomeDir()
	if err != nil {
		t.Skipf("no home directory: %v", err)
	}
	if h, err := LazyHome([]string{"LAZY_HOME="}); err != nil || h != filepath.Join(uh, ".lazy") {
		t.Errorf("LAZY_HOME empty: got %q, %v, want %s", h, err, filepath.Join(uh, ".lazy"))
	}
}
