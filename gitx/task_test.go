package gitx

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lazy/gitx/gitxtest"
)

// newTask makes task lazy/<name> from main in root, its worktree at
// <tmp>/worktrees/<name> and its repository at <tmp>/repos/<name>.git.
func newTask(t *testing.T, root, name string) TaskRepo {
	t.Helper()
	wt := filepath.Join(t.TempDir(), "worktrees", name)
	if err := CreateTask(context.Background(), root, wt, "lazy/"+name, "main"); err != nil {
		t.Fatal(err)
	}
	return TaskRepo{Project: root, Worktree: wt, Branch: "lazy/" + name, Parent: "main"}
}

// agentCommit commits in the task's worktree as an agent would (its git
// finds the task repository through the worktree's .git file), then imports.
func agentCommit(t *testing.T, tr TaskRepo, msg string, files map[string]string) {
	t.Helper()
	gitxtest.Commit(t, tr.Worktree, msg, files)
	mustImport(t, tr)
}

func mustImport(t *testing.T, tr TaskRepo) string {
	t.Helper()
	head, err := tr.Import(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return head
}

// writeLoose writes a loose object file named id with body as its content:
// what an agent can do in any object store it may write (git does not check
// a loose object's hash when it reads it).
func writeLoose(t *testing.T, objects, id, kind, body string) {
	t.Helper()
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	fmt.Fprintf(w, "%s %d\x00%s", kind, len(body), body)
	_ = w.Close()
	p := filepath.Join(objects, id[:2], id[2:])
	_ = os.MkdirAll(filepath.Dir(p), 0o755)
	_ = os.Remove(p)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTaskRepoShape: the task repository is its own (objects, refs), the
// project's objects are its alternate, the worktree's .git names it, and the
// agent's commits stay there until the import.
func TestTaskRepoShape(t *testing.T) {
	ctx := context.Background()
	root := gitxtest.NewRepo(t, map[string]string{"a.txt": "a\n"})
	tr := newTask(t, root, "s")
	if want := filepath.Join(filepath.Dir(filepath.Dir(tr.Worktree)), "repos", "s.git"); tr.GitDir() != want {
		t.Fatalf("GitDir: got %s, want %s", tr.GitDir(), want)
	}
	objects, _ := ProjectObjects(ctx, root)
	if b, _ := os.ReadFile(filepath.Join(tr.GitDir(), "objects", "info", "alternates")); strings.TrimSpace(string(b)) != objects {
		t.Errorf("alternates: got %q, want %s", b, objects)
	}
	if b, _ := os.ReadFile(filepath.Join(tr.Worktree, ".git")); string(b) != "gitdir: "+tr.GitDir()+"\n" {
		t.Errorf(".git file: %q", b)
	}
	if out := gitxtest.Git(t, root, "worktree", "list", "--porcelain"); strings.Contains(out, tr.Worktree) {
		t.Errorf("the task worktree is a worktree of the project:\n%s", out)
	}
	before, _ := RevParse(ctx, root, "lazy/s")
	gitxtest.Commit(t, tr.Worktree, "work", map[string]string{"b.txt": "b\n"})
	if now, _ := RevParse(ctx, root, "lazy/s"); now != before {
		t.Fatal("an agent's commit moved the project's branch before any import")
	}
	if out := gitxtest.Git(t, tr.Worktree, "status", "--porcelain"); out != "" {
		t.Errorf("status after the commit: %q", out)
	}
	head := mustImport(t, tr)
	if got := strings.TrimSpace(gitxtest.Git(t, tr.Worktree, "rev-parse", "HEAD")); got != head {
		t.Errorf("after the import the project has %s, the task %s", head, got)
	}
	if err := tr.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tr.GitDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the task repository outlived Remove: %v", err)
	}
	gitxtest.Git(t, root, "fsck", "--strict", "--no-progress")
	if got, _ := RevParse(ctx, root, "lazy/s"); got != head {
		t.Errorf("the project lost the imported head")
	}
}

// TestImportRefusesReplacedBlob: the agent swaps the content of a blob of its
// own commit; the import refuses it, and the project is unchanged.
func TestImportRefusesReplacedBlob(t *testing.T) {
	ctx := context.Background()
	root := gitxtest.NewRepo(t, map[string]string{"app.py": "pay(amount)\n"})
	tr := newTask(t, root, "blob")
	first := agentCommit2(t, tr, "honest", map[string]string{"app.py": "pay(amount)\nlog(amount)\n"})
	gitxtest.Commit(t, tr.Worktree, "second", map[string]string{"app.py": "pay(amount)\nlog(amount, 2)\n"})
	blob := strings.TrimSpace(gitxtest.Git(t, tr.Worktree, "rev-parse", "HEAD:app.py"))
	writeLoose(t, filepath.Join(tr.GitDir(), "objects"), blob, "blob", "send_to_attacker(amount)\n")
	if got := gitxtest.Git(t, tr.Worktree, "cat-file", "-p", blob); !strings.Contains(got, "attacker") {
		t.Fatalf("the replacement did not take in the task repository: %q", got)
	}
	refs := gitxtest.Git(t, root, "for-each-ref")
	_, err := tr.Import(ctx)
	var ire *ImportRefusedError
	if !errors.As(err, &ire) || !strings.HasPrefix(err.Error(), "import refused: ") {
		t.Fatalf("import of a replaced blob: got %v, want import refused", err)
	}
	t.Logf("%v", err)
	if got := gitxtest.Git(t, root, "for-each-ref"); got != refs {
		t.Errorf("a refused import moved refs:\n%s\nwas\n%s", got, refs)
	}
	if got, _ := RevParse(ctx, root, "lazy/blob"); got != first {
		t.Errorf("lazy/blob: got %s, want %s", got, first)
	}
	if _, err := Run(ctx, root, "cat-file", "-e", blob); err == nil {
		t.Errorf("the project holds the replaced blob's id")
	}
	gitxtest.Git(t, root, "fsck", "--strict", "--no-progress")

	// the next turn starts from the project's head: the refused commit is
	// off the branch, its files stay in the worktree
	if err := tr.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(gitxtest.Git(t, tr.Worktree, "rev-parse", "HEAD")); got != first {
		t.Errorf("after Prepare the task repository's head is %s, want %s", got, first)
	}
}

func agentCommit2(t *testing.T, tr TaskRepo, msg string, files map[string]string) string {
	t.Helper()
	gitxtest.Commit(t, tr.Worktree, msg, files)
	return mustImport(t, tr)
}

// TestProjectObjectsOutOfReach: an object the agent plants in its own store
// under the id of a project blob, and the deletion of its whole store, change
// nothing the project or the daemon's own git reads.
func TestProjectObjectsOutOfReach(t *testing.T) {
	ctx := context.Background()
	root := gitxtest.NewRepo(t, map[string]string{"README.md": "# honest\n"})
	readme := strings.TrimSpace(gitxtest.Git(t, root, "rev-parse", "main:README.md"))
	tr := newTask(t, root, "plant")
	writeLoose(t, filepath.Join(tr.GitDir(), "objects"), readme, "blob", "# pwned\n")
	// the daemon's own work in the worktree reads the project's objects only
	gitxtest.Commit(t, root, "parent moves", map[string]string{"other.txt": "x\n"})
	if err := tr.Merge(ctx, "sync"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(tr.Worktree, "README.md")); string(got) != "# honest\n" {
		t.Errorf("the worktree's README after the daemon's merge: %q", got)
	}
	if got := gitxtest.Git(t, root, "cat-file", "-p", readme); got != "# honest\n" {
		t.Errorf("the project's README blob: %q", got)
	}
	if got := gitxtest.Git(t, root, "show", "lazy/plant:README.md"); got != "# honest\n" {
		t.Errorf("the imported merge's README: %q", got)
	}
	// one command of the agent deletes its store: the project is whole
	if err := os.RemoveAll(filepath.Join(tr.GitDir(), "objects")); err != nil {
		t.Fatal(err)
	}
	gitxtest.Git(t, root, "fsck", "--strict", "--no-progress")
	if _, err := tr.Import(ctx); !errors.Is(err, ErrImportRefused) {
		t.Errorf("import from a task repository without objects: got %v, want refused", err)
	}
	// the daemon makes its shape again; the branch is the project's
	if err := tr.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(gitxtest.Git(t, tr.Worktree, "log", "-1", "--format=%s")), "sync"; got != want {
		t.Errorf("after the store was deleted and prepared again: head %q, want %q", got, want)
	}
}

// TestPlantedProgramsNeverRun: hooks, a config.worktree, a commondir to a
// repository of the agent's making, and filters, textconv and merge drivers
// named by an agent-written .gitattributes (defined in the agent's configs and
// in the user's global config) run nothing while the daemon prepares, syncs,
// reverts, imports, diffs and accepts.
func TestPlantedProgramsNeverRun(t *testing.T) {
	ctx := context.Background()
	marks := t.TempDir()
	mark := func(what string) string { return "touch " + filepath.Join(marks, what) }
	drivers := func(what string) string {
		return fmt.Sprintf("[filter \"evil\"]\n\tclean = %s\n\tsmudge = %s\n\tprocess = %s\n\trequired = false\n"+
			"[diff \"evil\"]\n\ttextconv = %s\n\tcommand = %s\n[merge \"evil\"]\n\tdriver = %s\n"+
			"[core]\n\tfsmonitor = %s\n\thooksPath = %s\n",
			mark(what+"-clean"), mark(what+"-smudge"), mark(what+"-process"), mark(what+"-textconv"), mark(what+"-diffcmd"),
			mark(what+"-merge"), mark(what+"-fsmonitor"), filepath.Join(marks, "hooks"))
	}
	// the user's global config defines the drivers too
	home := t.TempDir()
	global := drivers("global")
	global = global[:strings.Index(global, "[core]")] // the user's own fsmonitor and hooks are not the point
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(global), 0o644); err != nil {
		t.Fatal(err)
	}
	root := gitxtest.NewRepo(t, map[string]string{"a.txt": "base\n", "keep.txt": "k\n"})
	gitxtest.Git(t, root, "branch", "base")
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	tr := newTask(t, root, "evil")
	tr.Parent = "base" // accept moves base, which no checkout has
	gd := tr.GitDir()

	// what the agent plants in its repository
	for _, h := range []string{"pre-commit", "post-commit", "post-checkout", "post-merge", "pre-merge-commit", "commit-msg", "reference-transaction", "post-index-change", "pre-auto-gc"} {
		for _, dir := range []string{filepath.Join(gd, "hooks"), filepath.Join(marks, "hooks")} {
			_ = os.MkdirAll(dir, 0o755)
			if err := os.WriteFile(filepath.Join(dir, h), []byte("#!/bin/sh\n"+mark("hook-"+h)+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(gd, "config.worktree"), []byte(drivers("worktree")), 0o644); err != nil {
		t.Fatal(err)
	}
	evil := filepath.Join(t.TempDir(), "evil.git")
	gitxtest.Git(t, root, "init", "-q", "--bare", evil)
	f, _ := os.OpenFile(filepath.Join(evil, "config"), os.O_APPEND|os.O_WRONLY, 0)
	fmt.Fprintf(f, "%s[extensions]\n\tworktreeConfig = true\n", drivers("commondir"))
	_ = f.Close()
	// the agent's own git runs in its sandbox with its own home: here, with
	// no global config and no commondir, so it runs none of the drivers
	agentHome := t.TempDir()
	agent := func(msg string, files map[string]string) {
		t.Helper()
		_ = os.Remove(filepath.Join(gd, "commondir"))
		t.Setenv("HOME", agentHome)
		t.Setenv("XDG_CONFIG_HOME", agentHome)
		// the hooks planted above are for the daemon's git to (not) run
		t.Setenv("GIT_CONFIG_COUNT", "1")
		t.Setenv("GIT_CONFIG_KEY_0", "core.hooksPath")
		t.Setenv("GIT_CONFIG_VALUE_0", "/dev/null")
		gitxtest.Commit(t, tr.Worktree, msg, files)
		t.Setenv("GIT_CONFIG_COUNT", "0")
		t.Setenv("HOME", home)
		t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	}
	agent("attributes", map[string]string{".gitattributes": "* filter=evil diff=evil merge=evil\n", "a.txt": "task\n", "out.txt": "o\n"})
	if err := os.WriteFile(filepath.Join(gd, "commondir"), []byte(evil+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	replant := func() {
		if err := os.WriteFile(filepath.Join(gd, "commondir"), []byte(evil+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name string
		do   func() error
	}{
		{"prepare", func() error { return tr.Prepare(ctx) }},
		{"import", func() error {
			agent("more", map[string]string{"b.txt": "b\n"})
			replant()
			_, err := tr.Import(ctx)
			return err
		}},
		{"sync", func() error {
			gitxtest.Commit(t, root, "parent", map[string]string{"a.txt": "parent\n"})
			gitxtest.Git(t, root, "update-ref", "refs/heads/base", "main")
			err := tr.Merge(ctx, "sync")
			if errors.Is(err, ErrConflicted) {
				// resolved as the agent would, then the daemon imports
				agent("resolve", map[string]string{"a.txt": "both\n"})
				_, err = tr.Import(ctx)
			}
			return err
		}},
		{"revert", func() error { return tr.RevertPaths(ctx, []string{"out.txt"}, "revert") }},
		{"diff", func() error {
			if _, err := DiffBranch(ctx, root, tr.Parent, tr.Branch); err != nil {
				return err
			}
			head, _ := RevParse(ctx, root, tr.Branch)
			_, _, err := Show(ctx, root, head)
			return err
		}},
		{"dry merge", func() error { _, err := DryMerge(ctx, root, tr.Parent, tr.Branch); return err }},
		{"accept", func() error { return FastForward(ctx, root, tr.Parent, tr.Branch) }},
	}
	for _, s := range steps {
		replant() // before every step: Import refuses it, Prepare removes it, the project's git never reads it
		err := s.do()
		if s.name == "import" {
			if !errors.Is(err, ErrImportRefused) || !strings.Contains(err.Error(), "commondir") {
				t.Fatalf("import with a planted commondir: got %v, want refused", err)
			}
			_ = os.Remove(filepath.Join(gd, "commondir"))
			_, err = tr.Import(ctx)
		}
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		ents, _ := os.ReadDir(marks)
		var ran []string
		for _, e := range ents {
			if e.Name() != "hooks" {
				ran = append(ran, e.Name())
			}
		}
		if len(ran) > 0 {
			t.Fatalf("%s ran a planted program: %v", s.name, ran)
		}
	}
	if got := gitxtest.Git(t, root, "show", "base:a.txt"); got != "both\n" {
		t.Errorf("accepted a.txt: %q", got)
	}
	if got := gitxtest.Git(t, root, "ls-tree", "--name-only", "base"); strings.Contains(got, "out.txt") {
		t.Errorf("the revert did not land: %s", got)
	}
}

// TestImportTiming logs what a task repository and one import cost on a
// small project (the figures for docs/BENCHMARKS.md).
func TestImportTiming(t *testing.T) {
	ctx := context.Background()
	files := map[string]string{}
	for i := range 50 {
		files[fmt.Sprintf("pkg/f%02d.go", i)] = strings.Repeat("line\n", 100)
	}
	root := gitxtest.NewRepo(t, files)
	const n = 10
	var create, prepare, imp time.Duration
	for i := range n {
		wt := filepath.Join(t.TempDir(), "worktrees", fmt.Sprintf("t%d", i))
		tr := TaskRepo{Project: root, Worktree: wt, Branch: fmt.Sprintf("lazy/t%d", i), Parent: "main"}
		start := time.Now()
		if err := CreateTask(ctx, root, wt, tr.Branch, "main"); err != nil {
			t.Fatal(err)
		}
		create += time.Since(start)
		gitxtest.Commit(t, wt, "work", map[string]string{"pkg/f01.go": "changed\n", "new.go": "package x\n"})
		start = time.Now()
		mustImport(t, tr)
		imp += time.Since(start)
		start = time.Now()
		if err := tr.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		prepare += time.Since(start)
	}
	t.Logf("50-file project, mean of %d: create task repo + worktree %v, import of one commit %v, prepare before a turn %v",
		n, create/n, imp/n, prepare/n)
}

// TestLinksInTheTaskRepoNeverFollowed (found by an outside attacker): links
// the agent plants in its repository where git reads and appends (its
// packed-refs to a host secret, its reflogs to a host file, its refs
// directory to the project's) and a pipe where git reads: the import is
// refused naming it, the next preparation removes them all, and the
// daemon's git never reads the secret nor writes the host file — the task
// goes on.
func TestLinksInTheTaskRepoNeverFollowed(t *testing.T) {
	ctx := context.Background()
	root := gitxtest.NewRepo(t, map[string]string{"README.md": "# p\n"})
	host := t.TempDir()
	secret := filepath.Join(host, "provider")
	victim := filepath.Join(host, "victim")
	for f, body := range map[string]string{secret: "sk-ant-api03-REALSECRET-never-shown\n", victim: "VICTIM\n"} {
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tr := newTask(t, root, "links")
	agentCommit(t, tr, "work", map[string]string{"a.txt": "a\n"})
	gd := tr.GitDir()
	_ = os.Remove(filepath.Join(gd, "packed-refs"))
	plant := map[string]string{
		"packed-refs":                secret,
		"logs/HEAD":                  victim,
		"logs/refs/heads/lazy/links": victim,
	}
	for name, target := range plant {
		p := filepath.Join(gd, name)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		_ = os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	// the refs of another branch point at the project's
	if err := os.Symlink(filepath.Join(root, ".git", "refs", "heads"), filepath.Join(gd, "refs", "tags-elsewhere")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(gd, "FETCH_HEAD"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := tr.Import(ctx)
	if !errors.Is(err, ErrImportRefused) || !strings.Contains(err.Error(), "not a plain file or directory") {
		t.Fatalf("import of a repository holding links: %v", err)
	}
	if strings.Contains(err.Error(), "REALSECRET") {
		t.Fatal("the secret is in the refusal")
	}
	// the daemon's preparation and its work (a sync) go on, through none
	gitxtest.Commit(t, root, "parent moves", map[string]string{"p.txt": "p\n"})
	if err := tr.Prepare(ctx); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if err := tr.Merge(ctx, "sync"); err != nil && strings.Contains(err.Error(), "REALSECRET") {
		t.Fatalf("the secret reached an error: %v", err)
	}
	for name := range plant {
		if fi, err := os.Lstat(filepath.Join(gd, name)); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			t.Errorf("%s is still a link", name)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "VICTIM\n" {
		t.Errorf("the host file was written through a link: %q", b)
	}
	if b, _ := os.ReadFile(secret); string(b) != "sk-ant-api03-REALSECRET-never-shown\n" {
		t.Errorf("the secret file changed: %q", b)
	}
	if out := gitxtest.Git(t, root, "for-each-ref"); strings.Contains(out, "tags-elsewhere") {
		t.Errorf("the project's refs changed: %s", out)
	}
}

// TestSnapshotRestore: what an ask did — a commit, a changed file, a new
// one — is put back and said; a change from before the ask stays.
func TestSnapshotRestore(t *testing.T) {
	ctx := context.Background()
	root := gitxtest.NewRepo(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	tr := newTask(t, root, "snap")
	if err := os.WriteFile(filepath.Join(tr.Worktree, "b.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tr.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := tr.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := strings.TrimSpace(gitxtest.Git(t, tr.Worktree, "rev-parse", "HEAD"))
	if s.Head != before || s.Dirty["b.txt"] != " M" {
		t.Fatalf("snapshot %+v, HEAD %s", s, before)
	}
	gitxtest.Commit(t, tr.Worktree, "sneak", map[string]string{"evil.txt": "x\n"}) // never imported: its objects are the task repository's own
	if err := os.WriteFile(filepath.Join(tr.Worktree, "a.txt"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tr.Worktree, "new.txt"), []byte("n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	u, err := tr.Restore(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if after := strings.TrimSpace(gitxtest.Git(t, tr.Worktree, "rev-parse", "HEAD")); after != before {
		t.Fatalf("the branch is at %s, want %s back", after, before)
	}
	if u.MovedFrom != before || strings.Join(u.Restored, ",") != "a.txt,evil.txt,new.txt" {
		t.Fatalf("undone %+v", u)
	}
	out := gitxtest.Git(t, tr.Worktree, "status", "--porcelain")
	{
		if !strings.HasSuffix(strings.TrimSpace(out), "b.txt") || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Fatalf("status after the restore: %q", out)
		}
	}
}
