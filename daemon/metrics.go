package daemon

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"lazy/store"
	"lazy/supervisor"
	"lazy/task"
)

// metrics is a collector read at scrape time from the store and the tree.
type metrics struct {
	st    store.Store
	sup   *supervisor.Supervisor
	usage *usageBook

	calls  *prometheus.Desc
	tokens *prometheus.Desc

	tasks    *prometheus.Desc
	turns    *prometheus.Desc
	restarts *prometheus.Desc
	mailbox  *prometheus.Desc
	actors   *prometheus.Desc
	dropped  *prometheus.Desc
	members  *prometheus.Desc
}

func newMetrics(st store.Store, sup *supervisor.Supervisor, usage *usageBook) prometheus.Gatherer {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(&metrics{st: st, sup: sup, usage: usage,
		calls:    prometheus.NewDesc("lazy_model_calls_total", "Model calls of tasks through the proxy since the daemon started, by role.", []string{"role"}, nil),
		tokens:   prometheus.NewDesc("lazy_model_tokens_total", "Tokens of tasks' model calls as the upstream reported them, since the daemon started, by role and kind.", []string{"role", "kind"}, nil),
		tasks:    prometheus.NewDesc("lazy_tasks", "Tasks by status.", []string{"status"}, nil),
		turns:    prometheus.NewDesc("lazy_turns", "Agent turns by kind and state.", []string{"kind", "state"}, nil),
		restarts: prometheus.NewDesc("lazy_actor_restarts_total", "Actor restarts since the daemon started.", nil, nil),
		mailbox:  prometheus.NewDesc("lazy_actor_mailbox_depth", "Messages waiting in an actor's mailbox.", []string{"actor"}, nil),
		actors:   prometheus.NewDesc("lazy_actors", "Live actors by kind.", []string{"kind"}, nil),
		dropped:  prometheus.NewDesc("lazy_watch_events_dropped_total", "Events lost to slow watchers.", nil, nil),
		members:  prometheus.NewDesc("lazy_cluster_members", "Members of the cluster this daemon sees (itself included; absent for a single daemon).", nil, nil),
	})
	return reg
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.tasks, m.turns, m.restarts, m.mailbox, m.actors, m.dropped, m.calls, m.tokens, m.members} {
		ch <- d
	}
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if m.usage != nil {
		for role, u := range m.usage.roles() {
			ch <- prometheus.MustNewConstMetric(m.calls, prometheus.CounterValue, float64(u.Requests), role)
			for kind, v := range map[string]int64{"input": u.InputTokens, "output": u.OutputTokens, "cache_read": u.CacheReadInputTokens, "cache_creation": u.CacheCreationInputTokens} {
				ch <- prometheus.MustNewConstMetric(m.tokens, prometheus.CounterValue, float64(v), role, kind)
			}
		}
	}
	if ts, err := m.st.ListTasks(ctx); err == nil {
		counts := map[task.Status]int{}
		for _, s := range task.Statuses {
			counts[s] = 0
		}
		turns := map[[2]string]int{}
		for _, t := range ts {
			counts[t.Status]++
			if tus, err := m.st.ListTurns(ctx, t.ID); err == nil {
				for _, tu := range tus {
					turns[[2]string{tu.Kind, tu.Status}]++
				}
			}
		}
		for s, n := range counts {
			ch <- prometheus.MustNewConstMetric(m.tasks, prometheus.GaugeValue, float64(n), string(s))
		}
		for k, n := range turns {
			ch <- prometheus.MustNewConstMetric(m.turns, prometheus.GaugeValue, float64(n), k[0], k[1])
		}
	}
	ch <- prometheus.MustNewConstMetric(m.restarts, prometheus.CounterValue, float64(m.sup.Restarts()))
	ch <- prometheus.MustNewConstMetric(m.dropped, prometheus.CounterValue, float64(m.sup.Dropped.Load()))
	kinds := map[string]int{}
	for _, h := range m.sup.Health() {
		kinds[h.Kind]++
		ch <- prometheus.MustNewConstMetric(m.mailbox, prometheus.GaugeValue, float64(h.Mailbox), h.Name)
	}
	for k, n := range kinds {
		ch <- prometheus.MustNewConstMetric(m.actors, prometheus.GaugeValue, float64(n), k)
	}
	if m.sup.Clustered() {
		ch <- prometheus.MustNewConstMetric(m.members, prometheus.GaugeValue, float64(len(m.sup.Members())))
	}
}
