package daemon

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lazy/api"
	"lazy/client"
	"lazy/gitx/gitxtest"
	"lazy/scriptagent/agenttest"
	"lazy/stubmodel"
)

// TestMain lets the test binary play the scripted agent.
func TestMain(m *testing.M) { agenttest.Main(m) }

// benchDaemon starts a daemon with the scripted agent over a stub upstream and
// n tasks, each blocked with a committed four-line file.
func benchDaemon(b *testing.B, n int) (*Daemon, *client.Client, []string) {
	stub := stubmodel.New()
	stub.Record = false
	srv := httptest.NewServer(stub)
	b.Cleanup(srv.Close)
	root := gitxtest.NewRepo(b, nil)
	home := b.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ".lazy"), 0o755); err != nil {
		b.Fatal(err)
	}
	cfg := fmt.Sprintf("[agent]\ndriver = \"script\"\n[proxy]\nupstream = %q\n", srv.URL)
	if err := os.WriteFile(filepath.Join(root, ".lazy", "config.toml"), []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	self, _ := os.Executable()
	env := []string{"LAZY_HOME=" + home, "PATH=" + os.Getenv("PATH")}
	if v := os.Getenv("LAZY_STORAGE__SYNC"); v != "" { // compare the sync modes
		env = append(env, "LAZY_STORAGE__SYNC="+v)
	}
	d, err := Start(context.Background(), Options{Root: root, Environ: env, SelfExe: self})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Stop(); <-d.Done() })
	ids := make([]string, n)
	for i := range ids {
		res, err := d.Service().NewTask(context.Background(), api.NewTaskArgs{Code: fmt.Sprintf("t%d", i),
			Prompt: "@write a.go one\\ntwo\\nthree\\nfour\\n\n@commit a\n@answer ok"})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = res.Task.ID
	}
	deadline := time.Now().Add(30 * time.Minute)
	for {
		ts, _ := d.Service().ListTasks(context.Background())
		blocked := 0
		for _, t := range ts {
			if t.Status == "blocked" {
				blocked++
			}
			if t.Status == "failed" {
				b.Fatalf("task %s failed: %s", t.Ref, t.FailReason)
			}
		}
		if blocked == n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d tasks blocked", blocked, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	tok, _ := os.ReadFile(d.Paths().AuthToken)
	cl := &client.Client{Base: d.Info().BaseURL, Token: strings.TrimSpace(string(tok)), HTTP: nil}
	cl.HTTP = httpClient()
	return d, cl, ids
}

// postComments runs 100 reviewers, one per task, each posting review
// comments through the RPC (HTTP, JSON, the task actor, an SQLite commit);
// every > 0 paces each reviewer to one comment per period. It reports the
// time to the durable reply at p50 and p99, and comments/s.
func postComments(b *testing.B, every time.Duration) {
	const reviewers = 100
	_, cl, ids := benchDaemon(b, reviewers)
	post := func(id string, line int) (time.Duration, error) {
		t0 := time.Now()
		err := cl.Call(context.Background(), "reviewPostComment", map[string]any{"task": id, "body": "please rename this", "file": "a.go", "line": line, "side": "new", "intent": "comment"}, nil)
		return time.Since(t0), err
	}
	// The first comment on a task reads its diff from git to check the
	// anchor (later ones hit the cache): measured apart, one reviewer at a
	// time, so the steady-state figures below are not a mix of the two.
	cold := make([]time.Duration, 0, reviewers)
	for _, id := range ids {
		d, err := post(id, 1)
		if err != nil {
			b.Fatal(err)
		}
		cold = append(cold, d)
	}
	sort.Slice(cold, func(i, j int) bool { return cold[i] < cold[j] })
	lat := make([]time.Duration, 0, b.N)
	var mu sync.Mutex
	var wg sync.WaitGroup
	per := (b.N + reviewers - 1) / reviewers
	b.ResetTimer()
	start := time.Now()
	for r := 0; r < reviewers; r++ {
		wg.Add(1)
		go func(r int, id string) {
			defer wg.Done()
			var tick <-chan time.Time
			if every > 0 {
				time.Sleep(time.Duration(r) * every / reviewers) // spread the reviewers over the period
				t := time.NewTicker(every)
				defer t.Stop()
				tick = t.C
			}
			mine := make([]time.Duration, 0, per)
			for i := 0; i < per; i++ {
				d, err := post(id, 1+i%4)
				if err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, d)
				if tick != nil {
					<-tick
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}(r, ids[r])
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(len(lat))/el.Seconds(), "comments/s")
	}
	b.ReportMetric(float64(cold[len(cold)/2].Microseconds())/1000, "first-on-task-p50-ms")
}

