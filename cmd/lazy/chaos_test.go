package main

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"lazy/api"
	"lazy/client"
	"lazy/review"
	"lazy/scriptagent"
)

// TestChaosKill9 kills the daemon with SIGKILL at random moments of a
// comment, an ask, an unblock, an accept or a sync, LAZY_CHAOS_KILLS times
// (50 unless set), restarts it, lets it settle and checks what must hold:
// no acknowledged comment lost, no comment in two completed work turns, a
// recovery file exactly for each unblock whose launch did not complete, and
// no task, turn or ask in an impossible state.
func TestChaosKill9(t *testing.T) {
	kills, rng := chaosSetup(t)
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	acked := map[string]review.ReviewComment{} // comment id -> as acknowledged
	taskN := 0
	newTask := func() string {
		taskN++
		code := fmt.Sprintf("c%d", taskN)
		p.lazy(0, "task", "new", "--code", code, "-m", fmt.Sprintf("@write f%d.txt a\\nb\\nc\\n\n@commit c%d", taskN, taskN))
		p.waitStatus(code, "blocked")
		return code
	}
	pool := []string{newTask(), newTask(), newTask()}
	ops := []string{"comment", "ask", "unblock", "accept", "sync"}
	counts := map[string]int{}
	for k := 0; k < kills; k++ {
		kind := ops[rng.Intn(len(ops))]
		counts[kind]++
		// a blocked task to work on
		var ref string
		for _, r := range pool {
			if s := p.show(r).Status; s == "blocked" || s == "conflict" {
				ref = r
				break
			}
		}
		if ref == "" {
			ref = newTask()
			pool = append(pool, ref)
		}
		op := drawChaosOp(rng, kind, k, filepathOf(ref))
		if kind == "sync" {
			if err := os.WriteFile(filepath.Join(p.root, "parent.txt"), []byte(fmt.Sprintf("M%d\n", k)), 0o644); err != nil {
				t.Fatal(err)
			}
			runGit(t, p.root, "add", "-A")
			runGit(t, p.root, "-c", "user.name=t", "-c", "user.email=t@l", "commit", "-q", "-m", "parent moves")
		}
		pid, cl := p.info().PID, p.rpc()
		done := make(chan struct{})
		go func() {
			defer close(done)
			op.run(cl, ref, acked)
		}()
		time.Sleep(time.Duration(rng.Intn(400)) * time.Millisecond)
		killAndRestart(t, p, pid, done)
		p.settle(t)
		checkInvariants(t, k, kind, acked, []*project{p}, func(ti api.TaskInfo) bool {
			head := strings.TrimSpace(runGit(t, p.root, "rev-parse", ti.Branch))
			return runGitOK(p.root, "merge-base", "--is-ancestor", head, "main") == nil
		})
	}
	t.Logf("chaos: %d kills (%v), %d acknowledged comments, all invariants held", kills, counts, len(acked))
}

// killAndRestart kills p's daemon (pid) with SIGKILL, waits for the op
// that was running against it (done) and for the process to be gone, and
// starts the daemon again.
func killAndRestart(t *testing.T, p *project, pid int, done <-chan struct{}) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
	<-done
	for syscallAlive(pid) {
		time.Sleep(10 * time.Millisecond)
	}
	p.lazy(0, "daemon", "start")
}

// chaosSetup is how many kills a chaos test makes (LAZY_CHAOS_KILLS, 50
// unless set; 5 with -short) and its random source, whose seed it logs.
func chaosSetup(t *testing.T) (int, *rand.Rand) {
	kills := 50
	if v := os.Getenv("LAZY_CHAOS_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("LAZY_CHAOS_KILLS=%q", v)
		}
		kills = n
	}
	if testing.Short() {
		kills = 5
	}
	seed := time.Now().UnixNano()
	t.Logf("chaos seed %d", seed)
	return kills, rand.New(rand.NewSource(seed))
}

// chaosOp is one operation of a chaos run, drawn whole before it runs: the
// random source stays with the test's goroutine.
type chaosOp struct {
	kind     string
	posts    []api.PostCommentArgs
	feedback string
}

