package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"lazy/api"
	"lazy/client"
	"lazy/grain/etcdtest"
	"lazy/store/pgtest"
)

// BenchmarkClusterTasks: b.N tasks, each made, asked about, commented on and
// unblocked (the scripted agent answers), on one daemon with its SQLite
// store, on one cluster member with PostgreSQL, and on two members. It
// reports per task the wall time and CPU time three ways: the daemons' own
// (daemon-cpu), the daemons with every process they started (git, the
// agents, bwrap: daemon+children-cpu), and all-in, that plus the PostgreSQL
// server (its backends too) and etcd (allin-cpu); and the latency of a
// comment POST (a durable store write through the task's actor, on
// whichever member hosts it) and of a task read. Run:
// go test ./cmd/lazy -run '^$' -bench ClusterTasks -benchtime 100x
func BenchmarkClusterTasks(b *testing.B) {
	for _, mode := range []string{"single", "members=1", "members=2"} {
		b.Run(mode, func(b *testing.B) { benchTasks(b, mode) })
	}
}

func benchTasks(b *testing.B, mode string) {
	var ps []*project
	var services []int // the PostgreSQL and etcd processes (all-in CPU)
	switch mode {
	case "single":
		p := newProject(b, "process")
		p.lazy(0, "daemon", "start")
		ps = []*project{p}
	case "members=1":
		etcd, pg := etcdtest.Start(b), pgtest.Start(b)
		p := newProject(b, "process")
		remote := filepath.Join(artifactDir(b, "remote"), "project.git")
		runGit(b, p.root, "clone", "-q", "--bare", p.root, remote)
		runGit(b, p.root, "remote", "add", "origin", remote)
		p.env = append(p.env, "LAZY_STORAGE__BACKEND=postgres", "LAZY_STORAGE__DSN="+pg.NewDatabase(b), "LAZY_CLUSTER__NAME=lazy-bench",
			"LAZY_CLUSTER__ETCD="+etcd.Endpoint, "LAZY_CLUSTER__ADVERTISE=127.0.0.1:0")
		p.lazy(0, "daemon", "start")
		ps = []*project{p}
		services = []int{etcd.PID(), pg.PID()}
	case "members=2":
		c := newCluster(b)
		ps = []*project{c.a, c.b}
		services = []int{c.etcd.PID(), c.pg.PID()}
	}
	trees := func() (own, withChildren, allIn time.Duration) {
		own = daemonCPU(b, ps)
		var pids []int
		for _, p := range ps {
			pids = append(pids, p.info().PID)
		}
		withChildren = treeCPU(pids...)
		return own, withChildren, withChildren + treeCPU(services...)
	}
	cls := make([]*client.Client, len(ps))
	for i, p := range ps {
		cls[i] = p.rpc()
	}
	ctx := context.Background()
	own0, kids0, all0 := trees()
	b.ResetTimer()
	began := time.Now()
	ids := make([]string, b.N)
	for i := range ids {
		ref := fmt.Sprintf("b%d", i)
		res, err := client.Do(ctx, cls[i%len(cls)], api.CmdTaskNew, api.NewTaskArgs{Code: ref,
			Prompt: fmt.Sprintf("add a file\n@write %s.txt hello %d\\n\n@commit add %s\n@answer done", ref, i, ref)})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = res.Task.ID
	}
	waitAll(b, cls[0], ids, 1)
	var writes, reads []time.Duration
	asks := make([]string, b.N)
	for i, id := range ids {
		cl := cls[(i+1)%len(cls)] // through the other member, where there is one
		file := fmt.Sprintf("b%d.txt", i)
		t0 := time.Now()
		ask, err := client.Do(ctx, cl, api.CmdReviewPostComment, api.ReviewCommentArgs{Task: id,
			PostCommentArgs: api.PostCommentArgs{Body: "why?", File: file, Line: 1, Side: "new", Intent: "ask"}})
		if err != nil {
			b.Fatal(err)
		}
		writes = append(writes, time.Since(t0))
		asks[i] = ask.ID
		t0 = time.Now()
		if _, err := client.Do(ctx, cl, api.CmdReviewPostComment, api.ReviewCommentArgs{Task: id,
			PostCommentArgs: api.PostCommentArgs{Body: "change it", File: file, Line: 1, Side: "new", Intent: "comment"}}); err != nil {
			b.Fatal(err)
		}
		writes = append(writes, time.Since(t0))
		t0 = time.Now()
		if _, err := client.Do(ctx, cl, api.CmdTaskShow, api.TaskRef{Task: id}); err != nil {
			b.Fatal(err)
		}
		reads = append(reads, time.Since(t0))
		if _, err := client.Do(ctx, cl, api.CmdReviewUnblock, api.ReviewUnblockArgs{Task: id, Feedback: "@answer done again"}); err != nil {
			b.Fatal(err)
		}
	}
	waitAll(b, cls[0], ids, 2)
	for i, id := range ids {
		pl, err := client.Do(ctx, cls[0], api.CmdReviewComments, api.TaskRef{Task: id})
		if err != nil || !answered(*pl, asks[i]) {
			b.Fatalf("task %s: the ask is not answered (%v)", id, err)
		}
	}
	wall := time.Since(began)
	b.StopTimer()
	own1, kids1, all1 := trees()
	n := float64(b.N)
	b.ReportMetric(float64(wall.Milliseconds())/n, "ms/task")
	b.ReportMetric(float64((own1-own0).Milliseconds())/n, "daemon-cpu-ms/task")
	b.ReportMetric(float64((kids1-kids0).Milliseconds())/n, "daemon+children-cpu-ms/task")
	b.ReportMetric(float64((all1-all0).Milliseconds())/n, "allin-cpu-ms/task")
	b.ReportMetric(ms(pct(writes, 50)), "post-p50-ms")
	b.ReportMetric(ms(pct(writes, 95)), "post-p95-ms")
	b.ReportMetric(ms(pct(reads, 50)), "read-p50-ms")
	b.ReportMetric(ms(pct(reads, 95)), "read-p95-ms")
	b.ReportMetric(0, "ns/op")
}

