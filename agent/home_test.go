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

// TestMoveSessionsNeverFollowsALink: the home's .claude is a link to a
// directory outside: re-keying the sessions removes and renames nothing
// there.
func TestMoveSessionsNeverFollowsALink(t *testing.T) {
	outside := t.TempDir()
	keep := filepath.Join(outside, "projects", claudeProjectKey("/new"))
	if err := os.MkdirAll(keep, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(outside, "projects", claudeProjectKey("/old")), 0o700); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(home, ".claude")); err != nil {
		t.Fatal(err)
	}
	if err := MoveSessions(home, "/old", "/new"); err == nil {
		t.Fatal("sessions moved through a link")
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("a directory outside the home was removed: %v", err)
	}
}

// TestRestoreWritesOnlyFilesAndDirectories: an archive holding a link
// entry (to /etc, to a file outside) and then a file beneath that link
// writes nothing outside the home.
func TestRestoreWritesOnlyFilesAndDirectories(t *testing.T) {
	outside := t.TempDir()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	_ = tw.WriteHeader(&tar.Header{Name: "out", Typeflag: tar.TypeSymlink, Linkname: outside})
	_ = tw.WriteHeader(&tar.Header{Name: "out/evil", Mode: 0o600, Size: 4, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("evil"))
	_ = tw.Close()
	_ = zw.Close()
	to := filepath.Join(t.TempDir(), "home")
	_ = RestoreHome(to, buf.Bytes())
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("the archive wrote outside the home: %v", ents)
	}
	if fi, err := os.Lstat(filepath.Join(to, "out")); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		t.Fatal("a link entry was unpacked")
	}
}

// FuzzRestoreHome: whatever bytes the store hands back as a home's archive
// (it was packed from a home an agent wrote), unpacking never writes
// outside the home's directory and never panics.
func FuzzRestoreHome(f *testing.F) {
	home := filepath.Join(f.TempDir(), "home")
	_ = os.MkdirAll(filepath.Join(home, ".claude"), 0o700)
	_ = os.WriteFile(filepath.Join(home, ".claude", "s.jsonl"), []byte("{}"), 0o600)
	if a, err := ArchiveHome(home); err == nil {
		f.Add(a)
	}
	for _, entries := range [][]tar.Header{
		{{Name: "../evil", Size: 1, Typeflag: tar.TypeReg}},
		{{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/"}, {Name: "l/x", Size: 1, Typeflag: tar.TypeReg}},
		{{Name: "d", Typeflag: tar.TypeDir}, {Name: "d/../../x", Size: 1, Typeflag: tar.TypeReg}},
		{{Name: "big", Size: MaxHomeArchive + 1, Typeflag: tar.TypeReg}},
	} {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		tw := tar.NewWriter(zw)
		for _, h := range entries {
			h.Mode = 0o600
			_ = tw.WriteHeader(&h)
			if h.Size > 0 && h.Size < 10 {
				_, _ = tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
			}
		}
		_ = tw.Close()
		_ = zw.Close()
		f.Add(buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, archive []byte) {
		base := t.TempDir()
		dir := filepath.Join(base, "agents", "t1")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		_ = RestoreHome(filepath.Join(dir, "home"), archive)
		err := filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p == base || p == filepath.Join(base, "agents") || p == dir {
				return nil
			}
			if !strings.HasPrefix(p, filepath.Join(dir, "home")) {
				t.Fatalf("unpacking wrote %s, outside the home", p)
			}
			if d.Type()&os.ModeSymlink != 0 {
				t.Fatalf("unpacking made a link: %s", p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
