package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEgressThroughTheDaemon: under the default sandbox an agent reaches
// the network only through its task's proxy socket, and only what
// [egress] allow lists: a loopback server listed by its exact host:port
// answers; a name that resolves to loopback without its host:port listed
// (localhost, listed by name only) is refused egress_private_address; a
// name not listed is refused egress_not_allowed. Each connection is a
// `lazy watch --net` line of the task, and the review page's network
// section lists the destination with its bytes and both refusals — after
// a restart of the daemon too.
func TestEgressThroughTheDaemon(t *testing.T) {
	requireBwrap(t)
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello egress") }))
	defer dest.Close()
	_, port, _ := net.SplitHostPort(dest.Listener.Addr().String())
	p := newProject(t, "")
	cfgPath := filepath.Join(p.root, ".lazy", "config.toml")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg = append(cfg, fmt.Sprintf("[egress]\nallow = [\"127.0.0.1:%s\", \"localhost\"]\n", port)...)
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	p.lazy(0, "daemon", "start")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lines := p.watchNet(ctx)

	listed := "http://127.0.0.1:" + port + "/ok"
	private := "http://localhost:" + port + "/private"
	other := "http://elsewhere.invalid/x"
	p.lazy(0, "task", "new", "--code", "net", "-m", fmt.Sprintf("@fetch %s\n@fetch %s\n@fetch %s\n@answer fetched", listed, private, other))
	ti := p.waitStatus("net", "blocked")
	turns := p.page("/tasks/" + ti.ID)
	if !strings.Contains(turns, "(fetch "+listed+": 200, 12 bytes)") || !strings.Contains(turns, "(fetch "+private+": 403 refused: egress_private_address)") ||
		!strings.Contains(turns, "(fetch "+other+": 403 refused: egress_not_allowed)") {
		t.Errorf("what the agent saw:\n%s", grepLines(turns, "fetch"))
	}

	want := []string{
		" net - GET " + listed + " -> 200 0/12 ",
		" net - GET " + "http://localhost:" + port + "/private -> 403 0/",
		" net - GET " + "http://elsewhere.invalid:80/x -> 403 0/",
	}
	got := strings.Join(collect(lines, 3*time.Second), "\n")
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("watch --net lacks %q:\n%s", w, got)
		}
	}
	for _, cause := range []string{"refused: egress_private_address", "refused: egress_not_allowed"} {
		if !strings.Contains(got, cause) {
			t.Errorf("watch --net lacks %q:\n%s", cause, got)
		}
	}

	checkPage := func(when string) {
		t.Helper()
		page := p.page("/review/" + ti.ID)
		i := strings.Index(page, `data-section="network"`)
		if i < 0 {
			t.Fatalf("%s: the review page has no network section", when)
		}
		sec := page[i:]
		sec = sec[:strings.Index(sec, "</div>")]
		for _, w := range []string{"<code>127.0.0.1:" + port + "</code></td><td>1</td><td>0 B</td><td>12 B</td>", "egress_private_address", "egress_not_allowed",
			"GET http://localhost:" + port + "/private", "GET http://elsewhere.invalid:80/x"} {
			if !strings.Contains(sec, w) {
				t.Errorf("%s: the network section lacks %q:\n%s", when, w, sec)
			}
		}
	}
	checkPage("running")
	p.lazy(0, "daemon", "stop")
	p.lazy(0, "daemon", "start")
	checkPage("after a restart")
}
