package gitx

// A task's own repository. An agent commits in a repository of its own, never
// in the project's: the project's objects are reachable from it read-only
// (objects/info/alternates), and everything it writes — objects, refs, index —
// lands in the task repository. The daemon brings the task branch into the
// project after each work turn with a fetch that verifies every object
// (Import); only that fetch moves the project's refs/heads/lazy/<ref>.
//
// Layout: the worktree is <state>/worktrees/<ref>; its repository is
// <state>/repos/<ref>.git (TaskGitDir), a plain git dir whose config, hooks/,
// info/ and objects/info/ are written by the daemon and shown read-only in a
// sandbox. The worktree's .git file points at it for the agent's git; the
// daemon never reads that file: it names the git dir, the common dir, the
// work tree and the object store itself on every call (TaskRepo.run).
//
// gc: a gc in the project never prunes what a task repository borrows: the
// branch's base and every imported commit are reachable from the project's
// refs/heads/lazy/<ref>; commits not yet imported are in the task
// repository's own objects, which no gc of the project touches. The daemon's
// calls on a task repository run with gc.auto=0 (their object store is the
// project's, and a gc there would prune by the task repository's refs).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// TaskGitDir is the task repository of the worktree at worktree:
// <worktrees dir>/../repos/<name>.git, i.e. <state>/repos/<ref>.git.
func TaskGitDir(worktree string) string {
	wt := filepath.Clean(worktree)
	return filepath.Join(filepath.Dir(filepath.Dir(wt)), "repos", filepath.Base(wt)+".git")
}

// TaskRepo is one task's repository, its worktree and the project (a member's
// clone in a cluster) its branch is imported into.
type TaskRepo struct {
	Project  string // the project's top level
	Worktree string
	Branch   string // lazy/<ref>
	Parent   string
}

// GitDir is the task repository's git dir.
func (t TaskRepo) GitDir() string { return TaskGitDir(t.Worktree) }

// taskConfig goes after SafeConfig on every daemon call on a task repository
// or worktree: an identity (no global config is read), no automatic gc or
// maintenance (the object store of those calls is the project's), no global
// attributes file, no sparse checkout, no submodule recursion.
var taskConfig = []string{
	"-c", "user.name=lazy",
	"-c", "user.email=lazy@localhost",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "core.attributesFile=/dev/null",
	"-c", "core.sparseCheckout=false",
	"-c", "core.untrackedCache=false",
	"-c", "core.splitIndex=false",
	"-c", "submodule.recurse=false",
	"-c", "merge.renormalize=false",
}

// taskEnv is the environment of a daemon call on the task repository: its
// git dir and common dir named (a `commondir` file the agent planted is not
// read), the worktree named (its .git file is not read), the project's object
// store as the only one (objects the agent wrote are never read, whatever
// their names), no replace refs, and no system or global config, so a filter,
// textconv or diff driver named by an agent-written .gitattributes finds no
// program defined anywhere. The task repository's own config is the
// daemon's.
func (t TaskRepo) taskEnv(objects string) []string {
	env := gitOnlyEnv()
	gd := t.GitDir()
	return append(env,
		"GIT_DIR="+gd, "GIT_COMMON_DIR="+gd, "GIT_WORK_TREE="+t.Worktree,
		"GIT_OBJECT_DIRECTORY="+objects,
		"GIT_NO_REPLACE_OBJECTS=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1",
		"GIT_NO_LAZY_FETCH=1")
}

// gitOnlyEnv is the daemon's env without any GIT_ variable (one the daemon
// was started with could name another repository or config), plus gitEnv.
func gitOnlyEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(env, gitEnv...)
}

// run runs git on the task repository and worktree (see taskEnv).
func (t TaskRepo) run(ctx context.Context, objects string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append(append(append([]string{}, SafeConfig...), taskConfig...), args...)...)
	cmd.Dir = t.Worktree
	cmd.Env = t.taskEnv(objects)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return strings.TrimRight(stdout.String(), "\n"), &Error{Args: args, Stderr: stderr.String(), Err: err}
	}
	return strings.TrimRight(stdout.String(), "\n"), nil
}

