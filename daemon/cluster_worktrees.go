package daemon

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"lazy/gitx"
)

// A member's worktrees of tasks it does not host. The task actor removes
// its worktree when the cluster moves the task away (actors.leaveWorktree);
// this sweep takes the rest: the worktree the member that created a task
// made before the cluster placed it elsewhere, and those left from an
// earlier life of the member whose tasks went elsewhere at its restart.
// A job here again makes the worktree anew from the remote.
const (
	// movedSweepEvery is how often a member looks; movedIdle how long a
	// worktree must have been left alone (its directory unchanged) first
	movedSweepEvery = 10 * time.Second
	movedIdle       = 20 * time.Second
)

func (s *Service) sweepMoved(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(movedSweepEvery):
		}
		for _, wt := range s.sweepMovedOnce(ctx, movedIdle) {
			s.log.Info("removed the worktree of a task another member hosts", "worktree", wt)
		}
	}
}

// sweepMovedOnce removes the worktrees, idle longer than idle, of live
// tasks with no actor on this member, each under the task's job lock (a
// job of it here holds that lock while it runs); it returns those removed.
func (s *Service) sweepMovedOnce(ctx context.Context, idle time.Duration) []string {
	entries, err := os.ReadDir(s.paths.Worktrees)
	if err != nil || len(entries) == 0 {
		return nil
	}
	local := map[string]bool{}
	for _, h := range s.sup.Health() {
		if h.Kind == "task" {
			local[h.TaskID] = true
		}
	}
	var removed []string
	for _, e := range entries {
		if !e.IsDir() || ctx.Err() != nil {
			continue // a link or a file is no worktree the daemon made
		}
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < idle {
			continue
		}
		t, err := s.Resolve(ctx, e.Name())
		wt := filepath.Join(s.paths.Worktrees, e.Name())
		if err != nil || t.Ref() != e.Name() || t.Status.Ended() || local[t.ID] {
			continue // not a task's, ended (sweepEnded's), or hosted here
		}
		lock, err := gitx.TryLock(filepath.Join(s.paths.State, "locks", t.ID+".lock"), "remove the worktree of a task another member hosts")
		if err != nil {
			continue // a job of it runs here after all
		}
		err = gitx.TaskRepo{Project: s.paths.Root, Worktree: wt, Branch: t.Branch, Parent: t.Parent}.Remove()
		lock.Unlock()
		if err != nil {
			s.log.Warn("remove the worktree of a task another member hosts", "worktree", wt, "err", err)
			continue
		}
		removed = append(removed, wt)
	}
	return removed
}
