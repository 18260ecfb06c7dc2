package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"lazy/api"
	"lazy/supervisor"
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
			fmt.Fprintf(a.out, "cluster %s: %d members, links: %s\n", st.Name, len(st.Members), st.Links)
			tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "MEMBER\tDASHBOARD\tTASKS\tRUNNING\tCERT EXPIRES\tSTATE")
			for _, m := range st.Members {
				state := "ok"
				switch {
				case m.Self && !st.Membership.In:
					state = "OUT of the cluster (below)"
				case m.Error != "":
					state = "no answer: " + m.Error
				}
				addr := m.Address
				if m.Self {
					addr += " (this one)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", addr, dashIfEmpty(m.BaseURL), m.Grains, m.RunningTurns, certExpiry(m.CertExpires), state)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, e := range st.Etcd {
				fmt.Fprintf(a.out, "etcd %s: %s\n", e.Endpoint, healthWord(e))
			}
			fmt.Fprintf(a.out, "store: %s\n", healthWord(st.Store))
			fmt.Fprintln(a.out, membershipLine(st.Membership))
			return nil
		},
	})
	var dir string
	var hosts []string
	cert := &cobra.Command{
		Use:   "cert NAME --host HOST",
		Short: "Make a member's TLS certificate (and the cluster's CA, the first time) for mutual TLS between members",
		Long: "Makes DIR/NAME.pem and DIR/NAME-key.pem, signed by the cluster CA in DIR (ca.pem, ca-key.pem), which\n" +
			"it makes when DIR has none. --host is the host other members reach this one at: the host of its\n" +
			"cluster.advertise. Copy ca.pem, NAME.pem and NAME-key.pem to that member (never ca-key.pem) and set\n" +
			"cluster.tls_cert, tls_key and tls_ca there. It needs no daemon.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !certName.MatchString(name) {
				return usageError{fmt.Errorf("member name %q: use letters, digits, '-' and '_'", name)}
			}
			if len(hosts) == 0 {
				return usageError{errors.New("name the host other members reach this member at: --host HOST (the host of its cluster.advertise)")}
			}
			if dir == "" {
				home, err := api.LazyHome(a.environ)
				if err != nil {
					return err
				}
				dir = filepath.Join(home, "cluster-certs")
			}
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			if repo := repoAround(abs); repo != "" {
				return usageError{fmt.Errorf("--dir %s is inside the git repository %s: the CA key there could be committed, or reach a task's worktree; choose a directory outside every repository (the default is $LAZY_HOME/cluster-certs)", abs, repo)}
			}
			made, err := supervisor.MakeCA(abs)
			if err != nil {
				return err
			}
			if made {
				fmt.Fprintf(a.out, "made the cluster CA: %s (keep %s on this machine only)\n", filepath.Join(abs, "ca.pem"), filepath.Join(abs, "ca-key.pem"))
			}
			certFile, keyFile, err := supervisor.MakeMemberCert(abs, name, hosts)
			if err != nil {
				return err
			}
			if strings.HasPrefix(name, "etcd") {
				// etcd's own certificate (docs/SCALE-OUT.md), not a member's
				fmt.Fprintf(a.out, "made %s and %s for %s\n\nFor etcd, on its command line:\n", certFile, keyFile, strings.Join(hosts, ", "))
				fmt.Fprintf(a.out, "--cert-file %s --key-file %s --trusted-ca-file %s --client-cert-auth\n", certFile, keyFile, filepath.Join(abs, "ca.pem"))
				return nil
			}
			fmt.Fprintf(a.out, "made %s and %s for %s\n\nOn that member, in its config (or LAZY_CLUSTER__TLS_CERT, _KEY, _CA):\n", certFile, keyFile, strings.Join(hosts, ", "))
			fmt.Fprintf(a.out, "[cluster]\ntls_cert = %q\ntls_key = %q\ntls_ca = %q\n", certFile, keyFile, filepath.Join(abs, "ca.pem"))
			return nil
		},
	}
	cert.Flags().StringVar(&dir, "dir", "", "where the cluster CA is (or is made) and the member's files go (default $LAZY_HOME/cluster-certs; never inside a git repository)")
	cert.Flags().StringSliceVar(&hosts, "host", nil, "a host name or IP other members reach this member at (repeat for more)")
	c.AddCommand(cert)
	return c
}

// repoAround is the git repository dir is in (or would be in, once made):
// the nearest existing directory up from it with a .git; "" if none.
func repoAround(dir string) string {
	for p := dir; ; p = filepath.Dir(p) {
		if _, err := os.Lstat(filepath.Join(p, ".git")); err == nil {
			return p
		}
		if filepath.Dir(p) == p {
			return ""
		}
	}
}

var certName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// certExpiry is when a member's certificate expires, and in how long
// (the date only: "-" for plaintext links or a member that did not say).
func certExpiry(rfc string) string {
	t, err := time.Parse(time.RFC3339, rfc)
	if err != nil {
		return "-"
	}
	days := int(time.Until(t).Hours() / 24)
	if days < 0 {
		return t.Format("2006-01-02") + " (expired)"
	}
	return fmt.Sprintf("%s (%d days)", t.Format("2006-01-02"), days)
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

// membershipLine says whether the member that answered is in its cluster.
func membershipLine(m api.ClusterMembership) string {
	since := m.Since
	if t, err := time.Parse(time.RFC3339, m.Since); err == nil {
		since = t.Local().Format("2006-01-02 15:04:05 MST")
	}
	if m.In {
		return fmt.Sprintf("this member: in the cluster since %s (member id %s)", since, m.ID)
	}
	return fmt.Sprintf("this member: OUT of the cluster since %s: %s. It hosts no task and refuses their work; it joins again by itself as soon as etcd answers (check that etcd runs and this host reaches it)", since, m.Why)
}
