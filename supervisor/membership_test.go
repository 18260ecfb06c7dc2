//go:build !race

package supervisor

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"lazy/actors"
	"lazy/grain/etcdtest"
	"lazy/store/pgtest"
)

// TestMembershipRecoversFromAnOutage: etcd answers nothing for longer than
// the members' leases (10 s here; the cluster chaos case stops it 35 s),
// frozen (SIGSTOP: its connections stay open) or stopped and started again
// on its data. Each member finds itself out once its lease could have run
// out, says so (Membership) and refuses calls at once with the reason and
// etcd's address, instead of waiting out the request timeout. Once etcd
// answers, each joins again by itself under a new member id: both list
// each other, every task is hosted by one member, and calls through either
// reach every task. (Before, each member dropped itself for good and only a
// restart brought it back.)
func TestMembershipRecoversFromAnOutage(t *testing.T) {
	for _, how := range []string{"frozen", "restarted"} {
		t.Run(how, func(t *testing.T) {
			etcd := etcdtest.Start(t)
			pg := pgtest.Start(t)
			dsn := pg.NewDatabase(t)
			secret := []byte("a secret of this test cluster")
			a, st := member(t, dsn, etcd.Endpoint, secret)
			b, _ := member(t, dsn, etcd.Endpoint, secret)
			all := []*Supervisor{a, b}
			waitMembers(t, 2, all...)
			ids := blockedTasks(t, st, 8)
			for _, id := range ids {
				if _, err := Ask[*actors.Done](b, id, &actors.Rename{Title: "before the outage"}); err != nil {
					t.Fatalf("rename %s: %v", id, err)
				}
			}
			if m := a.Membership(); !m.In || m.Life != 1 {
				t.Fatalf("before the outage: %+v", m)
			}
			down := time.Now()
			switch how {
			case "frozen":
				if err := etcd.Freeze(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = etcd.Thaw() })
			default:
				etcd.Stop()
			}
			for _, s := range all {
				waitOut(t, s, 20*time.Second)
			}
			t.Logf("figure: both members out %v after etcd went down (lease %v)", time.Since(down).Round(100*time.Millisecond), memberLease)
			// a call through a member that is out is refused at once, saying why
			start := time.Now()
			_, err := Ask[*actors.Done](a, ids[0], &actors.Rename{Title: "during the outage"})
			var out *OutOfClusterError
			if !errors.As(err, &out) {
				t.Fatalf("a call during the outage: %v, want an OutOfClusterError", err)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("the refusal took %v", took)
			}
			if msg := err.Error(); !strings.Contains(msg, etcd.Endpoint) || !strings.Contains(msg, "out of cluster") || !strings.Contains(msg, "joins again by itself") {
				t.Errorf("the refusal does not say what happened and what to do: %s", msg)
			}
			if out.HTTPStatus() != 503 {
				t.Errorf("status %d", out.HTTPStatus())
			}
			t.Logf("refused during the outage: %v", err)
			for time.Since(down) < 10*time.Second {
				time.Sleep(100 * time.Millisecond)
			}
			up := time.Now()
			if how == "frozen" {
				if err := etcd.Thaw(); err != nil {
					t.Fatal(err)
				}
			} else {
				etcd.Restart(t)
			}
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if a.Membership().In && b.Membership().In && len(a.Members()) == 2 && len(b.Members()) == 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("30 s after etcd is back: a %+v sees %v; b %+v sees %v", a.Membership(), a.Members(), b.Membership(), b.Members())
				}
			}
			t.Logf("figure: etcd %s after %v; both members in and listing each other %v after it was back",
				how, up.Sub(down).Round(100*time.Millisecond), time.Since(up).Round(10*time.Millisecond))
			for i, s := range all {
				if m := s.Membership(); m.Life != 2 || !strings.HasSuffix(m.ID, "#2") {
					t.Errorf("member %d after the outage: %+v, want its second life", i, m)
				}
			}
			for i, s := range all {
				for _, id := range ids {
					if _, err := Ask[*actors.Done](s, id, &actors.Rename{Title: fmt.Sprintf("after the outage, through %d", i)}); err != nil {
						t.Fatalf("rename %s through member %d after the outage: %v", id, i, err)
					}
				}
			}
			if h := hosts(all...); len(h) != len(ids) {
				t.Errorf("%d tasks hosted after the outage, want %d: %v", len(h), len(ids), h)
			}
			seen := map[string]int{}
			for _, s := range all {
				for _, hh := range s.Health() {
					if hh.Kind == "task" {
						seen[hh.TaskID]++
					}
				}
			}
			for id, n := range seen {
				if n > 1 {
					t.Errorf("task %s has an actor on %d members", id, n)
				}
			}
		})
	}
}

// waitOut waits until s says it is out of its cluster.
func waitOut(t *testing.T, s *Supervisor, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); s.Membership().In; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the member is still in its cluster %v after etcd went down", within)
		}
	}
	if m := s.Membership(); m.Why == "" {
		t.Errorf("out, but not why: %+v", m)
	}
}
