package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"lazy/api"
	"lazy/client"
	"lazy/grain/etcdtest"
	"lazy/store/pgtest"
)

// gitLog puts a git on the daemon's PATH that appends its arguments to a
// log, one line per process, then runs the real git. Only processes with
// LAZY_GITCOUNT_LOG in their environment log: the daemon's (an agent's
// environment never carries it, so the agent's own commits are not
// counted, nor are git's children, which git finds in its exec path).
func gitLog(b *testing.B, p *project) string {
	b.Helper()
	real, err := exec.LookPath("git")
	if err != nil {
		b.Skip("no git")
	}
	dir := b.TempDir()
	log := filepath.Join(dir, "git.log")
	// one record per process, ended by RS (0x1e), its arguments separated
	// by US (0x1f): an argument may hold spaces (core.sshCommand) or lines
	// (a commit message); one write per record
	script := "#!/bin/sh\nif [ -n \"$LAZY_GITCOUNT_LOG\" ]; then rec=$(printf '%s\\037' \"$@\"); printf '%s\\036' \"$rec\" >> \"$LAZY_GITCOUNT_LOG\"; fi\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "git"), []byte(script), 0o755); err != nil {
		b.Fatal(err)
	}
	env := []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH"), "LAZY_GITCOUNT_LOG=" + log}
	for _, kv := range p.env {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	p.env = env
	return log
}

// gitCalls reads the log: one entry per git process, its subcommand and
// the arguments after it (the daemon's -c settings left out).
func gitCalls(b *testing.B, log string) []string {
	b.Helper()
	f, err := os.Open(log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var calls []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.IndexByte(data, 0x1e); i >= 0 {
			return i + 1, data[:i], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	for sc.Scan() {
		f := strings.FieldsFunc(sc.Text(), func(r rune) bool { return r == 0x1f })
		for len(f) >= 2 && f[0] == "-c" {
			f = f[2:]
		}
		calls = append(calls, strings.Join(f, " "))
	}
	return calls
}

// BenchmarkGitPerTask counts the git processes the daemon runs over a
// task's whole life: made (its first work turn writes and commits a file)
// → blocked, an ask answered, an unblock → blocked, accepted. Tasks run
// one after another (each accept moves the parent the next one starts
// from). It reports git processes per task beside the targets (≤ 12 on a
// single daemon, ≤ 24 on a cluster member) and logs the subcommands that
// ran most. The count is of the daemon's own processes: a git on PATH logs
// each (see gitLog). members=2 is two cluster members of one project (one
// PostgreSQL, one etcd, one bare remote), the tasks' lives sent through
// either member in turn, counted on both (target ≤ 24, as one member's).
// Run:
//
//	go test ./cmd/lazy -run '^$' -bench GitPerTask -benchtime 10x
func BenchmarkGitPerTask(b *testing.B) {
	for _, mode := range []string{"single", "member", "members=2"} {
		b.Run(mode, func(b *testing.B) { benchGitPerTask(b, mode) })
	}
}

func benchGitPerTask(b *testing.B, mode string) {
	if mode == "members=2" {
		benchGitTwoMembers(b)
		return
	}
	p := newProject(b, "process")
	log := gitLog(b, p)
	target := 12.0
	if mode == "member" {
		target = 24
		etcd, pg := etcdtest.Start(b), pgtest.Start(b)
		remote := filepath.Join(artifactDir(b, "remote"), "project.git")
		runGit(b, p.root, "clone", "-q", "--bare", p.root, remote)
		runGit(b, p.root, "remote", "add", "origin", remote)
		p.env = append(p.env, "LAZY_STORAGE__BACKEND=postgres", "LAZY_STORAGE__DSN="+pg.NewDatabase(b), "LAZY_CLUSTER__NAME=lazy-gitcount",
			"LAZY_CLUSTER__ETCD="+etcd.Endpoint, "LAZY_CLUSTER__ADVERTISE=127.0.0.1:0")
	}
	p.lazy(0, "daemon", "start")
	cl := p.rpc()
	ctx := context.Background()
	// the daemon's start and its first look at the project are not a task's
	lifeOf(b, ctx, cl, "warm")
	before := len(gitCalls(b, log))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		lifeOf(b, ctx, cl, fmt.Sprintf("g%d", i))
	}
	b.StopTimer()
	reportGit(b, mode, gitCalls(b, log)[before:], target)
}

// benchGitTwoMembers counts the git processes of two members over the
// tasks' lives, each life sent through the members in turn.
func benchGitTwoMembers(b *testing.B) {
	var logs []string
	c := newClusterOf(b, "process", func(p *project) {
		if os.Getenv("NOWRAP") == "" {
			logs = append(logs, gitLog(b, p))
		}
	})
	cls := []*client.Client{c.a.rpc(), c.b.rpc()}
	ctx := context.Background()
	lifeOf(b, ctx, cls[0], "warm0")
	lifeOf(b, ctx, cls[1], "warm1")
	before := make([]int, len(logs))
	for i, l := range logs {
		before[i] = len(gitCalls(b, l))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		lifeOf(b, ctx, cls[i%2], fmt.Sprintf("g%d", i))
	}
	b.StopTimer()
	var calls []string
	for i, l := range logs {
		mine := gitCalls(b, l)[before[i]:]
		b.Logf("member %c: %.1f git processes per task", 'a'+i, float64(len(mine))/float64(b.N))
		calls = append(calls, mine...)
	}
	reportGit(b, "members=2", calls, 24)
}

// reportGit reports the git processes per task of calls (b.N lives).
func reportGit(b *testing.B, mode string, calls []string, target float64) {
	per := float64(len(calls)) / float64(b.N)
	b.ReportMetric(per, "git/task")
	b.ReportMetric(target, "target-git/task")
	b.ReportMetric(0, "ns/op")
	count := map[string]int{}
	for _, c := range calls {
		f := strings.Fields(c)
		k := strings.Join(f[:min(2, len(f))], " ")
		count[k]++
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return count[keys[i]] > count[keys[j]] })
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "\n%6.1f  git %s", float64(count[k])/float64(b.N), k)
	}
	b.Logf("%s: %.1f git processes per task (target ≤ %.0f), by subcommand:%s", mode, per, target, sb.String())
	if os.Getenv("LAZY_GITCOUNT_ARGV") != "" {
		b.Logf("every call:\n%s", strings.Join(calls, "\n"))
	}
}

