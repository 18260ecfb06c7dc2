package daemon

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"lazy/client"
	"lazy/gitx/gitxtest"
	"lazy/httpapi"
	"lazy/scriptagent"
	"lazy/stubmodel"
)

// TestMain lets the test binary play the scripted agent.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "script-agent" {
		os.Exit(scriptagent.Main(os.Args[2:], os.Getenv, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

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
	d, err := Start(context.Background(), Options{Root: root, Environ: []string{"LAZY_HOME=" + home, "PATH=" + os.Getenv("PATH")}, SelfExe: self})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Stop(); <-d.Done() })
	ids := make([]string, n)
	for i := range ids {
		res, err := d.Service().NewTask(context.Background(), httpapi.NewTaskArgs{Code: fmt.Sprintf("t%d", i),
			Prompt: "@write a.go one\\ntwo\\nthree\\nfour\\n\n@commit a\n@answer ok"})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = res.Task.ID
	}
	deadline := time.Now().Add(5 * time.Minute)
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

// BenchmarkCommentPostDurable: 100 concurrent reviewers, one per task, post
// review comments through the RPC (HTTP, JSON, the task actor, an SQLite
// commit) and measure the time to the durable reply.
func BenchmarkCommentPostDurable(b *testing.B) {
	const reviewers = 100
	_, cl, ids := benchDaemon(b, reviewers)
	lat := make([]time.Duration, 0, b.N)
	var mu sync.Mutex
	var wg sync.WaitGroup
	per := (b.N + reviewers - 1) / reviewers
	b.ResetTimer()
	start := time.Now()
	for r := 0; r < reviewers; r++ {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			mine := make([]time.Duration, 0, per)
			for i := 0; i < per; i++ {
				t0 := time.Now()
				err := cl.Call(context.Background(), "reviewPostComment", map[string]any{"task": id, "body": "please rename this", "file": "a.go", "line": 1 + i%4, "side": "new", "intent": "comment"}, nil)
				if err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}(ids[r])
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
}

// BenchmarkCommentPostPaced: the same 100 reviewers, each posting at a
// reviewer's pace — one comment every 50 ms, 2,000 comments/s in all — so the
// figure is the time a comment takes, not the length of a saturated queue.
func BenchmarkCommentPostPaced(b *testing.B) {
	const reviewers = 100
	const every = 50 * time.Millisecond
	_, cl, ids := benchDaemon(b, reviewers)
	lat := make([]time.Duration, 0, b.N)
	var mu sync.Mutex
	var wg sync.WaitGroup
	per := (b.N + reviewers - 1) / reviewers
	b.ResetTimer()
	for r := 0; r < reviewers; r++ {
		wg.Add(1)
		go func(r int, id string) {
			defer wg.Done()
			time.Sleep(time.Duration(r) * every / reviewers) // spread the reviewers over the period
			tick := time.NewTicker(every)
			defer tick.Stop()
			mine := make([]time.Duration, 0, per)
			for i := 0; i < per; i++ {
				t0 := time.Now()
				if err := cl.Call(context.Background(), "reviewPostComment", map[string]any{"task": id, "body": "please rename this", "file": "a.go", "line": 1 + i%4, "side": "new", "intent": "comment"}, nil); err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t0))
				<-tick.C
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}(r, ids[r])
	}
	wg.Wait()
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}
