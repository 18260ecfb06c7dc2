package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"lazy/api"
	"lazy/approval"
	"lazy/client"
	"lazy/review"
)

// readSecret reads a passphrase from the terminal without echo, or one line
// of standard input when it is not a terminal.
func (a *app) readSecret(prompt string) (string, error) {
	fd := int(os.Stdin.Fd())
	if term.IsTerminal(fd) {
		fmt.Fprint(a.errOut, prompt)
		b, err := term.ReadPassword(fd)
		fmt.Fprintln(a.errOut)
		if err != nil {
			return "", fmt.Errorf("read the passphrase: %w", err)
		}
		return string(b), nil
	}
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil && line == "" {
		return "", errors.New("no passphrase on standard input: run this at a terminal, or pipe the passphrase in")
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// refusal prints a refused accept's remedy under the daemon's message.
func (a *app) refusal(err error) error {
	var ce *client.Error
	if !errors.As(err, &ce) {
		return err
	}
	if r := review.ParseRemedy(ce.Remedy); r != nil {
		fmt.Fprintf(a.errOut, "next: %s\n", r.Next)
		if len(r.Files) > 0 {
			fmt.Fprintf(a.errOut, "files: %s\n", strings.Join(r.Files, ", "))
		}
		for _, c := range r.Commits {
			fmt.Fprintf(a.errOut, "new commit: %s\n", c)
		}
		if r.Command != "" {
			fmt.Fprintf(a.errOut, "run: %s\n", r.Command)
		}
	}
	return err
}

func (a *app) acceptCmd() *cobra.Command {
	var args api.AcceptArgs
	var approve []string
	c := &cobra.Command{
		Use:   "accept TASK --reason TEXT [--method merge|squash|rebase] [--head SHA] [--approve-file PATH]...",
		Short: "Merge a task into its parent (refusals say what to do next)",
		Long: "Merge a task into its parent. The accept binds to one head of the task branch: the one given\n" +
			"with --head, else the branch's head now, printed before it is sent. If the branch has moved\n" +
			"from it by the time the daemon merges, nothing is merged and the new commits are listed.\n\n" +
			"--method says how the task goes into its parent:\n" +
			"  merge   (default) a fast-forward when the task holds the parent's head; when the parent moved\n" +
			"          on, one merge commit of the task into the parent (refused on conflicts: sync first)\n" +
			"  squash  one commit on the parent with the task's change; its message is the task's title\n" +
			"          and your reason\n" +
			"  rebase  the task's own commits replayed onto the parent: a linear history (refused when a\n" +
			"          commit does not apply: use merge or squash, or sync first)",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, argv []string) error {
			cl, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			if len(approve) > 0 {
				if err := a.approve(cmd.Context(), cl, argv[0], approve); err != nil {
					return err
				}
			}
			if args.Head == "" {
				commits, err := client.Do(cmd.Context(), cl, api.CmdTaskCommits, api.TaskRef{Task: argv[0]})
				if err != nil {
					return err
				}
				if len(commits) > 0 {
					args.Head = commits[0].SHA
					fmt.Fprintf(a.errOut, "accepting %s at %s %s (%d commit(s); give --head SHA to name another)\n", argv[0], shortSHA(args.Head), commits[0].Subject, len(commits))
				}
			}
			t, err := client.Do(cmd.Context(), cl, api.CmdReviewAccept, api.ReviewAcceptArgs{Task: argv[0], AcceptArgs: args})
			if err != nil {
				return a.refusal(err)
			}
			return a.printed(t, "%s: accepted into %s\n", t.Ref, t.Parent)
		},
	}
	c.Flags().StringVar(&args.Reason, "reason", "", "why you accept (required)")
	c.Flags().StringVar(&args.Method, "method", "merge", "how the task goes into its parent: merge, squash or rebase")
	c.Flags().StringVar(&args.Head, "head", "", "the task branch head you reviewed (default: its head now, printed); another head is refused")
	c.Flags().StringArrayVar(&approve, "approve-file", nil, "approve this protected file first (asks for the passphrase; repeatable)")
	c.Flags().BoolVar(&args.AllowOutOfScope, "allow-out-of-scope", false, "allow the task's changes outside its --scope")
	_ = c.MarkFlagRequired("reason")
	return c
}

func (a *app) approve(ctx context.Context, cl *client.Client, task string, files []string) error {
	pass, err := a.readSecret("approval passphrase: ")
	if err != nil {
		return err
	}
	_, err = client.Do(ctx, cl, api.CmdApprove, api.ApproveArgs{Task: task, Files: files, Passphrase: pass})
	return err
}

func (a *app) approveCmd() *cobra.Command {
	var files []string
	c := &cobra.Command{
		Use:   "approve TASK --file PATH...",
		Short: "Approve protected files of a task (asks for the approval passphrase)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, argv []string) error {
			cl, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			if err := a.approve(cmd.Context(), cl, argv[0], files); err != nil {
				return err
			}
			fmt.Fprintf(a.out, "approved %s\n", strings.Join(files, ", "))
			return nil
		},
	}
	c.Flags().StringArrayVar(&files, "file", nil, "a protected file to approve (repeatable, required)")
	_ = c.MarkFlagRequired("file")
	return c
}

// scopeCmd is reviewViolationDecision from the terminal: allow keeps a
// task's out-of-scope files, revert puts them back on its branch.
func (a *app) scopeCmd() *cobra.Command {
	return &cobra.Command{Use: "scope TASK allow|revert PATH...", Args: cobra.MinimumNArgs(3), RunE: a.scope,
		Short: "Decide on a task's out-of-scope files: allow keeps them, revert puts them back on the task branch"}
}

