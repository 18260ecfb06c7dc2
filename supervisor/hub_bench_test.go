package supervisor

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"lazy/actors"
	"lazy/api"
	"lazy/store"
)

// BenchmarkHubTranscriptEvents: transcript events through the traffic hub
// to N watchers of the task (the task page, say), each draining its
// channel; one op is one event published and received by every watcher.
// events/s is what was published, delivered/s what reached the watchers
// (all of them together), %lost what the hub dropped for a full watcher
// (by design: a slow watcher loses events, never slows the proxy).
func BenchmarkHubTranscriptEvents(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("Watchers%d", n), func(b *testing.B) {
			dir := b.TempDir()
			st, err := store.OpenSQL(filepath.Join(dir, "lazy.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			sup, err := New(Config{Core: testCore(b, filepath.Join(dir, "g.json")), Task: &actors.TaskDeps{Store: st, Launcher: &fakeLauncher{fn: ok}, LockDir: dir, Log: testLog(), CheckPassphrase: noPassphrase}})
			if err != nil {
				b.Fatal(err)
			}
			defer sup.Shutdown()
			const id = "0123456789abcdef0123456789abcdef"
			got := make(chan int, n)
			for w := 0; w < n; w++ {
				ch, cancel, err := sup.Subscribe(actors.Filter{Tasks: true, Transcript: true, IDs: map[string]bool{id: true}}, 256)
				if err != nil {
					b.Fatal(err)
				}
				defer cancel()
				go func() {
					seen := 0
					for e := range ch {
						if e.Transcript.Seq > b.N { // the end mark
							got <- seen
							return
						}
						seen++
					}
				}()
			}
			b.ResetTimer()
			start := time.Now()
			for i := 1; i <= b.N; i++ {
				p := api.TranscriptPart{Turn: 1, Seq: i, Call: 1, Text: "some words the model wrote "}
				sup.Publish(api.Event{Kind: api.EventTranscript, TaskID: id, Transcript: &p})
				if i%200 == 0 {
					time.Sleep(50 * time.Microsecond) // a watcher's buffer is 256: the hub drops past it
				}
			}
			el := time.Since(start)
			// the end mark, sent until every watcher has it (a full buffer drops one)
			lost := 0
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			deadline := time.After(10 * time.Second)
			for w := 0; w < n; {
				select {
				case seen := <-got:
					lost += b.N - seen
					w++
				case <-tick.C:
					end := api.TranscriptPart{Seq: b.N + 1}
					sup.Publish(api.Event{Kind: api.EventTranscript, TaskID: id, Transcript: &end})
				case <-deadline:
					b.Fatalf("a watcher did not get the end mark")
				}
			}
			b.ReportMetric(float64(b.N)/el.Seconds(), "events/s")
			b.ReportMetric(float64(n*b.N-lost)/el.Seconds(), "delivered/s")
			b.ReportMetric(float64(lost)/float64(n*b.N)*100, "%lost")
		})
	}
}
