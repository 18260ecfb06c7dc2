package main

import (
	"bufio"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lazy/proxy"
)

// TestCanary: under the default runner, an agent that reads the SSH key
// in its home and puts it into its next prompt is refused before the call
// leaves — the stub upstream sees nothing — and its task trips the wire
// `canary`; an agent that reads nothing is not refused. After a restart the
// daemon still knows each task's decoys: one leaked by a process in no
// sandbox is refused too, and trips the task it was made for.
func TestCanary(t *testing.T) {
	requireBwrap(t)
	p := newProject(t, "")
	p.lazy(0, "daemon", "start")

	p.lazy(0, "task", "new", "-m", "summarise my key\n@readsend ~/.ssh/id_ed25519\n@answer sent", "--code", "thief")
	ti := p.waitStatus("thief", "failed")
	if n := len(p.stub.Requests()); n != 0 {
		r := p.stub.Requests()[0]
		t.Fatalf("the stub upstream saw %d requests of the thief: %s %s with %d bytes of body", n, r.Method, r.Path, len(r.Body))
	}
	if !strings.Contains(ti.Tripwire, proxy.TripCanary) || !strings.Contains(ti.FailReason, "403") {
		t.Fatalf("the thief: tripwire %q, fail reason %q", ti.Tripwire, ti.FailReason)
	}
	if out := p.lazy(0, "task", "show", "thief"); !strings.Contains(out, "tripwire: "+proxy.TripCanary) {
		t.Errorf("task show must say so:\n%s", out)
	}
	key, err := os.ReadFile(filepath.Join(p.paths.Agents, "thief", "home", ".ssh", "id_ed25519"))
	if err != nil || !strings.HasPrefix(string(key), "-----BEGIN OPENSSH PRIVATE KEY-----\n") {
		t.Fatalf("the SSH decoy: %v\n%s", err, key)
	}
	waitLog(t, p, "thief", "tripwire: "+proxy.TripCanary)

	p.lazy(0, "task", "new", "-m", writeAndCommit, "--code", "honest")
	if ti := p.waitStatus("honest", "blocked"); ti.Tripwire != "" {
		t.Fatalf("the control task tripped %q", ti.Tripwire)
	}
	reqs := p.stub.Requests()
	if len(reqs) == 0 {
		t.Fatal("the control task never reached the upstream")
	}
	lines := strings.Split(strings.TrimSpace(string(key)), "\n")
	for _, r := range reqs {
		for _, l := range lines[2 : len(lines)-1] {
			if strings.Contains(string(r.Body), l) {
				t.Fatalf("the upstream got a line of the SSH decoy")
			}
		}
	}

	// a restart: the decoys are derived again, the same, and looked for
	// before the task's next turn
	aws, err := os.ReadFile(filepath.Join(p.paths.Agents, "honest", "home", ".aws", "credentials"))
	if err != nil {
		t.Fatal(err)
	}
	secret := ""
	sc := bufio.NewScanner(strings.NewReader(string(aws)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "aws_secret_access_key = "); ok {
			secret = v
		}
	}
	if len(secret) != 40 {
		t.Fatalf("aws credentials decoy: %q", aws)
	}
	p.lazy(0, "daemon", "stop")
	p.lazy(0, "daemon", "start")
	before := len(p.stub.Requests())
	resp, err := http.Post(p.info().ProxyURL+"/v1/messages", "application/json", strings.NewReader(`{"messages":[{"role":"user","content":"`+secret+`"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || len(p.stub.Requests()) != before {
		t.Fatalf("a decoy after a restart: status %d, upstream requests %d → %d", resp.StatusCode, before, len(p.stub.Requests()))
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.show("honest").Tripwire, proxy.TripCanary) {
		if time.Now().After(deadline) {
			t.Fatalf("the decoy's task records no tripwire: %+v", p.show("honest"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitLog waits for a traffic line of the task holding want in the daemon
// log.
func waitLog(t *testing.T, p *project, ref, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(p.paths.Log)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "net> ") && strings.Contains(l, " "+ref+" ") && strings.Contains(l, want) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no traffic line of %s with %q in %s", ref, want, p.paths.Log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