func drawChaosOp(rng *rand.Rand, kind string, k int, file string) chaosOp {
	marker := func() string { return fmt.Sprintf("M%d-%d", k, rng.Intn(1_000_000)) }
	post := func(intent, body string) api.PostCommentArgs {
		return api.PostCommentArgs{Body: body, File: file, Line: 1 + rng.Intn(3), Side: "new", Intent: intent}
	}
	op := chaosOp{kind: kind}
	switch kind {
	case "comment":
		for i := 0; i < 1+rng.Intn(3); i++ {
			op.posts = append(op.posts, post("comment", "comment "+marker()))
		}
	case "ask":
		op.posts = append(op.posts, post("ask", "ask "+marker()+"\n@sleep 200ms\n@answer ok"))
	case "unblock":
		op.posts = append(op.posts, post("comment", "carry "+marker()))
		op.feedback = "go " + marker() + "\n@sleep 150ms"
	}
	return op
}

// run sends the op through cl; what the daemon acknowledged goes to acked.
func (op chaosOp) run(cl *client.Client, task string, acked map[string]review.ReviewComment) {
	ctx := context.Background()
	for _, pc := range op.posts {
		if c, err := client.Do(ctx, cl, api.CmdReviewPostComment, api.ReviewCommentArgs{Task: task, PostCommentArgs: pc}); err == nil {
			acked[c.ID] = *c
		}
	}
	switch op.kind {
	case "unblock":
		_, _ = client.Do(ctx, cl, api.CmdReviewUnblock, api.ReviewUnblockArgs{Task: task, Feedback: op.feedback})
	case "accept":
		_, _ = client.Do(ctx, cl, api.CmdReviewAccept, api.ReviewAcceptArgs{Task: task})
	case "sync":
		_, _ = client.Do(ctx, cl, api.CmdSync, api.SyncArgs{Task: task, Wait: true})
	}
}

func filepathOf(ref string) string { return "f" + strings.TrimPrefix(ref, "c") + ".txt" }

// settle waits until no turn runs or waits and no ask is pending.
func (p *project) settle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		busy := ""
		var ts []api.TaskInfo
		_ = p.rpc().Call(context.Background(), "taskList", nil, &ts)
		for _, ti := range ts {
			if ti.Status == "running" {
				busy = ti.Ref + " running"
			}
			var d api.TaskDetail
			_ = p.rpc().Call(context.Background(), "taskShow", map[string]any{"task": ti.ID}, &d)
			for _, tu := range d.Turns {
				if tu.Status == "queued" || tu.Status == "running" {
					busy = fmt.Sprintf("%s turn %d %s", ti.Ref, tu.Number, tu.Status)
				}
			}
			if ti.Status == "blocked" || ti.Status == "conflict" {
				if pl := p.threads(ti.ID); pl.Pending > 0 {
					busy = ti.Ref + " ask pending"
				}
			}
		}
		if busy == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never settled: %s", busy)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkInvariants checks what must hold after a kill and a settle, over the