// lifeOf takes one task through its life: made, blocked, an ask
// answered, unblocked, blocked again, accepted.
func lifeOf(b testing.TB, ctx context.Context, cl *client.Client, code string) {
	b.Helper()
	res, err := client.Do(ctx, cl, api.CmdTaskNew, api.NewTaskArgs{Code: code,
		Prompt: fmt.Sprintf("add a file\n@write %s.txt hello\\n\n@commit add %s\n@answer done", code, code)})
	if err != nil {
		b.Fatal(err)
	}
	id := res.Task.ID
	waitTask(b, ctx, cl, id, 1)
	// the ask runs before the queued unblock's turn: blocked after turn 2,
	// it is answered (polling reads the task list, which runs no git). On
	// two members the one posted through may not host the task: it must
	// see the turn's commit all the same (TestClusterAskRightAfterATurn)
	ask, err := client.Do(ctx, cl, api.CmdReviewPostComment, api.ReviewCommentArgs{Task: id,
		PostCommentArgs: api.PostCommentArgs{Body: "why?", File: code + ".txt", Line: 1, Side: "new", Intent: "ask"}})
	if err != nil {
		b.Fatalf("task %s: an ask on the turn's line right after the turn ended: %v", code, err)
	}
	if _, err := client.Do(ctx, cl, api.CmdReviewUnblock, api.ReviewUnblockArgs{Task: id, Feedback: "@answer done again"}); err != nil {
		b.Fatal(err)
	}
	waitTask(b, ctx, cl, id, 2)
	pl, err := client.Do(ctx, cl, api.CmdReviewComments, api.TaskRef{Task: id})
	if err != nil || !answered(*pl, ask.ID) {
		b.Fatalf("task %s: the ask is not answered (%v)", code, err)
	}
	if _, err := client.Do(ctx, cl, api.CmdReviewAccept, api.ReviewAcceptArgs{Task: id, AcceptArgs: api.AcceptArgs{Reason: "bench"}}); err != nil {
		b.Fatalf("accept %s: %v", code, err)
	}
}

// waitTask polls one task until it is blocked after turns work turns.
func waitTask(b testing.TB, ctx context.Context, cl *client.Client, id string, turns int) {
	b.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		ts, err := client.Do(ctx, cl, api.CmdTaskList, api.None{})
		if err != nil {
			b.Fatal(err)
		}
		var t api.TaskInfo
		for _, x := range ts {
			if x.ID == id {
				t = x
			}
		}
		if t.Status == "failed" {
			b.Fatalf("task %s failed: %s", t.Ref, t.FailReason)
		}
		if t.Status == "blocked" && t.Turns == turns {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("task %s: %s after %d turns, want blocked after %d", t.Ref, t.Status, t.Turns, turns)
		}
	}
}
