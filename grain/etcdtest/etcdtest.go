// Package etcdtest starts an etcd server of a test's own (Debian's
// etcd-server) on loopback ports, its data in a temporary folder. Without
// etcd a test skips, or fails when CI=true (make test installs it).
package etcdtest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Server is one running etcd.
type Server struct {
	Endpoint string // host:port of the client URL
	cmd      *exec.Cmd
}

// Start runs a fresh single-member etcd for t and stops it when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("etcd is not installed: make test installs Debian's etcd-server")
		}
		t.Skip("etcd is not installed: apt-get install etcd-server (make test does)")
	}
	dir := t.TempDir()
	client, peer := freePort(t), freePort(t)
	s := &Server{Endpoint: fmt.Sprintf("127.0.0.1:%d", client)}
	s.cmd = exec.Command(bin,
		"--name", "lazy-test", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", "http://"+s.Endpoint, "--advertise-client-urls", "http://"+s.Endpoint,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
		"--initial-cluster", fmt.Sprintf("lazy-test=http://127.0.0.1:%d", peer),
		"--logger", "zap", "--log-level", "warn")
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(s.Stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + s.Endpoint + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
			t.Fatalf("etcd did not answer in 30 s: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop ends the server (a test may stop it early to see lazy without it).
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil || s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
