package gitx

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadBlobs(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		out, err := Run(context.Background(), dir, args...)
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return out
	}
	git("init", "-q")
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.go", "package a\n")
	write("big.txt", strings.Repeat("x", 100))
	git("add", ".")
	git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
	a := git("rev-parse", "HEAD:a.go")
	big := git("rev-parse", "HEAD:big.txt")
	tree := git("rev-parse", "HEAD^{tree}")
	got, err := ReadBlobs(context.Background(), dir, []string{a[:9], big, tree, "deadbeef", "not hex\ninfo x", "0000000"}, 50, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if string(got[a[:9]]) != "package a\n" {
		t.Errorf("a.go by its abbreviated id: got %q, want %q", got[a[:9]], "package a\n")
	}
	if len(got) != 1 {
		t.Errorf("got %d blobs, want only a.go (big.txt is over the bound, the rest no blob): %v", len(got), got)
	}
}