// daemons of one project (one, or a cluster's members; the first answers
// the RPC). inMain says whether an accepted task's work is in its parent.
func checkInvariants(t *testing.T, k int, op string, acked map[string]review.ReviewComment, ps []*project, inMain func(api.TaskInfo) bool) {
	t.Helper()
	p := ps[0]
	fail := func(format string, a ...any) { t.Fatalf("after kill %d (%s): "+format, append([]any{k, op}, a...)...) }
	var ts []api.TaskInfo
	if err := p.rpc().Call(context.Background(), "taskList", nil, &ts); err != nil {
		fail("%v", err)
	}
	stored := map[string]review.ReviewComment{}
	launched := map[string]bool{}
	turnsOf := map[string]map[int]bool{}
	details := map[string]api.TaskDetail{}
	for _, ti := range ts {
		switch ti.Status {
		case "blocked", "failed", "conflict", "accepted", "cancelled":
		default:
			fail("task %s is %q after settling", ti.Ref, ti.Status)
		}
		var d api.TaskDetail
		if err := p.rpc().Call(context.Background(), "taskShow", map[string]any{"task": ti.ID}, &d); err != nil {
			fail("%v", err)
		}
		details[ti.ID] = d
		turnsOf[ti.ID] = map[int]bool{}
		for _, tu := range d.Turns {
			if tu.StartedAt != nil {
				launched[tu.ID] = true
				if tu.Kind == "work" { // a comment is delivered with a work turn, by its number
					turnsOf[ti.ID][tu.Seq] = true
				}
			}
			if tu.Status == "done" && tu.StartedAt == nil {
				fail("turn %d of %s is done but never launched", tu.Number, ti.Ref)
			}
		}
		if ti.Status == "accepted" && !inMain(ti) {
			fail("accepted task %s is not in main", ti.Ref)
		}
		for _, th := range p.threads(ti.ID).Threads {
			for _, m := range th.Messages {
				stored[m.ID] = m
			}
		}
	}
	for id, c := range acked {
		s, ok := stored[id]
		if !ok {
			fail("acknowledged comment %s (%q) is lost", id, c.Body)
		}
		if s.Body != c.Body {
			fail("comment %s changed its words", id)
		}
		if s.DeliveryState == review.Delivered && !turnsOf[s.TaskID][s.DeliveredTurn] {
			fail("comment %s is delivered with turn %d, which never launched", id, s.DeliveredTurn)
		}
		if s.Intent == review.Ask && s.AskState == review.AskPending {
			fail("ask %s is still pending after settling", id)
		}
	}
	// a comment is in at most one completed work turn the agent saw, on
	// whichever member it ran (a home that travelled holds the turns before
	// it too: a turn is counted once)
	seen := map[string]int{}
	counted := map[string]bool{}
	for _, m := range ps {
		homes, _ := filepath.Glob(filepath.Join(m.paths.Agents, "*", "home"))
		for _, h := range homes {
			turns, _ := scriptagent.ReadTurns(h)
			for _, tr := range turns {
				key := tr.Session + "\x00" + tr.At.String() + "\x00" + tr.Prompt
				if tr.Mode == "plan" || counted[key] {
					continue
				}
				counted[key] = true
				for _, c := range acked {
					if c.Intent == review.Comment && strings.Contains(tr.Prompt, c.Body) {
						seen[c.ID]++
					}
				}
			}
		}
	}
	for id, n := range seen {
		if n > 1 {
			fail("comment %q was delivered in %d completed work turns", acked[id].Body, n)
		}
	}
	// a recovery file remains only for an unblock whose launch did not
	// complete, and one of a single daemon's is there for each such unblock
	// (in a cluster the turn's message is in the shared store, which the
	// turn's row shows; the file stays on the member that queued it)
	for _, m := range ps {
		files, _ := filepath.Glob(filepath.Join(m.paths.Recovery, "unblock-*.txt"))
		for _, f := range files {
			id := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "unblock-"), ".txt")
			if launched[id] && len(ps) == 1 {
				fail("recovery file %s remains for a launched turn", filepath.Base(f))
			}
		}
	}
	for _, ti := range ts {
		for _, tu := range details[ti.ID].Turns {
			if tu.Trigger != "unblock" || tu.StartedAt != nil {
				continue
			}
			if len(ps) > 1 {
				if strings.TrimSpace(tu.Prompt) == "" {
					fail("unblock turn %d of %s never launched and its message is not in the store", tu.Number, ti.Ref)
				}
				continue
			}
			if _, err := os.Stat(filepath.Join(p.paths.Recovery, "unblock-"+tu.ID+".txt")); err != nil {
				fail("unblock turn %d of %s never launched but its recovery file is gone", tu.Number, ti.Ref)
			}
		}
	}
}

func runGitOK(dir string, args ...string) error {
	_, err := execGit(dir, args...)
	return err
}

func execGit(dir string, args ...string) (string, error) {
	out, err := newExec("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	return string(out), err
}
