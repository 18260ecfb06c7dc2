package main

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"lazy/proxy"
)

// usageLossWindow is what a kill -9 may lose of the usage rows: the calls
// that ended in the last 50 ms (daemon usageFlushEvery) and those of the
// batch being committed then. The test allows the commit a second on this
// shared machine; a call that ended earlier than that before the kill must
// be counted after the restart.
const usageLossWindow = 50*time.Millisecond + time.Second

// TestChaosKill9UsageRows: the usage rows are written behind the calls, in
// batches. Clients call the model through a live grant as fast as they can;
// the daemon is killed with SIGKILL at a random moment and started again.
// Every call whose reply ended more than usageLossWindow before the kill is
// counted in the task's usage (read back from the rows), and no call is
// counted that the proxy did not finish.
func TestChaosKill9UsageRows(t *testing.T) {
	kills, rng := chaosSetup(t)
	kills = max(3, kills/10)
	p := newProject(t, "process")
	p.lazy(0, "daemon", "start")
	for k := 0; k < kills; k++ {
		code := fmt.Sprintf("u%d", k)
		p.lazy(0, "task", "new", "--code", code, "--budget-tokens", "1000000000", "-m", "@sleep 10m")
		id := p.show(code).ID
		ph := waitModelGrant(t, p, id)
		info := p.info()

		var mu sync.Mutex
		var ended []time.Time // when each answered call's reply ended
		started := 0
		stop := make(chan struct{})
		var wg sync.WaitGroup
		const clients = 8
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
				for {
					select {
					case <-stop:
						return
					default:
					}
					req, _ := http.NewRequest("POST", info.ProxyURL+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`))
					req.Header.Set("x-api-key", ph)
					mu.Lock()
					started++
					mu.Unlock()
					resp, err := hc.Do(req)
					if err != nil {
						return // the daemon is gone
					}
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err != nil || resp.StatusCode != 200 {
						if resp.StatusCode != 200 {
							t.Errorf("call: %s", resp.Status)
						}
						return
					}
					mu.Lock()
					ended = append(ended, time.Now())
					mu.Unlock()
				}
			}()
		}
		time.Sleep(usageLossWindow + time.Duration(500+rng.Intn(1000))*time.Millisecond)
		killAt := time.Now()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		close(stop)
		killAndRestart(t, p, info.PID, done)

		mu.Lock()
		early, all := 0, len(ended)
		for _, e := range ended {
			if e.Before(killAt.Add(-usageLossWindow)) {
				early++
			}
		}
		mu.Unlock()
		u := p.show(code).Usage
		if u == nil {
			t.Fatalf("kill %d: task %s has no usage after the restart", k, code)
		}
		counted := int(u.Requests)
		// the calls lost are the last ones: how long before the kill the
		// earliest of them ended is the window the kill took
		lostFor := time.Duration(0)
		if counted < all {
			mu.Lock()
			sort.Slice(ended, func(i, j int) bool { return ended[i].Before(ended[j]) })
			lostFor = killAt.Sub(ended[counted])
			mu.Unlock()
		}
		t.Logf("kill %d: %d calls answered (%d more than %s before the kill), %d started, %d counted after the restart: %d lost, the calls of the last %s",
			k, all, early, usageLossWindow, started, counted, all-counted, lostFor.Round(time.Millisecond))
		if counted < early {
			t.Fatalf("kill %d: %d calls counted after the restart, but %d had ended more than %s before the kill", k, counted, early, usageLossWindow)
		}
		if counted > started {
			t.Fatalf("kill %d: %d calls counted, only %d were sent", k, counted, started)
		}
		if early == 0 {
			t.Fatalf("kill %d: no call ended before the kill; the test measured nothing", k)
		}
	}
}

// waitModelGrant is the placeholder of the task's model grant, once its
// agent's launch has minted it.
func waitModelGrant(t *testing.T, p *project, taskID string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		gs, err := proxy.LoadGrants(p.paths.ProxyTokens)
		if err != nil {
			t.Fatal(err)
		}
		for ph, g := range gs {
			if g.TaskID == taskID && g.EnvVar == "ANTHROPIC_API_KEY" {
				return ph
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s has no model grant after 60 s", taskID)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
