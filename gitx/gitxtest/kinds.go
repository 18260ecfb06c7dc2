package gitxtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// KindsBinary is the binary file's content in DiffKindsRepo's main; task
// adds KindsBinaryMore bytes to it.
var KindsBinary = strings.Repeat("\x00\x01binary", 1000)

// KindsBinaryMore is what task~1 appends to the binary file (2 KB).
var KindsBinaryMore = strings.Repeat("more", 512)

// KindsLinkTarget is the target of the link the agent adds: markup and a
// path out of the tree, which a page must show as text and never follow.
const KindsLinkTarget = "../<b>&etc/passwd"

// DiffKindsRepo makes a repository whose diffs change more than lines.
// main..task~1 holds: run.sh made executable (mode only), both.sh made
// executable with a changed line, before.txt renamed to after.txt with one
// line changed (95% similar), bin.dat a binary file grown by
// KindsBinaryMore, empty.txt an empty file added, new-link a symbolic link
// to KindsLinkTarget added and old-link retargeted. task~1..task removes
// the empty file was-empty.md (in a commit of its own: beside empty.txt,
// git would call the pair a rename).
func DiffKindsRepo(t testing.TB) string {
	t.Helper()
	root := NewRepo(t, map[string]string{
		"run.sh":       "echo hi\n",
		"both.sh":      "echo one\n",
		"before.txt":   strings.Repeat("a line of text\n", 20),
		"bin.dat":      KindsBinary,
		"was-empty.md": "",
	})
	if err := os.Symlink("before.txt", filepath.Join(root, "old-link")); err != nil {
		t.Fatal(err)
	}
	Git(t, root, "add", "old-link")
	Git(t, root, "commit", "-q", "-m", "link")
	Git(t, root, "checkout", "-q", "-b", "task")
	for _, f := range []string{"run.sh", "both.sh"} {
		if err := os.Chmod(filepath.Join(root, f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	Git(t, root, "mv", "before.txt", "after.txt")
	if err := os.Remove(filepath.Join(root, "old-link")); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"old-link": "after.txt", "new-link": KindsLinkTarget} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	Git(t, root, "add", "-A")
	Commit(t, root, "kinds", map[string]string{
		"both.sh":   "echo two\n",
		"after.txt": strings.Repeat("a line of text\n", 19) + "changed\n",
		"bin.dat":   KindsBinary + KindsBinaryMore,
		"empty.txt": "",
	})
	Git(t, root, "rm", "-q", "was-empty.md")
	Git(t, root, "commit", "-q", "-m", "rm")
	return root
}