func (a *app) scope(cmd *cobra.Command, argv []string) error {
	decision, files := argv[1], argv[2:]
	if decision != "allow" && decision != "revert" {
		return usageError{fmt.Errorf("the decision is allow or revert, not %q", decision)}
	}
	if _, err := call(cmd, a, api.CmdReviewViolationDecision, api.ViolationArgs{Task: argv[0], Decision: decision, Files: files}); err != nil {
		return err
	}
	fmt.Fprintf(a.out, "%s: %s\n", decision, strings.Join(files, ", "))
	return nil
}

func (a *app) syncCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "sync TASK",
		Short: "Merge the parent branch into the task branch (exit 1 on conflicts: unblock the task, the agent resolves them)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, argv []string) error {
			fmt.Fprintln(a.errOut, "syncing (a question the agent is answering finishes first)...")
			r, err := call(cmd, a, api.CmdSync, api.SyncArgs{Task: argv[0], Wait: true})
			if err != nil {
				return err
			}
			if len(r.Conflicts) > 0 {
				// the sync did not bring the task up to date: a failure
				// for scripts (exit 1), with the next step said
				msg := r.Message
				if msg == "" {
					msg = review.SyncConflicts(argv[0], r.Conflicts)
				}
				return errors.New(msg)
			}
			if a.json {
				return printJSON(a.out, r)
			}
			fmt.Fprintln(a.out, "synced: the task branch has its parent's latest commits; review and accept it")
			return nil
		},
	}
}

func (a *app) passphraseCmd() *cobra.Command {
	c := &cobra.Command{Use: "passphrase", Short: "Manage the approval passphrase of protected files"}
	c.AddCommand(&cobra.Command{
		Use:   "set",
		Short: "Set the approval passphrase (stored as a slow hash in the state dir)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := a.paths(cmd.Context())
			if err != nil {
				return err
			}
			pass, err := a.readSecret("new approval passphrase: ")
			if err != nil {
				return err
			}
			if term.IsTerminal(int(os.Stdin.Fd())) {
				again, err := a.readSecret("again: ")
				if err != nil {
					return err
				}
				if again != pass {
					return errors.New("the two passphrases differ; nothing was changed")
				}
			}
			if err := os.MkdirAll(p.State, 0o700); err != nil {
				return err
			}
			if err := approval.Save(p.Passphrase, pass); err != nil {
				return err
			}
			fmt.Fprintf(a.out, "passphrase set (hash in %s)\n", p.Passphrase)
			return nil
		},
	})
	return c
}

func (a *app) askCmd() *cobra.Command {
	var file, side, question string
	var line int
	var wait bool
	c := &cobra.Command{
		Use:   "ask TASK --file PATH --line N [--side old|new] -m QUESTION [--wait]",
		Short: "Ask the agent about a line of the task's diff (the page's Ask agent)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if file == "" || line < 1 || strings.TrimSpace(question) == "" {
				return usageError{fmt.Errorf("an ask needs --file PATH, --line N (from 1) and -m QUESTION")}
			}
			cl, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			var answer string
			posted, err := client.Do(cmd.Context(), cl, api.CmdReviewPostComment, api.ReviewCommentArgs{Task: argv[0],
				PostCommentArgs: api.PostCommentArgs{File: file, Line: line, Side: side, Intent: string(review.Ask), Body: question}})
			if err != nil {
				return err
			}
			c := *posted
			if wait && c.AskState == review.AskPending {
				fmt.Fprintln(a.errOut, "waiting for the agent's answer...")
				for c.AskState == review.AskPending {
					select {
					case <-cmd.Context().Done():
						return cmd.Context().Err()
					case <-time.After(500 * time.Millisecond):
					}
					pl, err := client.Do(cmd.Context(), cl, api.CmdReviewComments, api.TaskRef{Task: argv[0]})
					if err != nil {
						return err
					}
					c, answer = findAsk(*pl, c)
				}
			}
			if a.json {
				return printJSON(a.out, c)
			}
			switch c.AskState {
			case review.AskFailed:
				return fmt.Errorf("the question was saved but not answered: %s (re-send it from the review page)", c.AskError)
			case review.AskAnswered:
				fmt.Fprintln(a.out, answer)
			default:
				fmt.Fprintf(a.out, "asked (%s); the answer will appear in the thread — add --wait to wait for it\n", c.ID)
			}
			return nil
		},
	}
	c.Flags().StringVar(&file, "file", "", "the file of the line, as in the diff")
	c.Flags().IntVar(&line, "line", 0, "the line number, on --side")
	c.Flags().StringVar(&side, "side", "new", "old (a deleted line) or new")
	c.Flags().StringVarP(&question, "message", "m", "", "the question")
	c.Flags().BoolVar(&wait, "wait", false, "wait for the answer and print it")
	return c
}

// findAsk is the question's current record in the threads payload, and the
// agent's reply that follows it in its thread once it is answered.
func findAsk(pl review.Payload, q review.ReviewComment) (review.ReviewComment, string) {
	for _, th := range pl.Threads {
		for i, m := range th.Messages {
			if m.ID != q.ID {
				continue
			}
			for _, r := range th.Messages[i+1:] {
				if !r.IsOwn() {
					return m, r.Body
				}
			}
			return m, ""
		}
	}
	return q, ""
}

// shortSHA is a commit's first 12 hex digits.
func shortSHA(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