// waitAll polls the task list (one store read) until every task of ids is
// blocked after work turns work turns; an ask runs before a queued
// unblock, so a task blocked after its unblock turn has its answer too.
func waitAll(b *testing.B, cl *client.Client, ids []string, work int) {
	b.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	deadline := time.Now().Add(time.Duration(len(ids))*2*time.Second + time.Minute)
	for {
		ts, err := client.Do(context.Background(), cl, api.CmdTaskList, api.None{})
		if err != nil {
			b.Fatal(err)
		}
		ready := 0
		for _, t := range ts {
			if !want[t.ID] {
				continue
			}
			if t.Status == "failed" {
				b.Fatalf("task %s failed: %s", t.Ref, t.FailReason)
			}
			if t.Status == "blocked" && t.Turns == work {
				ready++
			}
		}
		if ready == len(ids) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d tasks ready after the deadline", ready, len(ids))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// daemonCPU is the CPU time the projects' daemon processes have used (their
// own, not their agents').
func daemonCPU(b *testing.B, ps []*project) time.Duration {
	b.Helper()
	var total time.Duration
	for _, p := range ps {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.info().PID))
		if err != nil {
			b.Fatal(err)
		}
		// the fields after the command name, which is in parentheses
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ = 100
	}
	return total
}

// treeCPU is the CPU time of the processes pids and every process below
// them: each one's own user and system time and that of its children it
// has waited for (a git that ended is counted in the daemon's). A process
// that left the tree (reparented to init) is not counted.
func treeCPU(pids ...int) time.Duration {
	type proc struct{ ppid, ticks int64 }
	procs := map[int64]proc{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.ParseInt(d.Name(), 10, 64)
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue // ended meanwhile
		}
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
		if len(f) < 15 {
			continue
		}
		ppid, _ := strconv.ParseInt(f[1], 10, 64)
		var ticks int64
		for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
			v, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += v
		}
		procs[pid] = proc{ppid, ticks}
	}
	in := map[int64]bool{}
	for _, p := range pids {
		in[int64(p)] = true
	}
	var under func(pid int64, depth int) bool
	under = func(pid int64, depth int) bool {
		if in[pid] {
			return true
		}
		p, ok := procs[pid]
		if !ok || p.ppid <= 1 || depth > 64 {
			return false
		}
		return under(p.ppid, depth+1)
	}
	var total int64
	for pid, p := range procs {
		if under(pid, 0) {
			total += p.ticks
		}
	}
	return time.Duration(total) * 10 * time.Millisecond // USER_HZ = 100
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*p/100]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
