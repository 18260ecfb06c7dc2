package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"lazy/api"
	"lazy/client"
)

// completeTaskArgs makes every command whose first argument is a TASK
// complete task refs, and `--task` flags too: the shell completion asks
// the project's running daemon; with none it offers nothing and says
// nothing.
func (a *app) completeTaskArgs(c *cobra.Command) {
	for _, sub := range c.Commands() {
		a.completeTaskArgs(sub)
	}
	if f := strings.Fields(c.Use); len(f) > 1 && f[1] == "TASK" && c.ValidArgsFunction == nil {
		c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return a.taskRefs(cmd, toComplete), cobra.ShellCompDirectiveNoFileComp
		}
	}
	if c.Flags().Lookup("task") != nil {
		_ = c.RegisterFlagCompletionFunc("task", func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return a.taskRefs(cmd, toComplete), cobra.ShellCompDirectiveNoFileComp
		})
	}
}

// taskRefs are the refs of the project's tasks that start with prefix,
// each with its status and title; nil when no daemon answers in time.
func (a *app) taskRefs(cmd *cobra.Command, prefix string) []cobra.Completion {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cl, err := a.client(ctx)
	if err != nil {
		return nil
	}
	ts, err := client.Do(ctx, cl, api.CmdTaskList, api.None{})
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, t := range ts {
		if strings.HasPrefix(t.Ref, prefix) {
			out = append(out, cobra.CompletionWithDesc(t.Ref, fmt.Sprintf("%s: %s", t.Status, t.Title)))
		}
	}
	return out
}

// unknownCommand is the refusal of an unknown subcommand of c, with the
// nearest commands (cobra's suggestions) on the same line.
func unknownCommand(c *cobra.Command, arg string) error {
	msg := fmt.Sprintf("unknown command %q for %q", arg, c.CommandPath())
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	if s := c.SuggestionsFor(arg); len(s) > 0 {
		// nearest first, a swap of two letters counting one ("tsak": task)
		sort.SliceStable(s, func(i, j int) bool { return swapDistance(arg, s[i]) < swapDistance(arg, s[j]) })
		q := make([]string, len(s))
		for i, o := range s {
			q[i] = fmt.Sprintf("%q", o)
		}
		msg += ": did you mean " + strings.Join(q, " or ") + "?"
	}
	return usageError{fmt.Errorf("%s (see %s --help)", msg, c.CommandPath())}
}

// swapDistance is the edit distance of a and b where swapping two
// adjacent letters is one edit (optimal string alignment).
func swapDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
