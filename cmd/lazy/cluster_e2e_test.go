package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"

	"lazy/api"
	"lazy/client"
	"lazy/gitx/gitxtest"
	"lazy/grain"
	"lazy/grain/etcdtest"
	"lazy/review"
	"lazy/store/pgtest"
	"lazy/supervisor"
)

// cluster is two members of one project: separate homes, state dirs and
// clones of one bare remote, one PostgreSQL database, one etcd.
type cluster struct {
	a, b   *project
	remote string
	dsn    string
	pg     *pgtest.Server // the store's server (chaos: stopped and restarted)
	etcd   *etcdtest.Server
	env    []string // what makes a daemon a member of this cluster
}

func newCluster(t testing.TB) *cluster { return newClusterOf(t, "process", nil) }

// newClusterOf is a cluster whose members run agents with runner, each
// project passed to setup (when given) before its daemon starts.
func newClusterOf(t testing.TB, runner string, setup func(*project)) *cluster {
	t.Helper()
	return newClusterWith(t, runner, etcdtest.Start(t), setup)
}

// newClusterWith is newClusterOf over the given etcd.
func newClusterWith(t testing.TB, runner string, etcd *etcdtest.Server, setup func(*project)) *cluster {
	t.Helper()
	pg := pgtest.Start(t)
	dsn := pg.NewDatabase(t)
	a := newProject(t, runner)
	remote := filepath.Join(artifactDir(t, "remote"), "project.git")
	gitxtest.Git(t, a.root, "clone", "-q", "--bare", a.root, remote)
	gitxtest.Git(t, a.root, "remote", "add", "origin", remote)
	gitxtest.Git(t, a.root, "fetch", "-q", "origin")
	c := &cluster{a: a, remote: remote, dsn: dsn, pg: pg, etcd: etcd, env: []string{"LAZY_STORAGE__BACKEND=postgres", "LAZY_STORAGE__DSN=" + dsn, "LAZY_CLUSTER__NAME=lazy-e2e",
		"LAZY_CLUSTER__ETCD=" + etcd.Endpoint, "LAZY_CLUSTER__ADVERTISE=127.0.0.1:0", "LAZY_CLUSTER__REMOTE=origin"}}
	c.b = c.clone(t, runner, "b")
	for _, p := range []*project{a, c.b} {
		p.env = append(p.env, c.env...)
		if setup != nil {
			setup(p)
		}
		p.lazy(0, "daemon", "start")
	}
	b := c.b
	started := time.Now()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if st := c.status(a); len(st.Members) == 2 {
			if st := c.status(b); len(st.Members) == 2 {
				t.Logf("figure: both members see each other %v after the second daemon start returned", time.Since(started).Round(time.Millisecond))
				return c
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the members do not see each other:\n%s", a.lazy(0, "cluster", "status"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// clone is a new project for a member: its own clone of the remote, home
// and state dir (its daemon not started, its env not yet the cluster's).
func (c *cluster) clone(t testing.TB, runner, name string) *project {
	t.Helper()
	root := filepath.Join(artifactDir(t, "root"), name)
	gitxtest.Git(t, c.a.root, "clone", "-q", c.remote, root)
	gitxtest.Git(t, root, "config", "user.email", name+"@example.com")
	gitxtest.Git(t, root, "config", "user.name", "member "+name)
	return newProjectIn(t, runner, root)
}

func (c *cluster) status(p *project) api.ClusterStatus {
	p.t.Helper()
	var st api.ClusterStatus
	if err := json.Unmarshal([]byte(p.lazy(0, "cluster", "status", "--json")), &st); err != nil {
		p.t.Fatal(err)
	}
	return st
}

// address is the cluster address member p advertises now.
func (c *cluster) address(p *project) string {
	p.t.Helper()
	for _, m := range c.status(p).Members {
		if m.Self {
			return m.Address
		}
	}
	p.t.Fatalf("the member lists no member as itself:\n%s", p.lazy(0, "cluster", "status"))
	return ""
}

// advertiseAt has member p advertise a free port of its own from its next
// start, so where the cluster places a task on it is known before it joins.
func (c *cluster) advertiseAt(t testing.TB, p *project) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p.env = append(p.env, "LAZY_CLUSTER__ADVERTISE="+addr)
	return addr
}

// placedOn is the address, of the members at addrs, that the cluster places
// task id on: protoactor's rendezvous hashing of the task's identity with
// each member's address (disthash), the lookup every member runs.
func placedOn(addrs []string, id string) string {
	var ms pcluster.Members
	for i, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		n, _ := strconv.Atoi(port)
		ms = append(ms, &pcluster.Member{Id: strconv.Itoa(i), Host: host, Port: int32(n), Kinds: []string{grain.Kind}})
	}
	r := pcluster.NewRendezvous()
	r.UpdateMembers(ms)
	return r.GetByIdentity(grain.Kind + "/" + id)
}

// hosts maps each task a member hosts now to the member's name.
func (c *cluster) hosts() map[string]string {
	out := map[string]string{}
	for name, p := range map[string]*project{"a": c.a, "b": c.b} {
		for _, m := range c.status(p).Members {
			if m.Self {
				for _, id := range m.Tasks {
					out[id] = name
				}
			}
		}
	}
	return out
}

// hostOf is the member that hosts task id now, and the other one.
func (c *cluster) hostOf(id string) (host, other *project) {
	if c.hosts()[id] == "b" {
		return c.b, c.a
	}
	return c.a, c.b
}

// TestClusterTwoMembers: tasks created through member a are hosted by
// either member; each one's agent turns run on its host, in that member's
// own worktree; member b's RPC, CLI and dashboard ask, comment, unblock and
// accept every one of them; b's watcher sees the events of tasks a hosts;
// the accepted work reaches the shared git remote. The links between the
// members, and to etcd, are mutual TLS, with certificates `lazy cluster
// cert` made.
func TestClusterTwoMembers(t *testing.T) {
	certs := t.TempDir()
	if _, err := supervisor.MakeCA(certs); err != nil {
		t.Fatal(err)
	}
	etcdCert, etcdKey, err := supervisor.MakeMemberCert(certs, "etcd", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	probe, err := supervisor.LoadLinkTLS(etcdCert, etcdKey, filepath.Join(certs, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	etcd := etcdtest.StartTLS(t, &etcdtest.TLS{Cert: etcdCert, Key: etcdKey, CA: filepath.Join(certs, "ca.pem"), Client: probe.Client})
	n := 0
	c := newClusterWith(t, "process", etcd, func(p *project) {
		n++
		name := fmt.Sprintf("m%d", n)
		out := p.lazy(0, "cluster", "cert", name, "--host", "127.0.0.1", "--dir", certs)
		if !strings.Contains(out, "tls_cert = ") {
			t.Fatalf("lazy cluster cert:\n%s", out)
		}
		p.env = append(p.env, "LAZY_CLUSTER__TLS_CERT="+filepath.Join(certs, name+".pem"),
			"LAZY_CLUSTER__TLS_KEY="+filepath.Join(certs, name+"-key.pem"), "LAZY_CLUSTER__TLS_CA="+filepath.Join(certs, "ca.pem"))
	})
	a, b := c.a, c.b
	if out := a.lazy(0, "cluster", "status"); !strings.Contains(out, "2 members, links: mutual TLS") || !strings.Contains(out, "store: ok") || !strings.Contains(out, "etcd "+etcd.Endpoint+": ok") {
		t.Fatalf("cluster status:\n%s", out)
	} else if expires := time.Now().AddDate(2, 0, 0).UTC().Format("2006-01-02"); !strings.Contains(out, "CERT EXPIRES") || strings.Count(out, expires) != 2 {
		t.Errorf("cluster status shows no certificate expiry of %s for both members:\n%s", expires, out)
	}
	for _, m := range c.status(a).Members {
		if m.CertExpires == "" {
			t.Errorf("member %s: no cert_expires", m.Address)
		}
	}
	for _, p := range []*project{a, b} {
		if m := p.page("/metrics"); !strings.Contains(m, "lazy_cluster_members 2") {
			t.Errorf("/metrics of a member lacks lazy_cluster_members 2")
		}
	}

	// tasks until both members host one (placement is by the id's hash)
	var refs []string
	var hosts map[string]string
	began := time.Now()
	for i := 0; i < 10; i++ {
		ref := fmt.Sprintf("t%d", i)
		// each task its own file: equal commits made in the same second would be one commit
		a.lazy(0, "task", "new", "--code", ref, "-m", fmt.Sprintf("add a file\n@write %s.txt hello\\n\n@commit add %s\n@answer done", ref, ref))
		a.waitStatus(ref, "blocked")
		refs = append(refs, ref)
		hosts = c.hosts()
		seen := map[string]bool{}
		for _, h := range hosts {
			seen[h] = true
		}
		if len(refs) >= 2 && seen["a"] && seen["b"] {
			break
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lines := b.watch(ctx)

	for _, ref := range refs {
		ti := b.show(ref) // b reads the shared store
		host := hosts[ti.ID]
		if host == "" {
			t.Fatalf("task %s (%s) is hosted by no member: %v\n%s\n%s", ref, ti.ID, hosts, a.lazy(0, "cluster", "status", "--json"), a.lazy(0, "actors"))
		}
		hp := map[string]*project{"a": a, "b": b}[host]
		// the agent ran on the host, in its own worktree of the task
		file := ref + ".txt"
		if _, err := os.Stat(filepath.Join(hp.paths.Worktrees, ref, file)); err != nil {
			t.Errorf("task %s hosted by %s: no %s in that member's worktree: %v", ref, host, file, err)
		}
		// b's RPC sees the diff a task's host made
		var diff api.DiffResult
		if err := b.rpc().Call(ctx, "reviewDiff", map[string]string{"task": ref}, &diff); err != nil || len(diff.Files) != 1 || diff.Files[0].NewPath != file {
			t.Fatalf("reviewDiff of %s through b: %+v %v", ref, diff.Files, err)
		}
		if page := b.page("/review/" + ti.ID); !strings.Contains(page, file) {
			t.Errorf("b's review page of %s lacks the change", ref)
		}
		ask := b.post(ref, api.PostCommentArgs{Body: "why hello?", File: file, Line: 1, Side: "new", Intent: "ask"})
		cm := b.post(ref, api.PostCommentArgs{Body: "say hi", File: file, Line: 1, Side: "new", Intent: "comment"})
		b.waitThreads(ref, "the ask answered", func(pl review.Payload) bool { return answered(pl, ask.ID) })
		b.lazy(0, "unblock", ref, "-m", fmt.Sprintf("@write %s hi\\n\n@commit say hi in %s\n@answer done", file, ref))
		// the unblock answers once its turn is queued: the task may still
		// read blocked until the turn starts, so wait for the delivery
		// first, then for the turn's end
		b.waitThreads(ref, "the comment delivered", func(pl review.Payload) bool { return delivery(pl, cm.ID) == review.Delivered })
		b.waitStatus(ref, "blocked")
		// the tasks before it moved main: sync with it (on the host), then accept
		b.lazy(0, "sync", ref)
		b.lazy(0, "accept", ref, "--reason", "fine")
		if st := a.show(ref).Status; st != "accepted" {
			t.Fatalf("%s after an accept through b: %s", ref, st)
		}
	}
	// the accepted work is on the shared remote's main
	log := gitxtest.Git(t, a.root, "--git-dir", c.remote, "log", "--oneline", "main")
	if n := strings.Count(log, "say hi in"); n != len(refs) {
		t.Errorf("the remote's main has %d of the %d accepted tasks:\n%s", n, len(refs), log)
	}
	t.Logf("figure: %d tasks made through a, each asked, commented, unblocked, synced and accepted through b: %v", len(refs), time.Since(began).Round(time.Millisecond))
	got := strings.Join(collect(lines, time.Second), "\n")
	for _, ref := range refs {
		if !strings.Contains(got, ref+" status blocked") && !strings.Contains(got, ref+" status accepted") {
			t.Errorf("b's watch missed the events of %s:\n%s", ref, got)
		}
	}
	// the leak hunt over both members: their files, and every row of the
	// shared store, the agent homes that travel there unpacked
	files, hits := fileLeaks(t, []*project{a, b}, a.real, b.real)
	rows := pgLeaks(t, c.dsn, a.real, b.real)
	t.Logf("leak hunt over two members: %d files and %d store rows, %d hits", files, rows, hits)
}

// TestClusterFailover: kill -9 of the member hosting a task while an ask
// runs there and a comment, a second ask, another comment and an unblock
// wait behind it. The task is placed anew on the member left; each ask is
// answered once, both comments reach the agent once, in the one work turn
// of the unblock, and the task ends blocked.
func TestClusterFailover(t *testing.T) {
	c := newCluster(t)
	a, b := c.a, c.b
	var ref, id string
	for i := 0; i < 40 && ref == ""; i++ {
		r := fmt.Sprintf("f%d", i)
		b.lazy(0, "task", "new", "--code", r, "-m", fmt.Sprintf("add a file\n@write %s.txt hello\\n\n@commit add %s\n@answer done", r, r))
		ti := b.waitStatus(r, "blocked")
		if c.hosts()[ti.ID] == "a" {
			ref, id = r, ti.ID
		}
	}
	if ref == "" {
		t.Fatal("none of 40 tasks was placed on member a")
	}
	file := ref + ".txt"
	ask1 := b.post(ref, api.PostCommentArgs{Body: "@sleep 6s\nwhy hello?", File: file, Line: 1, Side: "new", Intent: "ask"})
	waitTurn(t, b, ref, func(tu api.Turn) bool { return tu.Kind == "ask" && tu.Status == "running" })
	c1 := b.post(ref, api.PostCommentArgs{Body: "first change", File: file, Line: 1, Side: "new", Intent: "comment"})
	ask2 := b.post(ref, api.PostCommentArgs{Body: "and this line?", File: file, Line: 1, Side: "new", Intent: "ask"})
	c2 := b.post(ref, api.PostCommentArgs{Body: "second change", File: file, Line: 1, Side: "new", Intent: "comment"})
	b.lazy(0, "unblock", ref, "-m", fmt.Sprintf("@write %s hi\\n\n@commit say hi in %s\n@answer done", file, ref))

	if err := syscall.Kill(a.info().PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	b.waitThreads(ref, "the first ask answered after the kill", func(pl review.Payload) bool { return answered(pl, ask1.ID) })
	t.Logf("figure: kill -9 of the host to its running ask answered on the survivor: %v (the ask's agent sleeps 6 s)", time.Since(killed).Round(time.Millisecond))
	pl := b.waitThreads(ref, "both asks answered and both comments delivered after the kill", func(pl review.Payload) bool {
		return answered(pl, ask1.ID) && answered(pl, ask2.ID) && delivery(pl, c1.ID) == review.Delivered && delivery(pl, c2.ID) == review.Delivered
	})
	b.waitStatus(ref, "blocked")
	t.Logf("figure: kill -9 of the host to the task blocked again on the survivor, both asks answered and the unblock turn done: %v", time.Since(killed).Round(time.Millisecond))
	onB := false
	for _, m := range c.status(b).Members {
		onB = onB || (m.Self && slices.Contains(m.Tasks, id))
	}
	if !onB {
		t.Errorf("after the kill the task is not hosted by b: %+v", c.status(b).Members)
	}
	// each ask answered once; both comments in one work turn
	replies := map[string]int{}
	var turnOf []int
	for _, th := range pl.Threads {
		for _, m := range th.Messages {
			if m.Actor == review.Agent {
				replies[th.ID]++
			}
			if m.ID == c1.ID || m.ID == c2.ID {
				turnOf = append(turnOf, m.DeliveredTurn)
			}
		}
	}
	if replies[ask1.ThreadID] != 1 || replies[ask2.ThreadID] != 1 {
		t.Errorf("answers per ask: %v (want one each)", replies)
	}
	if len(turnOf) != 2 || turnOf[0] != turnOf[1] || turnOf[0] == 0 {
		t.Errorf("the comments were delivered with turns %v, want one work turn for both", turnOf)
	}
	var d api.TaskDetail
	if err := b.rpc().Call(context.Background(), "taskShow", map[string]string{"task": ref}, &d); err != nil {
		t.Fatal(err)
	}
	work, interrupted := 0, 0
	for _, tu := range d.Turns {
		if tu.Kind == "work" && tu.Trigger == "unblock" {
			work++
		}
		if tu.Status == "interrupted" {
			interrupted++
		}
	}
	if work != 1 || interrupted != 1 {
		t.Errorf("turns after the kill: %d unblock work turns (want 1), %d interrupted (want 1, the ask cut off)", work, interrupted)
	}
	if n := len(c.status(b).Members); n != 1 {
		t.Errorf("b still sees %d members", n)
	}
}

// waitTurn waits until one of the task's turns satisfies cond.
func waitTurn(t *testing.T, p *project, ref string, cond func(api.Turn) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var d api.TaskDetail
		if err := p.rpc().Call(context.Background(), "taskShow", map[string]string{"task": ref}, &d); err != nil {
			t.Fatal(err)
		}
		for _, tu := range d.Turns {
			if cond(tu) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no turn of %s as awaited: %+v", ref, d.Turns)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClusterClaudeResume: the real claude CLI's session travels with its
// task. The first turn runs on the task's host; that member stops; an
// unblock through the other member runs the next turn there, in its own
// worktree, and the model sees the first turn's conversation: the agent
// home came from the shared store and its sessions were re-keyed.
func TestClusterClaudeResume(t *testing.T) {
	claude := claudePath(t)
	c := newClusterOf(t, "", func(p *project) { p.useClaude(t, claude, "api_key") })
	c.a.lazy(0, "task", "new", "--code", "cr", "-m", "remember the word PINEAPPLE")
	ti := c.a.waitStatus("cr", "blocked")
	from, to := c.hostOf(ti.ID)
	if n := len(from.stub.Requests()); n == 0 {
		t.Fatal("the first turn made no model call on its host")
	}
	from.lazy(0, "daemon", "stop")
	for deadline := time.Now().Add(60 * time.Second); len(c.status(to).Members) != 1; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the stopped member is still in the cluster:\n%s", to.lazy(0, "cluster", "status"))
		}
	}
	to.stub.Reset()
	to.lazy(0, "unblock", "cr", "-m", "What word did I ask you to remember?")
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if got := to.show("cr"); got.Status == "blocked" && got.Turns == 2 {
			break
		} else if got.Status == "failed" || time.Now().After(deadline) {
			t.Fatalf("the second turn on the other member: %s %q after %d turns", got.Status, got.FailReason, got.Turns)
		}
	}
	resumed := false
	for _, r := range to.stub.Requests() {
		if r.Path == "/v1/messages" && strings.Contains(string(r.Body), "PINEAPPLE") && strings.Contains(string(r.Body), "What word did I ask you") {
			resumed = true
		}
	}
	if !resumed {
		t.Fatalf("the turn on the other member did not carry the first turn's conversation (%d model calls there): the session did not travel", len(to.stub.Requests()))
	}
	// claude keys sessions by the directory it runs in: this member's worktree
	key := strings.Map(func(r rune) rune {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, filepath.Join(to.paths.Worktrees, "cr"))
	if s, _ := filepath.Glob(filepath.Join(to.paths.Agents, "cr", "home", ".claude", "projects", key, "*.jsonl")); len(s) == 0 {
		t.Errorf("no session of this member's worktree (%s) in its agent home", key)
	}
	if out := to.lazy(0, "task", "show", "cr"); !strings.Contains(out, "stub answer to: What word") {
		t.Errorf("task show on the other member:\n%s", out)
	}
}

// TestClusterChaosKill9 is the chaos suite across members: LAZY_CHAOS_KILLS
// times (50 unless set; 5 with -short) a comment, an ask, an unblock, an
// accept or a sync goes through a random member while one member, most
// often the task's host, is killed with SIGKILL at a random moment. The
// dead member restarts and rejoins, the cluster settles, and the single
// daemon's checks hold over both: no acknowledged comment lost, no comment
// in two completed work turns (on whichever member they ran), every ask
// answered, nothing in an impossible state, accepted work on the remote's
// main.
func TestClusterChaosKill9(t *testing.T) {
	kills, rng := chaosSetup(t)
	c := newCluster(t)
	members := []*project{c.a, c.b}
	// the parent moves on the remote, as another member's accept or a push would move it
	mover := filepath.Join(t.TempDir(), "mover")
	gitxtest.Git(t, c.a.root, "clone", "-q", c.remote, mover)
	acked := map[string]review.ReviewComment{}
	taskN := 0
	newTask := func() string {
		taskN++
		code := fmt.Sprintf("c%d", taskN)
		members[rng.Intn(2)].lazy(0, "task", "new", "--code", code, "-m", fmt.Sprintf("@write f%d.txt a\\nb\\nc\\n\n@commit c%d", taskN, taskN))
		c.a.waitStatus(code, "blocked")
		return code
	}
	pool := []string{newTask(), newTask(), newTask()}
	ops := []string{"comment", "ask", "unblock", "accept", "sync"}
	counts := map[string]int{}
	hostKills := 0
	for k := 0; k < kills; k++ {
		kind := ops[rng.Intn(len(ops))]
		counts[kind]++
		var ref, id string
		for _, r := range pool {
			if ti := c.a.show(r); ti.Status == "blocked" || ti.Status == "conflict" {
				ref, id = r, ti.ID
				break
			}
		}
		if ref == "" {
			ref = newTask()
			pool = append(pool, ref)
			id = c.a.show(ref).ID
		}
		via := members[rng.Intn(2)]
		if kind == "sync" {
			gitxtest.Commit(t, mover, "parent moves", map[string]string{"parent.txt": fmt.Sprintf("M%d\n", k)})
			gitxtest.Git(t, mover, "push", "-q", "origin", "HEAD:main")
		}
		op := drawChaosOp(rng, kind, k, filepathOf(ref))
		cl := via.rpc()
		done := make(chan struct{})
		go func() {
			defer close(done)
			op.run(cl, id, acked)
		}()
		time.Sleep(time.Duration(rng.Intn(400)) * time.Millisecond)
		// the op has reached the task by now, mostly: its host is the
		// victim three times in four
		victim := members[rng.Intn(2)]
		if host := map[string]*project{"a": c.a, "b": c.b}[c.hosts()[id]]; host != nil && rng.Intn(4) > 0 {
			victim = host
			hostKills++
		}
		killAndRestart(t, victim, victim.info().PID, done)
		for deadline := time.Now().Add(60 * time.Second); len(c.status(c.a).Members) != 2 || len(c.status(c.b).Members) != 2; time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after kill %d the members do not see each other:\n%s", k, c.a.lazy(0, "cluster", "status"))
			}
		}
		c.a.settle(t)
		checkInvariants(t, k, kind, acked, members, func(ti api.TaskInfo) bool {
			head := strings.TrimSpace(runGit(t, c.remote, "rev-parse", "refs/heads/"+ti.Branch))
			return runGitOK(c.remote, "merge-base", "--is-ancestor", head, "refs/heads/main") == nil
		})
	}
	t.Logf("cluster chaos: %d kills (%v), %d of the task's host, %d acknowledged comments, all invariants held", kills, counts, hostKills, len(acked))
}

// TestClusterCert: `lazy cluster cert` makes the CA once and a member's
// certificate per call, says what to set, and refuses what makes no sense.
func TestClusterCert(t *testing.T) {
	p := newProject(t, "process")
	dir := filepath.Join(t.TempDir(), "certs")
	out := p.lazy(0, "cluster", "cert", "m1", "--host", "10.0.0.5", "--host", "m1.lan", "--dir", dir)
	for _, want := range []string{"made the cluster CA", "m1.pem", "tls_ca = " + fmt.Sprintf("%q", filepath.Join(dir, "ca.pem"))} {
		if !strings.Contains(out, want) {
			t.Errorf("first cert: no %q in\n%s", want, out)
		}
	}
	if out := p.lazy(0, "cluster", "cert", "m2", "--host", "10.0.0.6", "--dir", dir); strings.Contains(out, "made the cluster CA") {
		t.Errorf("the second member made a new CA:\n%s", out)
	}
	if _, errs, code := p.run("cluster", "cert", "m1", "--host", "10.0.0.5", "--dir", dir); code != 1 || !strings.Contains(errs, "exists") {
		t.Errorf("a second m1: exit %d: %s", code, errs)
	}
	if _, errs, code := p.run("cluster", "cert", "m3", "--dir", dir); code != 2 || !strings.Contains(errs, "--host") {
		t.Errorf("no --host: exit %d: %s", code, errs)
	}
	if _, errs, code := p.run("cluster", "cert", "../m4", "--host", "x", "--dir", dir); code != 2 || !strings.Contains(errs, "member name") {
		t.Errorf("a name with a slash: exit %d: %s", code, errs)
	}
	if fi, err := os.Stat(filepath.Join(dir, "m2-key.pem")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the member key: %v %v", fi, err)
	}
	// never inside a repository, where the CA key could be committed
	if _, errs, code := p.run("cluster", "cert", "m5", "--host", "x", "--dir", filepath.Join(p.root, "certs")); code != 2 || !strings.Contains(errs, "inside the git repository") {
		t.Errorf("a --dir in the project: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(p.root, "certs")); !os.IsNotExist(err) {
		t.Error("the refused --dir was made")
	}
	// the default is the lazy home's
	if out := p.lazy(0, "cluster", "cert", "m6", "--host", "10.0.0.7"); !strings.Contains(out, filepath.Join(p.home, "cluster-certs", "m6.pem")) {
		t.Errorf("the default dir:\n%s", out)
	}
}

// TestClusterJoinMidTurn: a third member joins while every task's first
// work turn runs. No turn is cut off: the tasks the cluster moves to the
// new member finish their turn on their old host (its commit reaches the
// remote) and their next turn runs on the new member, on that work.
func TestClusterJoinMidTurn(t *testing.T) {
	// every turn runs at once: 8 agents a member (the default) would queue some
	wide := func(p *project) { p.env = append(p.env, "LAZY_AGENT__MAX_CONCURRENT=64") }
	c := newClusterOf(t, "process", wide)
	d := c.clone(t, "process", "d")
	d.env = append(d.env, c.env...)
	wide(d)
	// the new member's address is known before it joins, so the tasks made
	// are enough for some to move to it: placement hashes each task's id
	// with each member's address, and 9 tasks over 3 members gave the new
	// one none in 2.6% of runs
	over := []string{c.address(c.a), c.address(c.b), c.advertiseAt(t, d)}
	var refs []string
	ids, share := map[string]string{}, 0
	for i := 0; i < 9 || share == 0; i++ {
		if i == 40 {
			t.Fatalf("none of 40 tasks is placed on %s over %v", over[2], over)
		}
		ref := fmt.Sprintf("j%d", i)
		c.a.lazy(0, "task", "new", "--code", ref, "-m", fmt.Sprintf("@sleep 8s\n@write %s.txt first\\n\n@commit first of %s\n@answer done", ref, ref))
		refs = append(refs, ref)
		ids[ref] = c.a.show(ref).ID
		if placedOn(over, ids[ref]) == over[2] {
			share++
		}
	}
	for _, ref := range refs {
		waitTurn(t, c.a, ref, func(tu api.Turn) bool { return tu.Number == 1 && tu.Status == "running" })
	}
	d.lazy(0, "daemon", "start")
	for deadline := time.Now().Add(60 * time.Second); len(c.status(c.a).Members) != 3 || len(c.status(d).Members) != 3; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the third member did not join:\n%s", d.lazy(0, "cluster", "status"))
		}
	}
	for _, ref := range refs {
		c.a.waitStatus(ref, "blocked")
	}
	onD := map[string]bool{}
	for _, ref := range refs {
		// a message through d places the task; a moved task's next turn runs there
		d.lazy(0, "unblock", ref, "-m", fmt.Sprintf("@write %s.txt second\\n\n@commit second of %s\n@answer again", ref, ref))
	}
	for _, m := range c.status(d).Members {
		if m.Self {
			for _, id := range m.Tasks {
				onD[id] = true
			}
		}
	}
	for _, ref := range refs {
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			ti := d.show(ref)
			if ti.Status == "blocked" && ti.Turns == 2 {
				break
			}
			if ti.Status == "failed" || time.Now().After(deadline) {
				t.Fatalf("task %s: %s %q after %d turns", ref, ti.Status, ti.FailReason, ti.Turns)
			}
		}
		dt, err := client.Do(context.Background(), d.rpc(), api.CmdTaskShow, api.TaskRef{Task: ref})
		if err != nil {
			t.Fatal(err)
		}
		for _, tu := range dt.Turns {
			if tu.Status != "done" {
				t.Errorf("task %s turn %d is %s (%s): the join cut it off", ref, tu.Number, tu.Status, tu.Error)
			}
		}
		// both turns' work is on the remote, one after the other
		log := runGit(t, c.remote, "log", "--format=%s", "refs/heads/lazy/"+ref)
		if !strings.Contains(log, "second of "+ref+"\nfirst of "+ref) {
			t.Errorf("task %s on the remote:\n%s", ref, log)
		}
	}
	moved := 0
	for _, ref := range refs {
		if onD[ids[ref]] {
			moved++
		}
		if want := placedOn(over, ids[ref]) == over[2]; onD[ids[ref]] != want {
			t.Errorf("task %s: on the member that joined %v, placed there %v", ref, onD[ids[ref]], want)
		}
	}
	t.Logf("%d of %d tasks moved to the new member mid-turn (its share %d); no turn was cut off", moved, len(refs), share)
	waitWorktreesLeft(t, c, refs, ids, onD)
}

// TestClusterCertRefusedAtStart: a member whose certificate is for another
// host, or from another CA, does not start (it used to start "ready" and
// fail the calls to its tasks 30 s later): `lazy daemon start` exits 1 with
// the sentence that names the file, the cause and the fix, before it opens
// the store or reaches etcd (neither runs here).
func TestClusterCertRefusedAtStart(t *testing.T) {
	p := newProject(t, "process")
	dir, other := filepath.Join(t.TempDir(), "certs"), filepath.Join(t.TempDir(), "other")
	p.lazy(0, "cluster", "cert", "m1", "--host", "10.0.0.9", "--host", "m1.lan", "--dir", dir)
	p.lazy(0, "cluster", "cert", "m2", "--host", "127.0.0.1", "--dir", other)
	base := append(slices.Clone(p.env), "LAZY_STORAGE__BACKEND=postgres", "LAZY_STORAGE__DSN=postgres://nobody@127.0.0.1:1/none",
		"LAZY_CLUSTER__NAME=lazy-e2e", "LAZY_CLUSTER__ETCD=https://127.0.0.1:1", "LAZY_CLUSTER__ADVERTISE=127.0.0.1:26500",
		"LAZY_CLUSTER__TLS_CA="+filepath.Join(dir, "ca.pem"))
	for _, c := range []struct {
		name, cert string
		want       []string
	}{
		{"wrong host", "m1", []string{"cluster.tls_cert " + filepath.Join(dir, "m1.pem") + ": its names are [m1.lan 10.0.0.9] but cluster.advertise is 127.0.0.1:26500: issue a certificate whose SAN includes 127.0.0.1", "docs/SCALE-OUT.md Certificates"}},
		{"another CA", "m2", []string{"cluster.tls_cert " + filepath.Join(other, "m2.pem") + ": it is issued by CN=lazy cluster CA (key ", "not by cluster.tls_ca " + filepath.Join(dir, "ca.pem") + ", which is CN=lazy cluster CA (key "}},
	} {
		certDir := dir
		if c.cert == "m2" {
			certDir = other
		}
		p.env = append(slices.Clone(base), "LAZY_CLUSTER__TLS_CERT="+filepath.Join(certDir, c.cert+".pem"), "LAZY_CLUSTER__TLS_KEY="+filepath.Join(certDir, c.cert+"-key.pem"))
		started := time.Now()
		_, errs, code := p.run("daemon", "start")
		t.Logf("%s: exit %d after %v: %s", c.name, code, time.Since(started).Round(time.Millisecond), strings.TrimSpace(errs))
		if code != 1 {
			t.Errorf("%s: exit %d, want 1", c.name, code)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: no %q in\n%s", c.name, w, errs)
			}
		}
		if time.Since(started) > 20*time.Second {
			t.Errorf("%s: refused after %v: the check waits for nothing", c.name, time.Since(started))
		}
	}
	if out, _, _ := p.run("daemon", "status"); !strings.Contains(out, "daemon: not running") {
		t.Errorf("a daemon runs after the refusals: %s", out)
	}
}
