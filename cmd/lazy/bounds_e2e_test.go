package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"lazy/proxy"
)

// TestStalledBodiesBoundMemory: eight clients with a live placeholder each
// send 30 MiB of a body (a primary with a fallback, so the proxy would hold
// bodies to replay them) and then stall. The daemon's resident memory stays
// under 130 MB: 64 MiB of replay budget and the daemon itself (about 30 MB).
// It was 374 MB before the budget, every body held whole.
func TestStalledBodiesBoundMemory(t *testing.T) {
	p := newProject(t, "process")
	cfg, _ := os.ReadFile(filepath.Join(p.root, ".lazy", "config.toml"))
	cfgText := string(cfg) + fmt.Sprintf("\n[[proxy.fallback]]\nupstream = %q\ncredential = \"provider\"\n", p.upstream+"/fallback")
	if err := os.WriteFile(filepath.Join(p.root, ".lazy", "config.toml"), []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	p.lazy(0, "daemon", "start")
	p.lazy(0, "task", "new", "-m", "@answer idle", "--code", "big")
	p.waitStatus("big", "blocked")
	grants, err := proxy.LoadGrants(p.paths.ProxyTokens)
	if err != nil || len(grants) == 0 {
		t.Fatalf("grants: %v %v", grants, err)
	}
	var ph string
	for k := range grants {
		ph = k
	}
	info := p.info()
	addr := strings.TrimPrefix(info.ProxyURL, "http://")
	const size = 30 << 20
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = 'x'
	}
	var conns []net.Conn
	for i := 0; i < 8; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, ph, size)
		for sent := 0; sent < size-len(chunk); sent += len(chunk) {
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(chunk); err != nil {
				break // the proxy stopped reading: it streams this one on
			}
		}
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	time.Sleep(500 * time.Millisecond) // let the daemon take in what was sent
	rss := rssMB(t, info.PID)
	t.Logf("daemon RSS with 8 stalled 30 MiB bodies: %.0f MB", rss)
	if rss > 130 {
		t.Fatalf("daemon RSS %.0f MB with 8 stalled bodies, want under 130 MB", rss)
	}
}

func rssMB(t *testing.T, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
