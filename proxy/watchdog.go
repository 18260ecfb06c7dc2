package proxy

import (
	"sync"
	"time"
)

// watchdog cuts request bodies that have not arrived by their deadline. One
// goroutine, running only while bodies are being read, serves every request:
// a runtime timer per request costs more (it wakes the network poller) than
// a map insert and delete.
type watchdog struct {
	mu      sync.Mutex
	live    map[*plan]watched
	running bool
	tick    time.Duration // how often the loop looks (the shortest asked)
}

type watched struct {
	deadline time.Time
}

// watch registers pl's body; pl.cutBody runs if it is still registered at
// deadline. The loop looks at most every tick (and at least every second).
func (w *watchdog) watch(pl *plan, deadline time.Time, tick time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tick == 0 || tick < w.tick {
		w.tick = tick
	}
	if w.live == nil {
		w.live = map[*plan]watched{}
	}
	w.live[pl] = watched{deadline: deadline}
	if !w.running {
		w.running = true
		go w.loop()
	}
}

// done unregisters pl (its body arrived, or the request ended).
func (w *watchdog) done(pl *plan) {
	w.mu.Lock()
	delete(w.live, pl)
	w.mu.Unlock()
}

func (w *watchdog) loop() {
	for {
		w.mu.Lock()
		tick := min(time.Second, w.tick)
		w.mu.Unlock()
		time.Sleep(tick)
		now := time.Now()
		var due []*plan
		w.mu.Lock()
		for pl, x := range w.live {
			if !now.Before(x.deadline) {
				due = append(due, pl)
				delete(w.live, pl)
			}
		}
		if len(w.live) == 0 {
			w.running = false
			w.mu.Unlock()
			for _, pl := range due {
				pl.cutBody()
			}
			return
		}
		w.mu.Unlock()
		for _, pl := range due {
			pl.cutBody()
		}
	}
}
