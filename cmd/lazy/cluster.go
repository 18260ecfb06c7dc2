package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"lazy/api"
)

func (a *app) clusterCmd() *cobra.Command {
	c := &cobra.Command{Use: "cluster", Short: "See the daemons that share this project (docs/SCALE-OUT.md)"}
	c.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "The members, the tasks each hosts, and whether etcd and PostgreSQL answer",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := call(cmd, a, api.CmdClusterStatus, api.None{})
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, st)
			}
			fmt.Fprintf(a.out, "cluster %s: %d members\n", st.Name, len(st.Members))
			tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "MEMBER\tDASHBOARD\tTASKS\tRUNNING\tSTATE")
			for _, m := range st.Members {
				state := "ok"
				if m.Error != "" {
					state = "no answer: " + m.Error
				}
				addr := m.Address
				if m.Self {
					addr += " (this one)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", addr, dashIfEmpty(m.BaseURL), m.Grains, m.RunningTurns, state)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, e := range st.Etcd {
				fmt.Fprintf(a.out, "etcd %s: %s\n", e.Endpoint, healthWord(e))
			}
			fmt.Fprintf(a.out, "store: %s\n", healthWord(st.Store))
			return nil
		},
	})
	return c
}

func healthWord(h api.Health) string {
	if h.OK {
		return "ok"
	}
	return "DOWN: " + strings.TrimSpace(h.Error)
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
