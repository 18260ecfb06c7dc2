// Package gitxtest makes real git repositories in temp dirs for tests.
package gitxtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// NewRepo makes a git repository with one commit on branch main holding the
// given files, and returns its absolute path.
func NewRepo(t testing.TB, files map[string]string) string {
	t.Helper()
	return NewRepoIn(t, t.TempDir(), files)
}

// NewRepoIn is NewRepo in a directory the caller chose (it must exist).
func NewRepoIn(t testing.TB, dir string, files map[string]string) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	Git(t, dir, "init", "-q", "-b", "main")
	if len(files) == 0 {
		files = map[string]string{"README.md": "# test project\n"}
	}
	Commit(t, dir, "initial", files)
	return dir
}

// Commit writes files in dir and commits them.
func Commit(t testing.TB, dir, msg string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	Git(t, dir, "add", "-A")
	Git(t, dir, "commit", "-q", "-m", msg)
}

// Git runs git in dir with a fixed identity and fails the test on error.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@localhost", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}