// BenchmarkCommentPostDurable: 100 reviewers posting back to back.
func BenchmarkCommentPostDurable(b *testing.B) { postComments(b, 0) }

// BenchmarkCommentPostPaced: the same 100 reviewers at 200 ms each (500
// comments/s in all), so the figure is the time a comment takes, not the
// length of a saturated queue.
func BenchmarkCommentPostPaced(b *testing.B) { postComments(b, 200*time.Millisecond) }

// BenchmarkCommentPostPaced2000: 50 ms each, 2,000 comments/s in all.
func BenchmarkCommentPostPaced2000(b *testing.B) { postComments(b, 50*time.Millisecond) }

// BenchmarkScaleTasks: LAZY_SCALE_TASKS (1,000 unless set) live tasks at
// once, each with its actor, asking a question and then unblocking with a
// queued comment, all against the scripted agent through the proxy. It
// reports the daemon's heap and CPU per task and checks that no ask is left
// unanswered and no comment undelivered.
func BenchmarkScaleTasks(b *testing.B) {
	n := 1000
	if v := os.Getenv("LAZY_SCALE_TASKS"); v != "" {
		fmt.Sscan(v, &n)
	}
	for it := 0; it < b.N; it++ {
		b.StopTimer()
		runtime.GC()
		var m0 runtime.MemStats
		runtime.ReadMemStats(&m0)
		d, cl, ids := benchDaemon(b, n)
		runtime.GC()
		var m1 runtime.MemStats
		runtime.ReadMemStats(&m1)
		cpu0, kids0 := cpuTimes()
		b.StartTimer()
		start := time.Now()
		var wg sync.WaitGroup
		sem := make(chan struct{}, 64) // 64 reviewers at a time
		for _, id := range ids {
			wg.Add(1)
			go func(id string) {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				ctx := context.Background()
				if err := cl.Call(ctx, "reviewPostComment", map[string]any{"task": id, "body": "why two?\n@answer because", "file": "a.go", "line": 2, "side": "new", "intent": "ask"}, nil); err != nil {
					b.Error(err)
				}
				if err := cl.Call(ctx, "reviewPostComment", map[string]any{"task": id, "body": "rename one", "file": "a.go", "line": 1, "side": "new", "intent": "comment"}, nil); err != nil {
					b.Error(err)
				}
				if err := cl.Call(ctx, "reviewUnblock", map[string]any{"task": id, "feedback": "go on"}, nil); err != nil {
					b.Error(err)
				}
			}(id)
		}
		wg.Wait()
		// wait until every task is blocked again with its ask answered and comment delivered
		deadline := time.Now().Add(20 * time.Minute)
		for {
			done := 0
			for _, id := range ids {
				var pl struct {
					Pending, PendingDelivery int
					State                    struct{ Status string }
				}
				if err := cl.Call(context.Background(), "reviewComments", map[string]any{"task": id}, &pl); err == nil && pl.Pending == 0 && pl.PendingDelivery == 0 && pl.State.Status == "blocked" {
					done++
				}
			}
			if done == n {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d tasks finished", done, n)
			}
			time.Sleep(time.Second)
		}
		el := time.Since(start)
		b.StopTimer()
		cpu1, kids1 := cpuTimes()
		// none stranded, none lost: every ask answered, every comment delivered
		ctx := context.Background()
		for _, id := range ids {
			cs, err := d.svc.st.ListReviewComments(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			answered, delivered := 0, 0
			for _, c := range cs {
				if c.AskState == "answered" {
					answered++
				}
				if c.DeliveryState == "delivered" {
					delivered++
				}
			}
			if answered != 1 || delivered != 1 {
				b.Fatalf("task %s: %d asks answered, %d comments delivered", id, answered, delivered)
			}
		}
		hs := d.Supervisor().Health()
		b.ReportMetric(float64(len(hs)), "actors")
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/float64(n)/1024, "heap-KiB/task")
		b.ReportMetric((cpu1-cpu0).Seconds()*1000/float64(n), "daemon-cpu-ms/task")
		b.ReportMetric((kids1-kids0).Seconds()*1000/float64(n), "agent-cpu-ms/task")
		b.ReportMetric(el.Seconds(), "s/round")
		d.Stop()
		<-d.Done()
	}
}

// cpuTimes is this process's CPU time and its children's.
func cpuTimes() (self, children time.Duration) {
	var s, c syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &s)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &c)
	tv := func(r syscall.Rusage) time.Duration {
		return time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	return tv(s), tv(c)
}
