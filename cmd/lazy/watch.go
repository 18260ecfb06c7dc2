package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"lazy/api"
	"lazy/client"
)

// errDaemonStopped ends a watch when the daemon says it is stopping.
var errDaemonStopped = errors.New("daemon stopped")

func (a *app) watchCmd() *cobra.Command {
	var tasks []string
	var net bool
	c := &cobra.Command{
		Use:   "watch [--task T]... [--net]",
		Short: "Stream task events (and, with --net, the proxy's traffic as net> lines)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			args := api.WatchArgs{Net: net}
			if cmd.Flags().Changed("task") {
				args.Tasks = tasks
				if args.Tasks == nil {
					args.Tasks = []string{}
				}
			}
			// stderr, so that stdout stays the events alone (and JSON with --json)
			opened := func() { fmt.Fprintln(a.errOut, "watching: events appear as they happen (Ctrl-C to stop)") }
			err = client.Watch(cmd.Context(), cl, api.CmdWatch, args, opened, func(e api.Event) error {
				if a.json {
					b, err := json.Marshal(e)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintln(a.out, string(b))
					if err == nil && e.Kind == api.EventDaemonStopped {
						return errDaemonStopped
					}
					return err
				}
				if e.Kind == api.EventDaemonStopped {
					fmt.Fprintln(a.out, "daemon stopped")
					return errDaemonStopped
				}
				_, err := fmt.Fprintln(a.out, EventLine(e))
				return err
			})
			if errors.Is(err, errDaemonStopped) {
				return nil // the stream ended because the daemon stopped: done
			}
			return err
		},
	}
	c.Flags().StringArrayVar(&tasks, "task", nil, "only this task (code, short id or full id; repeatable)")
	c.Flags().BoolVar(&net, "net", false, "include proxy traffic")
	return c
}

// EventLine renders one event for a terminal.
func EventLine(e api.Event) string {
	if e.Kind == api.EventNet && e.Net != nil {
		return e.Net.Line()
	}
	ts := e.Time.UTC().Format(time.RFC3339)
	switch e.Kind {
	case api.EventStatus:
		s := fmt.Sprintf("%s %s status %s", ts, e.TaskRef, e.Status)
		if e.Detail != "" {
			s += ": " + e.Detail
		}
		return s
	case api.EventTurnStart:
		return fmt.Sprintf("%s %s %s start %s", ts, e.TaskRef, turnName(e), e.Detail)
	case api.EventTurnNote:
		return fmt.Sprintf("%s %s %s: %s", ts, e.TaskRef, turnName(e), e.Detail)
	case api.EventTurnEnd:
		s := fmt.Sprintf("%s %s %s end %s", ts, e.TaskRef, turnName(e), e.Status)
		if e.Detail != "" {
			s += ": " + e.Detail
		}
		return s
	case api.EventConfig:
		return ts + " " + e.Detail
	}
	return fmt.Sprintf("%s %s %s %s", ts, e.TaskRef, e.Kind, e.Detail)
}

func (a *app) actorsCmd() *cobra.Command {
	var panicTarget string
	c := &cobra.Command{
		Use:   "actors",
		Short: "Show the actor tree's health: mailboxes, queued jobs, running job, restarts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if panicTarget != "" {
				_, err := call(cmd, a, api.CmdInjectPanic, api.InjectPanicArgs{Target: panicTarget})
				return err
			}
			hs, err := call(cmd, a, api.CmdActors, api.None{})
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, hs)
			}
			tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ACTOR\tKIND\tTASK\tMAILBOX\tQUEUED\tRUNNING\tSINCE\tRESTARTS\tLAST FAILURE\tOK")
			for _, h := range hs {
				since := "-"
				if h.RunningSince != nil {
					since = ago(*h.RunningSince)
				}
				running := h.Running
				if running == "" {
					running = "-"
				}
				ok := "yes"
				if !h.Responsive {
					ok = "NO ANSWER"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%d\t%s\t%s\n", h.Name, h.Kind, dash(h.TaskRef), h.Mailbox, len(h.Queued), running, since, h.Restarts, dash(firstLine(h.LastFailure)), ok)
			}
			return tw.Flush()
		},
	}
	c.Flags().StringVar(&panicTarget, "inject-panic", "", "fault injection: make an actor panic (grants, traffic or a TASK)")
	_ = c.Flags().MarkHidden("inject-panic")
	return c
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// turnName names an event's turn as the CLI does ("work turn 3"), or by
// its record number for an event that carries no label.
func turnName(e api.Event) string {
	if e.Label != "" {
		return e.Label
	}
	return fmt.Sprintf("turn %d", e.Turn)
}
