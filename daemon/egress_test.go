package daemon

import (
	"testing"
	"time"

	"lazy/store"
)

// TestNetworkOf: a task's egress rows become one line per destination
// (connections, failures, bytes each way) and a list of refusals.
func TestNetworkOf(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	n := networkOf([]store.EgressCall{
		{Method: "CONNECT", Dest: "registry.test:443", Status: 200, BytesUp: 100, BytesDown: 1000, At: t0},
		{Method: "CONNECT", Dest: "registry.test:443", Status: 200, BytesUp: 50, BytesDown: 500, At: t0.Add(time.Second)},
		{Method: "CONNECT", Dest: "down.test:443", Status: 502, At: t0},
		{Method: "GET", Dest: "mirror.test:80", Status: 404, BytesUp: 10, BytesDown: 20, At: t0},
		{Method: "GET", Dest: "sneaky.test:80", Path: "http://sneaky.test:80/", Status: 403, Refused: "egress_private_address", At: t0},
	})
	if len(n.Destinations) != 3 || n.Destinations[0].Dest != "registry.test:443" || n.Destinations[0].Connections != 2 ||
		n.Destinations[0].BytesUp != 150 || n.Destinations[0].BytesDown != 1500 || !n.Destinations[0].Last.Equal(t0.Add(time.Second)) {
		t.Fatalf("destinations: %+v", n.Destinations)
	}
	for _, d := range n.Destinations {
		if want := map[string]int{"down.test:443": 1}[d.Dest]; d.Failed != want {
			t.Fatalf("%s: %d failed, want %d (a 404 is the destination's own answer)", d.Dest, d.Failed, want)
		}
	}
	if len(n.Refusals) != 1 || n.Refusals[0].Cause != "egress_private_address" || n.Refusals[0].Path != "http://sneaky.test:80/" {
		t.Fatalf("refusals: %+v", n.Refusals)
	}
}
