package actors

import (
	"testing"
	"time"
)

// TestLeaseSurvivesAShortOutage: the store stops answering the lease's
// renewals for 300 ms, eight times, while a turn runs (TTL 1 s: the jobs
// stop 700 ms after the last renewal). A failed renewal is tried again
// soon, so each outage, shorter than what is left of the 700 ms, costs
// neither the lease nor the running agent.
func TestLeaseSurvivesAShortOutage(t *testing.T) {
	l := &stuckAgent{started: make(chan time.Time, 1), killed: make(chan time.Time, 1), release: make(chan struct{})}
	r := newRigWith(t, "", nil, l, "")
	leases := &flakyLeases{Leases: r.st}
	r.respawn(func(*TaskHost) { r.deps.Leases, r.deps.LeaseHolder, r.deps.LeaseTTL = leases, "member a", time.Second })
	if _, err := r.ask(&Unblock{Message: "go on"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the turn never started")
	}
	for i := 0; i < 8; i++ {
		leases.fail.Store(true)
		time.Sleep(300 * time.Millisecond) // the outage itself
		leases.fail.Store(false)
		select {
		case at := <-l.killed:
			t.Fatalf("outage %d of 300 ms stopped the agent at %s: the lease was lost", i+1, at.Format(time.StampMilli))
		case <-time.After(250 * time.Millisecond):
		}
	}
	close(l.release)
}