// ProjectObjects is the project's object directory (absolute). It is asked
// of git once per project: where a repository keeps its objects does not
// change under a running daemon.
func ProjectObjects(ctx context.Context, project string) (string, error) {
	if p, ok := objectDirs.Load(project); ok {
		return p.(string), nil
	}
	p, err := Run(ctx, project, "rev-parse", "--git-path", "objects")
	if err != nil {
		return "", fmt.Errorf("find the object store of %s: %w", project, err)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(project, p)
	}
	p = filepath.Clean(p)
	objectDirs.Store(project, p)
	return p, nil
}

var objectDirs sync.Map // project → its object directory

// CreateTask makes branch from parent in the project, the task repository
// and the worktree checked out on it.
func CreateTask(ctx context.Context, project, worktree, branch, parent string) error {
	if ents, err := os.ReadDir(worktree); err == nil && len(ents) > 0 {
		return fmt.Errorf("create the worktree of %s: %s already exists and is not empty; move it away", branch, worktree)
	}
	head, err := RevParse(ctx, project, parent)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", parent, err)
	}
	if _, err := Run(ctx, project, "update-ref", "refs/heads/"+branch, head, ""); err != nil {
		return fmt.Errorf("create branch %s from %s: %w", branch, parent, err)
	}
	t := TaskRepo{Project: project, Worktree: worktree, Branch: branch, Parent: parent}
	if err := t.prepare(ctx, true); err != nil {
		_ = t.Remove()
		_, _ = Run(ctx, project, "update-ref", "-d", "refs/heads/"+branch, head)
		return err
	}
	return nil
}

// Prepare makes the task repository ready for a turn or a job of the
// daemon's: made when missing (a new task, a task this cluster member never
// ran, or a task from before task repositories, whose worktree is adopted),
// then its branch, its parent and HEAD set from the project's (Refresh).
func (t TaskRepo) Prepare(ctx context.Context) error { return t.prepare(ctx, false) }

// prepared marks task repositories the daemon prepared with no turn
// since (CreateTask, Arrive): git dir → the project's heads then. The next
// Prepare takes the mark and, when the project's heads are still those,
// has nothing to do. A Prepare before a turn never leaves a mark: the agent
// writes the repository during the turn, so what was true before it is
// asked again after it.
var prepared sync.Map

// preparedMark is what a mark holds: names and heads.
type preparedMark struct{ branch, parent, head, parentHead string }

func (t TaskRepo) mark(ctx context.Context) (preparedMark, bool) {
	head, err := RevParse(ctx, t.Project, "refs/heads/"+t.Branch)
	if err != nil {
		return preparedMark{}, false
	}
	m := preparedMark{branch: t.Branch, parent: t.Parent, head: head}
	if t.Parent != "" {
		m.parentHead, _ = RevParse(ctx, t.Project, "refs/heads/"+t.Parent)
	}
	return m, true
}

// prepare is Prepare; keep leaves a mark (no turn follows before the next
// Prepare).
func (t TaskRepo) prepare(ctx context.Context, keep bool) error {
	objects, err := ProjectObjects(ctx, t.Project)
	if err != nil {
		return err
	}
	if was, ok := prepared.LoadAndDelete(t.GitDir()); ok {
		if now, ok := t.mark(ctx); ok && now == was.(preparedMark) {
			if err := t.restore(objects); err != nil {
				return err
			}
			if keep {
				prepared.Store(t.GitDir(), now)
			}
			return nil
		}
	}
	_, err = os.Lstat(filepath.Join(t.GitDir(), "config"))
	_, werr := os.Lstat(filepath.Join(t.Worktree, ".git"))
	if errors.Is(err, os.ErrNotExist) || errors.Is(werr, os.ErrNotExist) {
		// no repository, or one whose worktree is gone: made afresh
		if err := t.create(ctx, objects); err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("look at the task repository: %w", err)
	}
	if err := t.restore(objects); err != nil {
		return err
	}
	if err := t.refresh(ctx, objects); err != nil {
		return err
	}
	if keep {
		if m, ok := t.mark(ctx); ok {
			prepared.Store(t.GitDir(), m)
		}
	}
	return nil
}

