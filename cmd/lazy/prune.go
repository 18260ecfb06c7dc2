package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"lazy/api"
)

func (a *app) pruneCmd() *cobra.Command {
	var args api.PruneArgs
	c := &cobra.Command{
		Use:   "prune [--dry-run] [--keep-branches DURATION]",
		Short: "Remove ended tasks' worktrees and, after tasks.keep_branches, their branches",
		Long: "Clean up after ended tasks (accepted or cancelled). Their worktrees go (an accept or a cancel\n" +
			"removes them already; this catches any left over). Their branches lazy/<ref> go once the task\n" +
			"has been ended for tasks.keep_branches (default 168h, a week; --keep-branches replaces it for\n" +
			"this run); each task's commits stay under refs/lazy/ended/<id>, so its review page still shows\n" +
			"what it merged or left. Nothing of a live task is touched. The daemon runs the same clean-up by\n" +
			"itself, every half of keep_branches (at most hourly).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := call(cmd, a, api.CmdTaskPrune, args)
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, res)
			}
			verb := map[bool]string{true: "would remove", false: "removed"}[res.DryRun]
			for _, p := range res.Pruned {
				if p.Worktree != "" {
					fmt.Fprintf(a.out, "%s %s: %s worktree %s\n", p.Task, p.Status, verb, p.Worktree)
				}
				if p.Branch != "" {
					fmt.Fprintf(a.out, "%s %s: %s branch %s (its commits stay at %s)\n", p.Task, p.Status, verb, p.Branch, p.KeptRef)
				}
				if p.Error != "" {
					fmt.Fprintf(a.errOut, "%s %s: not pruned: %s\n", p.Task, p.Status, p.Error)
				}
			}
			for _, k := range res.Kept {
				if k.BranchUntil != nil {
					fmt.Fprintf(a.out, "%s %s: keeps branch %s until %s (tasks.keep_branches = %s)\n", k.Task, k.Status, k.Branch, k.BranchUntil.Local().Format("2006-01-02 15:04"), res.KeepBranches)
				} else if k.Error != "" {
					fmt.Fprintf(a.out, "%s %s: keeps its branch: %s\n", k.Task, k.Status, k.Error)
				}
			}
			if len(res.Pruned) == 0 {
				fmt.Fprintln(a.out, "nothing to prune")
			}
			return nil
		},
	}
	c.Flags().BoolVar(&args.DryRun, "dry-run", false, "say what would be removed, remove nothing")
	c.Flags().StringVar(&args.KeepBranches, "keep-branches", "", "keep ended tasks' branches this long for this run (e.g. 24h, 0s), instead of tasks.keep_branches")
	return c
}
