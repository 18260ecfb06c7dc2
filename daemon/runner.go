package daemon

import (
	"fmt"
	"os/exec"
	"sync"
	"time"

	"lazy/agent"
)

// reprobeEvery bounds how often the status probes the runner again (each
// probe of an installed bwrap starts one sandbox; the pages read the status).
const reprobeEvery = time.Second

// prober re-probes the runner in force when it cannot run turns: before a
// turn it would refuse, before a task is created, and when the status is
// read (a config reload builds a new runner, probed as it is built).
// Installing bubblewrap (or allowing user namespaces) under a running
// daemon is seen at the next of these, with no restart.
type prober struct {
	launcher *liveLauncher
	// changed records a launcher whose runner became usable (status, warnings)
	changed func(*agent.Launcher)

	mu        sync.Mutex
	lastFor   *agent.Launcher // the launcher last probed
	last      time.Time       // when
	lastErr   error           // what that probe found
	lastFound bool            // whether bwrap was on PATH then
}

// ready reports whether the runner in force can run turns here now (nil),
// or why not, probing it now. "auto" that found no sandbox is replaced by
// bwrap the moment bwrap works.
func (p *prober) ready() error { return p.check(false) }

// recent is ready for the status and the pages: a probe less than
// reprobeEvery old is answered again.
func (p *prober) recent() error { return p.check(true) }

func (p *prober) check(cached bool) error {
	cur := p.launcher.cur.Load()
	switch cur.Runner.(type) {
	case agent.Refuse, agent.Bwrap:
	default:
		return nil // process needs no sandbox; docker checks its engine at each turn
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if cached && p.lastFor == cur {
		age := time.Since(p.last)
		// a working sandbox is checked again each minute, a broken one each
		// second, a missing bwrap every time (a look on PATH costs nothing)
		if (p.lastErr == nil && age < time.Minute) || (p.lastErr != nil && p.lastFound && age < reprobeEvery) {
			return p.lastErr
		}
	}
	found := bwrapOnPath(cur.Runner)
	next, err := agent.Reprobe(cur.Runner)
	p.lastFor, p.last, p.lastErr, p.lastFound = cur, time.Now(), err, found
	if err != nil {
		return err
	}
	if _, was := cur.Runner.(agent.Refuse); was {
		l := *cur
		l.Runner = next
		agent.WarmMasks()
		// a config reload in between wins: it probed for itself
		if p.launcher.cur.CompareAndSwap(cur, &l) {
			p.lastFor = &l
			if p.changed != nil {
				p.changed(&l)
			}
		}
	}
	return nil
}

// unavailableLine is the status's sandbox line for a runner that cannot
// run turns: the cause, the fix, and what it means for turns.
func unavailableLine(err error) string {
	return fmt.Sprintf("unavailable: %v; install bubblewrap (apt-get install bubblewrap) or set agent.runner = \"process\" (no sandbox) — turns will be refused", err)
}

// bwrapOnPath reports whether r's bwrap executable is on PATH.
func bwrapOnPath(r agent.Runner) bool {
	exe := "bwrap"
	if b, ok := r.(agent.Bwrap); ok && b.Path != "" {
		exe = b.Path
	}
	_, err := exec.LookPath(exe)
	return err == nil
}
