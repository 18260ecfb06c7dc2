package proxy

import (
	"strings"
	"testing"
)

// TestReconfigure: a new config reaches the next request (another upstream,
// another no-grant rule), and a task that tripped a wire stays refused.
func TestReconfigure(t *testing.T) {
	a, b := newUpstream(t), newUpstream(t)
	f := newFixture(t, cfgFor(a.srv.URL, "provider"))
	f.writeCred("provider", realKey)
	hdr := f.key("t1")
	ph := NewPlaceholder("api_key", "")
	g := Grants{}
	for k, v := range *f.grants.Load() {
		g[k] = v
	}
	other := Grant{Placeholder: ph, TaskRef: "t2", TaskID: strings.Repeat("b", 32), EnvVar: "ANTHROPIC_API_KEY"}
	g[ph] = other
	f.grants.Store(&g)
	tripped := map[string]string{"x-api-key": ph}
	f.p.trip(&plan{grant: &other}, TripForeignPlaceholder)

	resp := f.do("POST", "/v1/messages", hdr, msgBody)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(a.Requests()) != 1 {
		t.Fatalf("before: %d, %d requests at a", resp.StatusCode, len(a.Requests()))
	}
	cfg := cfgFor(b.srv.URL, "provider")
	cfg.Proxy.NoGrant = "refuse"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := f.p.Reconfigure(&cfg); err != nil {
		t.Fatal(err)
	}
	resp = f.do("POST", "/v1/messages", hdr, msgBody)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(b.Requests()) != 1 || len(a.Requests()) != 1 {
		t.Fatalf("after: %d, %d requests at b, %d at a", resp.StatusCode, len(b.Requests()), len(a.Requests()))
	}
	if got := b.Requests()[0].Header.Get("x-api-key"); got != realKey {
		t.Fatalf("the new upstream got %q, not the real key", got)
	}
	resp = f.do("POST", "/v1/messages", nil, msgBody)
	resp.Body.Close()
	if resp.StatusCode == 200 || f.lastTraffic().Refused != CauseNoGrant {
		t.Fatalf("no_grant = refuse not applied: %d", resp.StatusCode)
	}
	resp = f.do("POST", "/v1/messages", tripped, msgBody)
	resp.Body.Close()
	if resp.StatusCode != 401 || f.lastTraffic().Refused != CauseUnknownPlaceholder {
		t.Fatalf("a tripped placeholder works after a reload: %d", resp.StatusCode)
	}
	bad := cfgFor("http://[::1", "provider")
	if err := f.p.Reconfigure(&bad); err == nil {
		t.Fatal("a bad upstream was taken")
	}
	resp = f.do("POST", "/v1/messages", hdr, msgBody)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(b.Requests()) != 2 {
		t.Fatalf("a refused config changed the routes: %d", resp.StatusCode)
	}
}
