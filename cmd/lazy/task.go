package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"lazy/api"
	"lazy/httpapi"
)

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (a *app) taskCmd() *cobra.Command {
	c := &cobra.Command{Use: "task", Short: "Create, list, show, rename and cancel tasks"}
	var na api.NewTaskArgs
	newCmd := &cobra.Command{
		Use:   "new -m PROMPT",
		Short: "Create branch lazy/<ref> and its worktree, and launch the first work turn",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := call(cmd, a, api.CmdTaskNew, na)
			if err != nil {
				return err
			}
			for _, w := range res.Warnings {
				fmt.Fprintf(a.errOut, "warning: %s\n", w)
			}
			return a.printed(res.Task, "%s %s\n", res.Task.Ref, res.Task.ID)
		},
	}
	newCmd.Flags().StringVarP(&na.Prompt, "message", "m", "", "what the agent should do (required)")
	newCmd.Flags().StringVar(&na.Code, "code", "", "a short code for the task, e.g. fix-login")
	newCmd.Flags().StringVar(&na.Role, "role", "", "the model role (a [models.roles.NAME] of the config)")
	newCmd.Flags().StringVar(&na.Parent, "parent", "", "the branch to start from and merge into (default: the current branch)")
	newCmd.Flags().StringArrayVar(&na.Scope, "scope", nil, "a glob of paths the task may touch (repeatable)")
	newCmd.Flags().Int64Var(&na.BudgetTokens, "budget-tokens", 0, "input + output tokens the task may spend (default: agent.budget_tokens; 0 there: no budget)")
	newCmd.Flags().StringVar(&na.Driver, "driver", "", "the task's agent: claude-code, codex, gemini or script (default: agent.driver)")
	_ = newCmd.MarkFlagRequired("message")

	list := &cobra.Command{
		Use:   "list",
		Short: "List tasks with status, turns and last activity",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ts, err := call(cmd, a, api.CmdTaskList, api.None{})
			if err != nil {
				return err
			}
			if a.json {
				if ts == nil {
					ts = []api.TaskInfo{}
				}
				return printJSON(a.out, ts)
			}
			if len(ts) == 0 {
				fmt.Fprintln(a.out, "no tasks yet: lazy task new -m \"what to do\"")
				return nil
			}
			tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "TASK\tSTATUS\tTURNS\tASKS\tTOKENS\tLAST ACTIVITY\tTITLE")
			for _, t := range ts {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", t.Ref, t.Status, t.Turns, t.Asks, tokensCell(t), ago(t.LastActivity), t.Title)
			}
			return tw.Flush()
		},
	}
	show := &cobra.Command{
		Use:   "show TASK",
		Short: "Show one task, its turns and task messages",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := call(cmd, a, api.CmdTaskShow, api.TaskRef{Task: args[0]})
			if err != nil {
				return err
			}
			if a.json {
				// the task object of CONTRACT §3 (turns: the count), and
				// what the text shows besides: each turn, the task messages
				b, _ := json.Marshal(d.Task)
				var obj map[string]any
				_ = json.Unmarshal(b, &obj)
				obj["turn_records"], obj["comments"] = orEmpty(d.Turns), orEmpty(d.Comments)
				return printJSON(a.out, obj)
			}
			t := d.Task
			fmt.Fprintf(a.out, "task %s (%s)\nstatus: %s\nbranch: %s from %s\n%s\nlast activity: %s\n", t.Ref, t.ID, t.Status, t.Branch, t.Parent, countsLine(t), ago(t.LastActivity))
			if t.Agent != "" {
				fmt.Fprintf(a.out, "agent: %s\n", t.Agent)
			}
			if t.Tripwire != "" {
				if strings.HasPrefix(t.Tripwire, "tripwire:") {
					fmt.Fprintln(a.out, t.Tripwire)
				} else {
					fmt.Fprintf(a.out, "tripwire: %s\n", t.Tripwire)
				}
			}
			if t.ModelError != "" {
				fmt.Fprintf(a.out, "model: %s\n", t.ModelError)
			}
			if t.Push != nil {
				fmt.Fprintf(a.out, "push: %s\n", t.Push.Words(time.Now()))
			}
			if t.FailReason != "" {
				fmt.Fprintf(a.out, "reason: %s\n", t.FailReason)
			}
			if line := httpapi.UsageWords(t); line != "" {
				fmt.Fprintf(a.out, "usage: %s\n", line)
			}
			fmt.Fprintf(a.out, "title: %s\n", t.Title)
			for _, tu := range d.Turns {
				fmt.Fprintf(a.out, "  %s (%s) %s", tu.Label, tu.Trigger, tu.Status)
				if tu.Error != "" {
					fmt.Fprintf(a.out, ": %s", tu.Error)
				}
				fmt.Fprintln(a.out)
				if tu.Notice != "" {
					fmt.Fprintf(a.out, "    %s\n", tu.Notice)
				}
				if tu.Result != "" {
					fmt.Fprintf(a.out, "    %s\n", firstLine(tu.Result))
				}
			}
			return nil
		},
	}
	cancel := &cobra.Command{
		Use:   "cancel TASK",
		Short: "End a task: kill its running turn, drop queued ones, revoke its grants",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := call(cmd, a, api.CmdTaskCancel, api.TaskRef{Task: args[0]})
			if err != nil {
				return err
			}
			return a.printed(t, "%s: %s\n", t.Ref, t.Status)
		},
	}
	var tokens int64
	budget := &cobra.Command{
		Use:   "budget TASK --tokens N",
		Short: "Change the task's token budget (input + output; 0: none); a task stopped by its budget goes on when you unblock it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("tokens") {
				return usageError{errors.New("say the new budget: lazy task budget TASK --tokens N (0: no budget)")}
			}
			t, err := call(cmd, a, api.CmdTaskBudget, api.BudgetArgs{Task: args[0], Tokens: tokens})
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, t)
			}
			fmt.Fprintf(a.out, "%s: budget %d tokens", t.Ref, t.BudgetTokens)
			if t.BudgetTokens == 0 {
				fmt.Fprint(a.out, " (none)")
			}
			if line := httpapi.UsageWords(*t); line != "" {
				fmt.Fprintf(a.out, "\nusage: %s", line)
			}
			fmt.Fprintln(a.out)
			return nil
		},
	}
	budget.Flags().Int64Var(&tokens, "tokens", 0, "the task's new budget in tokens (input + output; 0: no budget)")
	c.AddCommand(newCmd, list, show, cancel, budget, a.renameCmd(), a.pruneCmd(), a.transcriptCmd())
	return c
}