// restore writes back what the daemon owns in the task repository, should
// anything have changed it (a runner with no sandbox lets an agent write
// anywhere): its config and alternates; a planted commondir goes.
func (t TaskRepo) restore(objects string) error {
	gd := t.GitDir()
	// git follows a link wherever it meets one in a repository (a
	// packed-refs, a reflog, a refs directory pointing at a host file): the
	// daemon's git would read or append to it as the daemon's user. Every
	// entry that is not a plain file or directory goes first.
	if _, err := removeSpecials(gd); err != nil {
		return err
	}
	for name, body := range map[string]string{"config": taskRepoConfig, "objects/info/alternates": objects + "\n", "../.git": "gitdir: " + gd + "\n"} {
		p := filepath.Join(gd, name)
		if name == "../.git" {
			p = filepath.Join(t.Worktree, ".git")
		}
		if plainFileHolds(p, body) {
			continue
		}
		_ = os.Remove(p) // a link is replaced, never written through
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("restore the task repository's %s: %w", name, err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return fmt.Errorf("restore the task repository's %s: %w", name, err)
		}
	}
	for _, f := range []string{"commondir", "shallow", "info/grafts", "objects/info/grafts"} {
		if err := os.RemoveAll(filepath.Join(gd, f)); err != nil {
			return fmt.Errorf("clear the task repository's %s: %w", f, err)
		}
	}
	return nil
}

// taskRepoConfig is the whole config of a task repository.
const taskRepoConfig = `[core]
	repositoryformatversion = 0
	filemode = true
	bare = false
	logallrefupdates = true
[gc]
	auto = 0
`

// create writes a task repository: config, empty hooks/ and info/, the
// project's objects as its alternate, HEAD on the task branch; the worktree's
// .git file points at it. An existing worktree (an older task, a linked
// worktree of the project) is adopted as it is: its files stay.
func (t TaskRepo) create(ctx context.Context, objects string) error {
	gd := t.GitDir()
	if err := os.RemoveAll(gd); err != nil {
		return fmt.Errorf("clear a half-made task repository: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(gd), 0o700); err != nil {
		return fmt.Errorf("create the task repositories' dir: %w", err)
	}
	for _, d := range []string{"hooks", "info", "objects/info", "objects/pack", "refs/heads", "refs/tags"} {
		if err := os.MkdirAll(filepath.Join(gd, d), 0o755); err != nil {
			return fmt.Errorf("create the task repository: %w", err)
		}
	}
	files := map[string]string{
		"HEAD":                    "ref: refs/heads/" + t.Branch + "\n",
		"info/exclude":            "",
		"objects/info/alternates": objects + "\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(gd, name), []byte(body), 0o644); err != nil {
			return fmt.Errorf("create the task repository: %w", err)
		}
	}
	if err := os.MkdirAll(t.Worktree, 0o755); err != nil {
		return fmt.Errorf("create the worktree: %w", err)
	}
	adopted := false
	if b, err := os.ReadFile(filepath.Join(t.Worktree, ".git")); err == nil && strings.HasPrefix(string(b), "gitdir: ") {
		// a linked worktree of the project: forget its admin dir there, so
		// the branch is checked out nowhere in the project
		common := filepath.Dir(objects)
		if admin, err := adminDir(common, t.Worktree); err == nil {
			_ = os.RemoveAll(admin)
		}
		adopted = true
	}
	if err := os.WriteFile(filepath.Join(t.Worktree, ".git"), []byte("gitdir: "+gd+"\n"), 0o644); err != nil {
		return fmt.Errorf("point the worktree at its repository: %w", err)
	}
	// the config last: Prepare takes a repository without one as half made
	if err := os.WriteFile(filepath.Join(gd, "config"), []byte(taskRepoConfig), 0o644); err != nil {
		return fmt.Errorf("create the task repository: %w", err)
	}
	head, err := RevParse(ctx, t.Project, "refs/heads/"+t.Branch)
	if err != nil {
		return fmt.Errorf("the project has no branch %s: %w", t.Branch, err)
	}
	// the repository is the daemon's own, made just now: its refs are
	// written as the loose files git would write
	refs := map[string]string{t.Branch: head}
	if t.Parent != "" && t.Parent != t.Branch {
		if p, err := RevParse(ctx, t.Project, "refs/heads/"+t.Parent); err == nil {
			refs[t.Parent] = p
		}
	}
	for name, id := range refs {
		p := filepath.Join(gd, "refs", "heads", filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("set the task repository's %s: %w", name, err)
		}
		if err := os.WriteFile(p, []byte(id+"\n"), 0o644); err != nil {
			return fmt.Errorf("set the task repository's %s: %w", name, err)
		}
	}
	if adopted {
		// the files are the agent's work: only the index is made
		if _, err := t.run(ctx, objects, "read-tree", head); err != nil {
			return fmt.Errorf("index the adopted worktree: %w", err)
		}
		_, _ = t.run(ctx, objects, "update-index", "-q", "--refresh")
		return nil
	}
	if _, err := t.run(ctx, objects, "read-tree", "--reset", "-u", head); err != nil {
		return fmt.Errorf("check out %s in the worktree: %w", t.Branch, err)
	}
	return nil
}

