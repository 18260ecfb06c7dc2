package grainpb

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedIsFresh: lazytask.pb.go is what `go generate` makes of
// lazytask.proto today, so the committed wire and its source never part.
func TestGeneratedIsFresh(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("protoc is missing: make test installs Debian's protobuf-compiler")
		}
		t.Skip("protoc is missing: apt-get install protobuf-compiler")
	}
	dir := t.TempDir()
	src, err := os.ReadFile("lazytask.proto")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lazytask.proto"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs("../../scripts/protoc.sh")
	cmd := exec.Command(script, "lazytask.proto")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want, _ := os.ReadFile(filepath.Join(dir, "lazytask.pb.go"))
	have, _ := os.ReadFile("lazytask.pb.go")
	if !bytes.Equal(want, have) {
		t.Fatal("lazytask.pb.go is stale: run go generate ./grain/grainpb and commit it")
	}
}
