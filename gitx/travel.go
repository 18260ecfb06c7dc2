package gitx

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// In a cluster each daemon keeps its own clone; a task's branch travels
// between them through one git remote: the member that runs a job brings the
// branch and its parent first (Arrive) and sends what the job changed
// (Depart, Publish).

// remoteConfig lets fetch and push reach an ssh remote with the system's
// ssh (no prompt): set on the command line, it wins over any config file,
// so a planted core.sshCommand still runs nothing.
var remoteConfig = []string{"-c", "core.sshCommand=ssh -o BatchMode=yes"}

// runRemote is Run for a command that talks to a remote.
func runRemote(ctx context.Context, dir string, args ...string) (string, error) {
	return Run(ctx, dir, append(append([]string{}, remoteConfig...), args...)...)
}

// travelLocks serialises the travel of one clone: a job's arrival and a
// page's follow both move refs and the checked-out branch of the same
// clone, and git allows one index writer at a time.
var travelLocks sync.Map // root → *sync.Mutex

func lockClone(root string) func() {
	m, _ := travelLocks.LoadOrStore(root, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// Fetch brings branches of remote into refs/remotes/<remote>/: only those
// named, so a fetch costs the same with ten tasks or a thousand. A branch
// the remote does not have is skipped.
func Fetch(ctx context.Context, root, remote string, branches ...string) error {
	defer lockClone(root)()
	return fetch(ctx, root, remote, branches...)
}

func fetch(ctx context.Context, root, remote string, branches ...string) error {
	// Ask first what the remote has (only its heads, no pack, no walk of
	// this clone's refs) and fetch only what moved: a fetch checks its
	// result against every ref of the clone, which grows with the tasks.
	theirs, err := remoteHeads(ctx, root, remote, branches...)
	if err != nil {
		return fmt.Errorf("ask %s for its branches: %w (check that the remote is reachable: git ls-remote %s)", remote, err, remote)
	}
	tracking := make([]string, len(branches))
	for i, b := range branches {
		tracking[i] = "refs/remotes/" + remote + "/" + b
	}
	ours := refs(ctx, root, tracking...)
	var specs []string
	for i, b := range branches {
		id, there := theirs[b]
		_, known := ours[tracking[i]]
		switch {
		case there && ours[tracking[i]] != id:
			specs = append(specs, "+refs/heads/"+b+":"+tracking[i])
		case !there && known:
			// deleted there: forget it, so the next Depart sends it again
			if _, err := Run(ctx, root, "update-ref", "-d", tracking[i]); err != nil {
				return err
			}
		}
	}
	if len(specs) == 0 {
		return nil // the remote has nothing this clone lacks
	}
	args := append([]string{"fetch", "--quiet", "--no-tags", remote}, specs...)
	_, err = runRemote(ctx, root, args...)
	if isMissingRef(err) {
		err = nil // deleted there since it answered
	}
	if err != nil {
		return fmt.Errorf("fetch from %s: %w (check that the remote is reachable: git fetch %s)", remote, err, remote)
	}
	return nil
}

// remoteHeads is remote's commit of each of branches it has.
func remoteHeads(ctx context.Context, root, remote string, branches ...string) (map[string]string, error) {
	args := []string{"ls-remote", "--heads", remote}
	for _, b := range branches {
		args = append(args, "refs/heads/"+b)
	}
	out, err := runRemote(ctx, root, args...)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, b := range branches {
		want[b] = true
	}
	heads := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		id, name, ok := strings.Cut(line, "\t")
		b := strings.TrimPrefix(name, "refs/heads/")
		if ok && want[b] { // a pattern matches a name's tail: keep exact names
			heads[b] = id
		}
	}
	return heads, nil
}

// refs is the commit of each of names (full ref names) this clone has. One
// lookup each: a for-each-ref would read every ref beside them, and a
// clone has thousands of task branches.
func refs(ctx context.Context, root string, names ...string) map[string]string {
	got := map[string]string{}
	for _, n := range names {
		if id, err := RevParse(ctx, root, n); err == nil {
			got[n] = id
		}
	}
	return got
}

func isMissingRef(err error) bool {
	var ge *Error
	return errors.As(err, &ge) && strings.Contains(ge.Stderr, "couldn't find remote ref")
}

// Arrive makes this clone ready for a job of a task: fetches remote,
// fast-forwards the local parent and task branch to the remote's (making the
// local branch when this clone has none: a task created or last run on
// another member), then makes or refreshes the task's repository and
// worktree at worktree from this clone (TaskRepo.Prepare).
func Arrive(ctx context.Context, root, remote, worktree, branch, parent string) error {
	if err := arrive(ctx, root, remote, branch, parent); err != nil {
		return err
	}
	// the job's own Prepare follows with no turn between: it finds the
	// repository prepared
	return TaskRepo{Project: root, Worktree: worktree, Branch: branch, Parent: parent}.prepare(ctx, true)
}

func arrive(ctx context.Context, root, remote, branch, parent string) error {
	defer lockClone(root)()
	if err := fetch(ctx, root, remote, parent, branch); err != nil {
		return err
	}
	if err := follow(ctx, root, remote, parent); err != nil {
		return err
	}
	return follow(ctx, root, remote, branch)
}

// Follow fast-forwards the local branch to remote's when remote's is ahead.
// A local branch with commits remote lacks is left as it is (they go out
// with the next Depart); branches that have parted are an error.
func Follow(ctx context.Context, root, remote, branch string) error {
	defer lockClone(root)()
	return follow(ctx, root, remote, branch)
}

func follow(ctx context.Context, root, remote, branch string) error {
	theirs, err := RevParse(ctx, root, "refs/remotes/"+remote+"/"+branch)
	if err != nil {
		return nil // the remote does not have it (yet): nothing to follow
	}
	ours, err := RevParse(ctx, root, "refs/heads/"+branch)
	if err != nil {
		_, err := Run(ctx, root, "branch", "--no-track", branch, theirs)
		return err
	}
	if ours == theirs {
		return nil
	}
	if _, err := Run(ctx, root, "merge-base", "--is-ancestor", ours, theirs); err != nil {
		if _, err2 := Run(ctx, root, "merge-base", "--is-ancestor", theirs, ours); err2 == nil {
			return nil // ours is ahead
		}
		return fmt.Errorf("branch %s here and on %s have parted: %s has commits this clone lacks and the reverse; reconcile them by hand (git log %s...%s/%s)", branch, remote, remote, branch, remote, branch)
	}
	return FastForward(ctx, root, branch, theirs)
}

// Depart sends branch to remote (a fast-forward push), unless the remote
// had it already when this clone last looked.
func Depart(ctx context.Context, root, remote, branch string) error {
	defer lockClone(root)()
	local, tracking := "refs/heads/"+branch, "refs/remotes/"+remote+"/"+branch
	at := refs(ctx, root, local, tracking)
	head, ok := at[local]
	if !ok {
		return fmt.Errorf("push %s to %s: this clone has no branch %s", branch, remote, branch)
	}
	if at[tracking] == head {
		return nil // sent before, or fetched from there: nothing new
	}
	if _, err := runRemote(ctx, root, "push", "--quiet", remote, head+":refs/heads/"+branch); err != nil {
		return fmt.Errorf("push %s to %s: %w", branch, remote, err)
	}
	// what this clone knows the remote has, so the next look is exact
	if _, err := Run(ctx, root, "update-ref", tracking, head); err != nil {
		return fmt.Errorf("record the push of %s: %w", branch, err)
	}
	return nil
}

// Publish moves parent on remote to branch's head, only as a fast-forward:
// when the remote's parent has moved on, it is refused and nothing changes.
func Publish(ctx context.Context, root, remote, branch, parent string) error {
	defer lockClone(root)()
	if _, err := runRemote(ctx, root, "push", "--quiet", remote, "refs/heads/"+branch+":refs/heads/"+parent); err != nil {
		return fmt.Errorf("move %s on %s to %s: %w", parent, remote, branch, err)
	}
	return nil
}