// refresh sets the task repository from the project: HEAD on the task
// branch, the branch at the project's head (the worktree follows when the
// project moved it on from a commit it has; otherwise only the index, and
// the files stay for the agent to see), the parent at the project's. What
// already holds costs no git process: HEAD and the refs are read as files
// (readRef), the project's heads from its batch.
func (t TaskRepo) refresh(ctx context.Context, objects string) error {
	ref := "refs/heads/" + t.Branch
	head, err := RevParse(ctx, t.Project, ref)
	if err != nil {
		return fmt.Errorf("the project has no branch %s: %w", t.Branch, err)
	}
	if err := t.setHead(); err != nil {
		return err
	}
	ours := t.readRef(ctx, objects, ref)
	if ours != head {
		known := ours != "" && func() bool { _, err := t.run(ctx, objects, "cat-file", "-e", ours+"^{commit}"); return err == nil }()
		switch {
		case known:
			// the daemon or another member moved the branch on: the
			// worktree follows as a checkout would, keeping local changes
			if _, err := t.run(ctx, objects, "read-tree", "-u", "-m", ours, head); err != nil {
				if _, err := t.run(ctx, objects, "read-tree", "-u", "--reset", head); err != nil {
					return fmt.Errorf("check out %s in the worktree: %w", t.Branch, err)
				}
			}
		default:
			// commits the project never took (an import refused): the
			// branch goes back, the files stay as the agent left them
			if _, err := t.run(ctx, objects, "read-tree", head); err != nil {
				return fmt.Errorf("reset the task repository's index: %w", err)
			}
			_, _ = t.run(ctx, objects, "update-index", "-q", "--refresh")
		}
		if _, err := t.run(ctx, objects, "update-ref", "-m", "lazy: from the project", ref, head); err != nil {
			return fmt.Errorf("set the task repository's branch: %w", err)
		}
	}
	if t.Parent != "" && t.Parent != t.Branch {
		pref := "refs/heads/" + t.Parent
		if p, err := RevParse(ctx, t.Project, pref); err == nil && t.readRef(ctx, objects, pref) != p {
			if _, err := t.run(ctx, objects, "update-ref", pref, p); err != nil {
				return fmt.Errorf("set the task repository's %s: %w", t.Parent, err)
			}
		}
	}
	return nil
}

