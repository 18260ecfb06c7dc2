package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"lazy/api"
	"lazy/gitx"
	"lazy/store"
)

// Prune cleans up after ended tasks (accepted, cancelled): each one's
// worktree and task repository go (an accept or a cancel removes them as
// the task ends; this catches what a crash or an older daemon left), and
// its branch lazy/<ref> goes once the task has been ended for keep_branches,
// its commits kept at refs/lazy/ended/<id> so the task's review page, its
// record, still shows what it merged or left. A branch a live task uses (its
// own or its parent) is never touched, nor anything of a live task.
func (s *Service) Prune(ctx context.Context, a api.PruneArgs) (*api.PruneResult, error) {
	keep := s.live.Get().KeepBranchesDuration()
	keepText := s.live.Get().Tasks.KeepBranches
	if strings.TrimSpace(a.KeepBranches) != "" {
		d, err := time.ParseDuration(a.KeepBranches)
		if err != nil || d < 0 {
			return nil, usage("--keep-branches %q is not a duration: write it like 168h (a week) or 0s (every ended task's branch now)", a.KeepBranches)
		}
		keep, keepText = d, a.KeepBranches
	}
	all, err := s.st.ListTasks(ctx)
	if err != nil {
		return nil, err
	}
	root := s.paths.Root
	// one git run for every task branch there is
	out, err := gitx.Run(ctx, root, "for-each-ref", "--format=%(refname)", "refs/heads/lazy/")
	if err != nil {
		return nil, err
	}
	exists := map[string]bool{}
	for _, r := range strings.Split(out, "\n") {
		if b, ok := strings.CutPrefix(r, "refs/heads/"); ok {
			exists[b] = true
		}
	}
	inUse := map[string]bool{}
	for i := range all {
		if t := &all[i]; !t.Status.Ended() {
			inUse[t.Branch], inUse[t.Parent] = true, true
		}
	}
	res := &api.PruneResult{DryRun: a.DryRun, KeepBranches: keepText, Pruned: []api.PrunedTask{}, Kept: []api.PrunedTask{}}
	now := time.Now()
	for i := range all {
		t := &all[i]
		if !t.Status.Ended() {
			continue
		}
		p := api.PrunedTask{Task: t.Ref(), ID: t.ID, Status: string(t.Status)}
		if s.leftWorktree(t) {
			p.Worktree = t.Worktree
			if !a.DryRun {
				if err := (gitx.TaskRepo{Project: root, Worktree: t.Worktree, Branch: t.Branch, Parent: t.Parent}).Remove(); err != nil {
					p.Error = err.Error()
				}
			}
		}
		if exists[t.Branch] && !inUse[t.Branch] && p.Error == "" {
			ended := t.UpdatedAt
			if t.EndedAt != nil {
				ended = *t.EndedAt
			}
			switch due := ended.Add(keep); {
			case t.EndHead == "":
				// its page diffs the branch itself: it stays
				k := p
				k.Error = "ended before lazy kept its commits: its review page reads the branch, which stays"
				res.Kept = append(res.Kept, k)
			case now.Before(due):
				k := api.PrunedTask{Task: p.Task, ID: p.ID, Status: p.Status, Branch: t.Branch, BranchUntil: &due}
				res.Kept = append(res.Kept, k)
			default:
				p.Branch, p.KeptRef = t.Branch, gitx.EndedRef(t.ID)
				if !a.DryRun {
					if err := gitx.RetireBranch(ctx, root, t.Branch, p.KeptRef, t.EndHead); err != nil {
						p.Error, p.Branch, p.KeptRef = err.Error(), "", ""
					}
				}
			}
		}
		if p.Worktree != "" || p.Branch != "" || p.Error != "" {
			res.Pruned = append(res.Pruned, p)
		}
	}
	return res, nil
}

// leftWorktree reports an ended task whose worktree or task repository is
// still there, under this daemon's own worktrees (a path elsewhere is no
// worktree it made, and is never removed).
func (s *Service) leftWorktree(t *store.Task) bool {
	if t.Worktree == "" || !filepath.IsAbs(t.Worktree) {
		return false
	}
	rel, err := filepath.Rel(s.paths.Worktrees, t.Worktree)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || strings.Contains(rel, string(filepath.Separator)) {
		return false
	}
	for _, p := range []string{t.Worktree, gitx.TaskGitDir(t.Worktree)} {
		if _, err := os.Lstat(p); err == nil || !errors.Is(err, os.ErrNotExist) {
			return true
		}
	}
	return false
}

// sweepEnded prunes ended tasks in the background until ctx ends: at start
// and then every half of keep_branches (at least every second, at most every
// hour), so a branch goes close to when it is due. What it removed is
// logged.
func (s *Service) sweepEnded(ctx context.Context) {
	for {
		res, err := s.Prune(ctx, api.PruneArgs{})
		if err != nil && ctx.Err() == nil {
			s.log.Warn("sweep ended tasks", "err", err)
		}
		if res != nil {
			for _, p := range res.Pruned {
				if p.Error != "" {
					s.log.Warn("sweep ended tasks", "task", p.Task, "err", p.Error)
					continue
				}
				s.log.Info("swept an ended task", "task", p.Task, "worktree", p.Worktree, "branch", p.Branch, "kept_ref", p.KeptRef)
			}
		}
		every := min(max(s.live.Get().KeepBranchesDuration()/2, time.Second), time.Hour)
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}
