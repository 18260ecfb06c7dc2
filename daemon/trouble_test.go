package daemon

import (
	"lazy/api"
	"strings"
	"testing"
	"time"
)

func TestTroubleTracksFailingCalls(t *testing.T) {
	var events []api.Event
	tr := publishing{&trouble{}, func(e api.Event) { events = append(events, e) }}
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	fail := api.Traffic{Time: t0, TaskID: "t1", TaskRef: "one", Status: 502, Error: "dial tcp 127.0.0.1:1: connect: connection refused"}
	tr.record(fail)
	fail.Time = t0.Add(time.Second)
	tr.record(fail)
	tr.record(api.Traffic{TaskID: "t2", Status: 503, Upstream: "api.example"})
	if got := tr.of("t1"); !strings.Contains(got, "connection refused (2 calls failed since 2026-11-24T12:00:00Z)") {
		t.Fatalf("t1: %q", got)
	}
	if got := tr.of("t1"); !strings.HasPrefix(got, "model upstream unreachable: ") {
		t.Fatalf("t1 (no upstream answered): %q", got)
	}
	// an upstream that answers 5xx is failing, not unreachable
	if got := tr.of("t2"); !strings.Contains(got, "api.example answered 503") || !strings.HasPrefix(got, "model upstream failing: ") {
		t.Fatalf("t2: %q", got)
	}
	if len(events) != 2 || events[0].Kind != "model_error" || events[0].TaskRef != "one" {
		t.Fatalf("one event per streak: %+v", events)
	}
	tr.record(api.Traffic{TaskID: "t1", Status: 401}) // a refusal is not the upstream's failure, nor a recovery
	if tr.of("t1") == "" {
		t.Fatal("a 401 cleared the trouble")
	}
	tr.record(api.Traffic{TaskID: "t1", Status: 200})
	if got := tr.of("t1"); got != "" {
		t.Fatalf("a success must clear it: %q", got)
	}
	tr.record(api.Traffic{Status: 502, Error: "x"}) // unattributed: no task to tell
	if len(events) != 2 {
		t.Fatal("an unattributed failure made an event")
	}
}

// publishing is the trouble book as the daemon's proxy callback uses it:
// the event a record returns is published.
type publishing struct {
	*trouble
	publish func(api.Event)
}

func (p publishing) record(t api.Traffic) {
	if e := p.trouble.record(t); e != nil {
		p.publish(*e)
	}
}