func (a *app) renameCmd() *cobra.Command {
	var title string
	c := &cobra.Command{
		Use:   "rename TASK --title TEXT",
		Short: "Give a task a new title (the queue, the pages and task list show it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := call(cmd, a, api.CmdTaskRename, api.RenameArgs{Task: args[0], Title: title})
			if err != nil {
				return err
			}
			return a.printed(t, "%s: %s\n", t.Ref, t.Title)
		},
	}
	c.Flags().StringVarP(&title, "title", "t", "", "the new title: one line (required)")
	_ = c.MarkFlagRequired("title")
	return c
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return time.Since(t).Round(time.Second).String() + " ago"
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if len(l) > 120 {
		l = l[:117] + "..."
	}
	return l
}

func (a *app) commentCmd() *cobra.Command {
	var body string
	c := &cobra.Command{
		Use:   "comment TASK -m TEXT",
		Short: "Send the task a message (a task message; on a blocked task it starts a work turn). Review comments on diff lines: the review page",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := call(cmd, a, api.CmdComment, api.CommentArgs{Task: args[0], Body: body})
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, res)
			}
			fmt.Fprintln(a.out, res.Notice)
			if res.Triggered != nil && res.Triggered.Notice != "" {
				fmt.Fprintln(a.out, res.Triggered.Notice)
			}
			return nil
		},
	}
	c.Flags().StringVarP(&body, "message", "m", "", "the comment text (required)")
	_ = c.MarkFlagRequired("message")
	return c
}

