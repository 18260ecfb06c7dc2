package gitx

import (
	"context"
	"strings"
	"testing"

	"lazy/gitx/gitxtest"
)

// TestBatchFreshAndRestarted: the long-lived cat-file answers what a new
// git process would — a ref moved, made, deleted or packed since its last
// answer — comes back after it is killed, and is never fed a name that is
// more than a ref (those go to a process of their own).
func TestBatchFreshAndRestarted(t *testing.T) {
	ctx := context.Background()
	root := gitxtest.NewRepo(t, map[string]string{"a.txt": "a\n"})
	first := strings.TrimSpace(gitxtest.Git(t, root, "rev-parse", "HEAD"))
	if got, err := RevParse(ctx, root, "main"); err != nil || got != first {
		t.Fatalf("main: %q %v, want %s", got, err, first)
	}
	gitxtest.Commit(t, root, "two", map[string]string{"a.txt": "b\n"})
	second := strings.TrimSpace(gitxtest.Git(t, root, "rev-parse", "HEAD"))
	if got, _ := RevParse(ctx, root, "main"); got != second {
		t.Fatalf("after a commit main is %q, want %s (a stale answer)", got, second)
	}
	if BranchExists(ctx, root, "side") {
		t.Fatal("side exists before it is made")
	}
	gitxtest.Git(t, root, "branch", "side", first)
	gitxtest.Git(t, root, "pack-refs", "--all")
	if got, _ := RevParse(ctx, root, "refs/heads/side"); got != first || !BranchExists(ctx, root, "side") {
		t.Fatalf("packed side: %q", got)
	}
	gitxtest.Git(t, root, "update-ref", "refs/heads/side", second)
	if got, _ := RevParse(ctx, root, "side"); got != second {
		t.Fatalf("side moved, read %q", got)
	}
	gitxtest.Git(t, root, "branch", "-D", "side")
	if BranchExists(ctx, root, "side") {
		t.Fatal("side deleted, still found")
	}
	// killed: the next question starts another
	b := batchFor(root)
	b.mu.Lock()
	pid := b.cmd.Process.Pid
	_ = b.cmd.Process.Kill()
	b.mu.Unlock()
	if got, err := RevParse(ctx, root, "main"); err != nil || got != second {
		t.Fatalf("after the batch died: %q %v", got, err)
	}
	b.mu.Lock()
	if b.cmd == nil || b.cmd.Process.Pid == pid {
		t.Error("no new batch process")
	}
	b.mu.Unlock()
	// names that are more than a ref never reach it
	for _, n := range []string{"main\nHEAD", "main@{1}", ":/two", "HEAD:a.txt", "main..main", "-h", "a b"} {
		if batchName(n) {
			t.Errorf("%q may be asked of the batch", n)
		}
	}
	if _, err := RevParse(ctx, root, "main\nHEAD"); err == nil {
		t.Error("a name with a newline resolved")
	}
	CloseBatches()
	b.mu.Lock()
	if b.cmd != nil {
		t.Error("CloseBatches left the process running")
	}
	b.mu.Unlock()
}