// setHead points the task repository's HEAD at the task branch, as `git
// symbolic-ref HEAD` would, by writing the file (restore has removed any
// link from the repository; one is replaced, never written through).
func (t TaskRepo) setHead() error {
	p := filepath.Join(t.GitDir(), "HEAD")
	body := "ref: refs/heads/" + t.Branch + "\n"
	if plainFileHolds(p, body) {
		return nil
	}
	_ = os.Remove(p)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		return fmt.Errorf("set the task repository's HEAD: %w", err)
	}
	return nil
}

// readRef is the commit a ref of the task repository names, "" when it
// has none. A loose ref (what git writes on a commit) is read as a file,
// beneath the repository without following a link; any other shape (a
// packed ref, a symbolic one) is asked of git. It is read afresh on every
// call: the agent writes this repository between turns.
func (t TaskRepo) readRef(ctx context.Context, objects, ref string) string {
	gd := t.GitDir()
	if id, ok := looseRef(filepath.Join(gd, filepath.FromSlash(ref))); ok {
		return id
	}
	if _, err := os.Lstat(filepath.Join(gd, filepath.FromSlash(ref))); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Lstat(filepath.Join(gd, "packed-refs")); errors.Is(err, os.ErrNotExist) {
			return "" // neither loose nor packed: no such ref
		}
	}
	id, _ := t.run(ctx, objects, "rev-parse", "--verify", "-q", ref)
	return id
}

// looseRef reads a loose ref file holding one object id.
func looseRef(p string) (string, bool) {
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > 128 {
		return "", false
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", false
	}
	defer f.Close()
	b := make([]byte, 129)
	n, _ := io.ReadFull(f, b)
	id := strings.TrimSuffix(string(b[:n]), "\n")
	if (len(id) != 40 && len(id) != 64) || strings.Trim(id, "0123456789abcdef") != "" {
		return "", false
	}
	return id, true
}

// ImportRefusedError is an import that failed verification: the project is
// unchanged.
type ImportRefusedError struct{ Why string }

func (e *ImportRefusedError) Error() string { return "import refused: " + e.Why }

// ErrImportRefused matches any *ImportRefusedError with errors.Is.
var ErrImportRefused = errors.New("import refused")

func (e *ImportRefusedError) Is(target error) bool { return target == ErrImportRefused }

// Import brings the task branch of the task repository into the project:
// a fetch that checks every object it receives (transfer.fsckObjects: its
// hash recomputed from its content, its form checked, everything the new
// head reaches present), atomic, into refs/heads/<branch>. A failed
// verification moves no ref and returns an *ImportRefusedError. It returns
// the project's head after it.
func (t TaskRepo) Import(ctx context.Context) (string, error) {
	objects, err := ProjectObjects(ctx, t.Project)
	if err != nil {
		return "", err
	}
	gd := t.GitDir()
	if why := t.untrusted(objects); why != "" {
		return "", &ImportRefusedError{Why: why}
	}
	ref := "refs/heads/" + t.Branch
	ours := t.readRef(ctx, objects, ref)
	if ours == "" {
		return "", &ImportRefusedError{Why: "the task repository has no branch " + t.Branch + " (the agent deleted or broke it)"}
	}
	before, _ := RevParse(ctx, t.Project, ref)
	if ours == before {
		return before, nil
	}
	defer lockClone(t.Project)()
	args := []string{"-c", "transfer.fsckObjects=true", "-c", "fetch.fsckObjects=true", "-c", "fetch.writeCommitGraph=false",
		"-c", "fetch.recurseSubmodules=false", "-c", "protocol.file.allow=always",
		"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-auto-gc", "--atomic"}
	if before != "" {
		// what the project has of the branch and its parent: not every ref
		// of a project with thousands of task branches
		args = append(args, "--negotiation-tip="+ref)
		if _, err := RevParse(ctx, t.Project, "refs/heads/"+t.Parent); err == nil && t.Parent != "" {
			args = append(args, "--negotiation-tip=refs/heads/"+t.Parent)
		}
	}
	args = append(args, gd, "+"+ref+":"+ref)
	cmd := exec.CommandContext(ctx, "git", append(append([]string{}, SafeConfig...), args...)...)
	cmd.Dir = t.Project
	// upload-pack runs in the task repository with this env: no system or
	// global config there either
	cmd.Env = append(gitOnlyEnv(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_NO_REPLACE_OBJECTS=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("import %s: %w", t.Branch, ctx.Err())
		}
		return "", &ImportRefusedError{Why: gitWhy(stderr.String(), err)}
	}
	after, err := RevParse(ctx, t.Project, ref)
	if err != nil {
		return "", fmt.Errorf("read %s after its import: %w", t.Branch, err)
	}
	return after, nil
}

