package agent

import (
	"os"
	"path/filepath"
	"testing"

	"lazy/canary"
)

// TestWriteDecoysFollowsNothing: whatever the agent left at a decoy's place
// — a link to a directory or a file outside its home, a directory, a file
// where a directory belongs, an edited copy — the daemon's write replaces it
// with the decoy and changes nothing outside the home.
func TestWriteDecoysFollowsNothing(t *testing.T) {
	base := t.TempDir()
	home, outside := filepath.Join(base, "home"), filepath.Join(base, "outside")
	for _, d := range []string{home, outside, filepath.Join(home, ".aws"), filepath.Join(home, ".netrc", "sub")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(outside, filepath.Join(home, ".ssh")))                            // a link where a directory belongs
	must(os.Symlink(victim, filepath.Join(home, ".aws", "credentials")))              // a link where the file belongs
	must(os.WriteFile(filepath.Join(home, ".netrc", "sub", "x"), []byte("x"), 0o600)) // a tree where the file belongs
	must(os.WriteFile(filepath.Join(home, ".config"), []byte("a file"), 0o600))       // a file where a directory belongs

	d := canary.NewMaker([]byte("0123456789abcdef0123456789abcdef")).For("task")
	for round := 0; round < 2; round++ { // and again over its own decoys, one edited
		if err := WriteDecoys(home, d.Files); err != nil {
			t.Fatal(err)
		}
		for _, f := range d.Files {
			p := filepath.Join(home, filepath.FromSlash(f.Path))
			fi, err := os.Lstat(p)
			if err != nil || !fi.Mode().IsRegular() || uint32(fi.Mode().Perm()) != f.Mode {
				t.Fatalf("round %d: %s: %v %v", round, f.Path, fi, err)
			}
			if got, _ := os.ReadFile(p); string(got) != string(f.Body) {
				t.Errorf("round %d: %s holds %q", round, f.Path, got)
			}
		}
		must(os.WriteFile(filepath.Join(home, ".netrc"), []byte("edited"), 0o600))
	}
	if got, _ := os.ReadFile(victim); string(got) != "keep me" {
		t.Errorf("the file outside the home became %q", got)
	}
	if es, _ := os.ReadDir(outside); len(es) != 1 {
		t.Errorf("outside the home: %d entries, want 1", len(es))
	}
}