func (a *app) unblockCmd() *cobra.Command {
	var msg string
	c := &cobra.Command{
		Use:   "unblock TASK [-m MESSAGE]",
		Short: "Launch the next work turn with your message",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tu, err := call(cmd, a, api.CmdUnblock, api.UnblockArgs{Task: args[0], Message: msg})
			if err != nil {
				return err
			}
			if tu.Notice != "" && !a.json {
				defer fmt.Fprintln(a.out, tu.Notice)
			}
			return a.printed(tu, "work turn %d queued\n", tu.Seq)
		},
	}
	c.Flags().StringVarP(&msg, "message", "m", "", "your message to the agent")
	return c
}

// countsLine is a task's turn counts, each named: "turns: 3 (asks 2, setup
// 1)". Turns are work turns (docs/GUIDE.md, "Turns").
func countsLine(t api.TaskInfo) string {
	s := fmt.Sprintf("turns: %d", t.Turns)
	var more []string
	if t.Asks > 0 {
		more = append(more, fmt.Sprintf("asks %d", t.Asks))
	}
	if t.Setup > 0 {
		more = append(more, fmt.Sprintf("setup %d", t.Setup))
	}
	if len(more) > 0 {
		s += " (" + strings.Join(more, ", ") + ")"
	}
	return s
}

// orEmpty keeps a JSON list a list when it has nothing in it.
func orEmpty[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}

// tokensCell is the task list's TOKENS column: input + output tokens used,
// and the budget when there is one.
func tokensCell(t api.TaskInfo) string {
	used := int64(0)
	if t.Usage != nil {
		used = t.Usage.BudgetUsed()
	}
	if t.BudgetTokens > 0 {
		return fmt.Sprintf("%d/%d", used, t.BudgetTokens)
	}
	return fmt.Sprint(used)
}

// transcriptCmd prints what the model said in a turn of a task: its text,
// the tools it called, the results and files the client reported.
func (a *app) transcriptCmd() *cobra.Command {
	var turn int
	c := &cobra.Command{
		Use:   "transcript TASK [--turn N]",
		Short: "Print what the model said in a turn (the latest by default): text, tool calls, files written",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, argv []string) error {
			tr, err := call(cmd, a, api.CmdTaskTranscript, api.TranscriptArgs{Task: argv[0], Turn: turn})
			if err != nil || a.json {
				if err == nil {
					err = printJSON(a.out, tr)
				}
				return err
			}
			fmt.Fprintf(a.out, "turn %d: %d model call(s), %d tokens\n", tr.Turn, len(tr.Calls), tr.Tokens)
			for _, c := range tr.Calls {
				fmt.Fprintf(a.out, "\n-- call %d\n", c.Call)
				if c.Text != "" {
					fmt.Fprintln(a.out, c.Text)
				}
				for _, t := range c.Tools {
					fmt.Fprintf(a.out, "tool %s %s\n", t.Name, t.Input)
				}
				for _, r := range c.Results {
					state := "result"
					if r.IsError {
						state = "error"
					}
					fmt.Fprintf(a.out, "%s of %s: %s\n", state, r.Tool, r.Content)
				}
			}
			if len(tr.Written) > 0 {
				fmt.Fprintf(a.out, "\nwrote: %s\n", strings.Join(tr.Written, ", "))
			}
			if tr.Truncated {
				fmt.Fprintln(a.out, "(the turn's transcript reached its bound: the rest was not kept)")
			}
			return nil
		},
	}
	c.Flags().IntVar(&turn, "turn", 0, "the turn's number as lazy task show lists it (default: the latest with a transcript)")
	return c
}
