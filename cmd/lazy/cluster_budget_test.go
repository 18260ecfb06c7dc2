package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestClusterBudgetEnforcedByHost: a budget set through the member that
// does not host the task is enforced by the host's proxy (it reads budgets
// from the shared store), and the usage either member shows is the one the
// host counted (read from the store): the host's calls appear on the other
// member, and the second turn's call is refused before it leaves.
func TestClusterBudgetEnforcedByHost(t *testing.T) {
	c := newCluster(t)
	var ref, id string
	for i := 0; i < 40 && ref == ""; i++ {
		r := fmt.Sprintf("b%d", i)
		c.a.lazy(0, "task", "new", "--code", r, "-m", "@model 1\n@answer one call")
		ti := c.a.waitStatus(r, "blocked")
		if c.hosts()[ti.ID] == "a" {
			ref, id = r, ti.ID
		}
	}
	if ref == "" {
		t.Fatal("none of 40 tasks was placed on member a")
	}
	host, other := c.a, c.b
	// the other member shows what the host counted
	want := host.show(ref).Usage
	if want == nil || want.Requests != 1 {
		t.Fatalf("the host's usage of %s: %+v", ref, want)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if u := other.show(ref).Usage; u != nil && *u == *want {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("member b shows usage %+v of %s, the host counted %+v", u, ref, want)
		}
	}
	// a budget set through b, already used up: the host refuses the next call
	if out := other.lazy(0, "task", "budget", ref, "--tokens", "1"); !strings.Contains(out, "budget 1 tokens") {
		t.Fatalf("task budget through b: %s", out)
	}
	upstream := len(host.stub.Requests())
	other.lazy(0, "unblock", ref, "-m", "@model 1\n@answer never")
	ti := other.waitStatus(ref, "failed")
	if !strings.Contains(ti.FailReason, "token budget used up") {
		t.Errorf("after a budget set through b, the task failed for %q", ti.FailReason)
	}
	if n := len(host.stub.Requests()) - upstream; n != 0 {
		t.Errorf("%d calls reached the host's upstream after the budget set through b was used up", n)
	}
	if h := c.hosts()[id]; h != "a" {
		t.Logf("the task moved to %s meanwhile", h)
	}
	// both members show the refused call
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		u, v := host.show(ref).Usage, other.show(ref).Usage
		if u != nil && v != nil && u.Requests == 2 && *u == *v {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("after the refused call: host shows %+v, b shows %+v (want 2 requests on both)", u, v)
		}
	}
}