// untrusted says what of the task repository's shape the agent changed that
// would make git read something the daemon did not write, or "".
func (t TaskRepo) untrusted(objects string) string {
	gd := t.GitDir()
	if fi, err := os.Lstat(gd); err != nil || !fi.IsDir() {
		return "the task repository is gone or not a directory"
	}
	if p, err := findSpecial(gd); err != nil {
		return "the task repository cannot be read: " + err.Error()
	} else if p != "" {
		return fmt.Sprintf("the task repository holds %s, which is not a plain file or directory (a link there would have the daemon's git follow it)", p)
	}
	for _, f := range []string{"commondir", "shallow", "objects/info/grafts", "info/grafts"} {
		if _, err := os.Lstat(filepath.Join(gd, f)); err == nil {
			return "the task repository has a " + f + " file the daemon did not write"
		}
	}
	for _, d := range []string{"objects", "objects/info"} {
		if fi, err := os.Lstat(filepath.Join(gd, d)); err != nil || !fi.IsDir() {
			return "the task repository's " + d + " is not a directory"
		}
	}
	if !plainFileHolds(filepath.Join(gd, "objects", "info", "alternates"), objects+"\n") {
		return "the task repository's objects/info/alternates was changed"
	}
	if !plainFileHolds(filepath.Join(gd, "config"), taskRepoConfig) {
		return "the task repository's config was changed"
	}
	return ""
}

// gitWhy is the gist of a failed git command: its error and fatal lines.
func gitWhy(stderr string, err error) string {
	var why []string
	for _, l := range strings.Split(stderr, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		for _, p := range []string{"fatal: ", "error: "} {
			if s, ok := strings.CutPrefix(l, p); ok {
				why = append(why, s)
			}
		}
	}
	if len(why) == 0 {
		if s := strings.TrimSpace(stderr); s != "" {
			return s
		}
		return err.Error()
	}
	if len(why) > 4 {
		why = why[:4]
	}
	return strings.Join(why, "; ")
}

// Remove deletes the worktree and the task repository. Every commit of the
// branch the project took is in the project.
func (t TaskRepo) Remove() error {
	prepared.Delete(t.GitDir())
	if !filepath.IsAbs(t.Worktree) {
		return fmt.Errorf("remove the task's worktree: %q is no absolute path", t.Worktree)
	}
	err := os.RemoveAll(t.Worktree)
	if err2 := os.RemoveAll(t.GitDir()); err == nil {
		err = err2
	}
	if err != nil {
		return fmt.Errorf("remove the task's worktree and repository: %w", err)
	}
	return nil
}

