package agent

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestHomeTravels: a task's agent home packed on one member unpacks whole
// on another, replacing what was there.
func TestHomeTravels(t *testing.T) {
	from := filepath.Join(t.TempDir(), "home")
	for name, body := range map[string]string{".claude/projects/-wt-a/s1.jsonl": "{\"turn\":1}\n", ".script-agent/sessions/s1.json": "{}", "top": "x"} {
		p := filepath.Join(from, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a, err := ArchiveHome(from)
	if err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(t.TempDir(), "agents", "t1", "home")
	if err := os.MkdirAll(to, 0o700); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(to, "stale"), []byte("old"), 0o600)
	if err := RestoreHome(to, a); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(to, ".claude/projects/-wt-a/s1.jsonl")); err != nil || string(b) != "{\"turn\":1}\n" {
		t.Fatalf("session: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(to, "stale")); !os.IsNotExist(err) {
		t.Fatal("the old home's files stayed")
	}
}

// TestRestoreRefusesEscapes: an archive whose entry climbs out of the home
// changes nothing.
func TestRestoreRefusesEscapes(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	_ = tw.WriteHeader(&tar.Header{Name: "../../evil", Mode: 0o600, Size: 1, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	_ = zw.Close()
	base := t.TempDir()
	to := filepath.Join(base, "a", "home")
	if err := RestoreHome(to, buf.Bytes()); err == nil || !strings.Contains(err.Error(), "leaves the home") {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(filepath.Join(base, "evil")); !os.IsNotExist(err) {
		t.Fatal("the entry was written outside the home")
	}
}

// TestMoveSessions: a claude session kept under the old worktree's key is
// found under the new one's.
func TestMoveSessions(t *testing.T) {
	home := t.TempDir()
	old := filepath.Join(home, ".claude", "projects", "-state-a-worktrees-t1-x")
	if err := os.MkdirAll(old, 0o700); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(old, "s1.jsonl"), []byte("{}"), 0o600)
	if err := MoveSessions(home, "/state/a/worktrees/t1.x", "/state/b/worktrees/t1.x"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(home, ".claude", "projects", "-state-b-worktrees-t1-x", "s1.jsonl")); err != nil {
		t.Fatalf("the session did not move: %v", err)
	}
	if err := MoveSessions(home, "/nowhere", "/else"); err != nil {
		t.Fatalf("nothing to move: %v", err)
	}
}

// TestArchiveTrustsNothingInTheHome: the agent wrote its home. A link to a
// file outside it (the daemon's own secrets, say) is not packed, a pipe is
// not waited on, and a home over the limit is refused without being read
// whole.
func TestArchiveTrustsNothingInTheHome(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("sk-ant-real-credential"), 0o600); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(t.TempDir(), "home")
	if err := os.MkdirAll(filepath.Join(home, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(home, ".claude", "s.jsonl"), []byte("{}"), 0o600)
	if err := os.Symlink(outside, filepath.Join(home, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(home, "dirlink")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(home, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := ArchiveHome(home)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(zr)
	if bytes.Contains(raw, []byte("sk-ant-real-credential")) {
		t.Fatal("a link out of the home carried a file into the archive")
	}
	if !bytes.Contains(raw, []byte(".claude/s.jsonl")) {
		t.Fatal("the session was not packed")
	}
	// over the limit: refused before it is read (a sparse 10 GiB file)
	big := filepath.Join(home, "big")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(10 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := ArchiveHome(home); err == nil || !strings.Contains(err.Error(), "MiB") {
		t.Fatalf("a 10 GiB home: %v", err)
	}
	_ = os.Remove(big)
	if _, err := ArchiveHome(home); err != nil {
		t.Fatalf("the home back under the limit: %v", err)
	}
}
