// Package etcdtest starts an etcd server of a test's own (Debian's
// etcd-server) on loopback ports, its data in a temporary folder. Without
// etcd a test skips, or fails when CI=true (make test installs it).
package etcdtest

import (
	"fmt"
	"lazy/internal/testsvc"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
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
	client, peer := testsvc.FreePort(t), testsvc.FreePort(t)
	s := &Server{Endpoint: fmt.Sprintf("127.0.0.1:%d", client)}
	s.cmd = exec.Command(bin,
		"--name", "lazy-test", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", "http://"+s.Endpoint, "--advertise-client-urls", "http://"+s.Endpoint,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
		"--initial-cluster", fmt.Sprintf("lazy-test=http://127.0.0.1:%d", peer),
		"--logger", "zap", "--log-level", "warn")
	testsvc.Start(t, s.cmd, dir, "etcd", syscall.SIGTERM, func() error {
		resp, err := http.Get("http://" + s.Endpoint + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("health: %s", resp.Status)
		}
		return nil
	})
	return s
}

// Stop ends the server (a test may stop it early to see lazy without it).
func (s *Server) Stop() { testsvc.Stop(s.cmd, syscall.SIGTERM) }