// MergeInProgress reports whether the worktree has a half-finished merge.
func (t TaskRepo) MergeInProgress() (bool, error) {
	_, err := os.Lstat(filepath.Join(t.GitDir(), "MERGE_HEAD"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("find merge state in %s: %w", t.GitDir(), err)
	}
	return true, nil
}

// daemonWork readies the task repository for the daemon's own commit in the
// worktree (a sync's merge, a revert): set from the project, its index made
// from the branch's head (what the agent staged stays in the files, unstaged).
func (t TaskRepo) daemonWork(ctx context.Context) (string, error) {
	if err := t.Prepare(ctx); err != nil {
		return "", err
	}
	objects, err := ProjectObjects(ctx, t.Project)
	if err != nil {
		return "", err
	}
	if _, err := t.run(ctx, objects, "read-tree", "HEAD"); err != nil {
		return "", fmt.Errorf("reset the task repository's index: %w", err)
	}
	_, _ = t.run(ctx, objects, "update-index", "-q", "--refresh")
	return objects, nil
}

// Merge merges the project's parent into the task branch in the worktree
// and imports the result. Conflicts leave the merge half-finished in the
// worktree and return a *ConflictError naming the files.
func (t TaskRepo) Merge(ctx context.Context, message string) error {
	objects, err := t.daemonWork(ctx)
	if err != nil {
		return err
	}
	parent, err := RevParse(ctx, t.Project, "refs/heads/"+t.Parent)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", t.Parent, err)
	}
	_, err = t.run(ctx, objects, "merge", "--no-ff", "--no-edit", "--no-verify", "-m", message, parent)
	if err != nil {
		out, uerr := t.run(ctx, objects, "diff", "--no-ext-diff", "--no-textconv", "--name-only", "--diff-filter=U")
		if uerr == nil && out != "" {
			return &ConflictError{Files: strings.Split(out, "\n")}
		}
		return fmt.Errorf("merge %s: %w", t.Parent, err)
	}
	if _, err := t.Import(ctx); err != nil {
		return fmt.Errorf("bring the merge into the project: %w", err)
	}
	return nil
}

// RevertPaths puts paths back to their state at the merge base with the
// parent (deleting the ones that did not exist there), commits, and imports
// the commit.
func (t TaskRepo) RevertPaths(ctx context.Context, paths []string, message string) error {
	if on, err := t.MergeInProgress(); err != nil {
		return err
	} else if on {
		return fmt.Errorf("a merge is half-finished in the task's worktree: unblock the agent to finish it, then revert")
	}
	objects, err := t.daemonWork(ctx)
	if err != nil {
		return err
	}
	base, err := Run(ctx, t.Project, "merge-base", "refs/heads/"+t.Parent, "refs/heads/"+t.Branch)
	if err != nil {
		return fmt.Errorf("find the merge base with %s: %w", t.Parent, err)
	}
	for _, p := range paths {
		if _, err := Run(ctx, t.Project, "cat-file", "-e", base+":"+p); err == nil {
			if _, err := t.run(ctx, objects, "checkout", base, "--", p); err != nil {
				return fmt.Errorf("revert %s: %w", p, err)
			}
		} else if _, err := t.run(ctx, objects, "rm", "-q", "-f", "--ignore-unmatch", "--", p); err != nil {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	if _, err := t.run(ctx, objects, "commit", "-q", "--no-verify", "-m", message); err != nil {
		return fmt.Errorf("commit the revert: %w", err)
	}
	if _, err := t.Import(ctx); err != nil {
		return fmt.Errorf("bring the revert into the project: %w", err)
	}
	return nil
}

// plainFileHolds reports whether p is a plain file (not a link, pipe or
// device: never opened through one) holding exactly body.
func plainFileHolds(p, body string) bool {
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != int64(len(body)) {
		return false
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, len(body)+1)
	n, _ := io.ReadFull(f, b)
	return n == len(body) && string(b[:n]) == body
}

// findSpecial is the first entry beneath dir that is not a plain file or
// directory ("" when there is none); the walk never follows a link.
func findSpecial(dir string) (string, error) {
	found := ""
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if t := d.Type(); !t.IsDir() && !t.IsRegular() {
			found = p
			return filepath.SkipAll
		}
		return nil
	})
	return found, err
}

// removeSpecials removes every entry beneath dir that is not a plain file
// or directory (links, pipes, sockets, devices), without following any.
func removeSpecials(dir string) ([]string, error) {
	var removed []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if t := d.Type(); !t.IsDir() && !t.IsRegular() {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove %s from the task repository: %w", p, err)
			}
			removed = append(removed, p)
		}
		return nil
	})
	if err != nil {
		return removed, fmt.Errorf("clear links from the task repository: %w", err)
	}
	return removed, nil
}
