// Package etcdtest starts an etcd server of a test's own (Debian's
// etcd-server) on loopback ports, its data in a temporary folder. Without
// etcd a test skips, or fails when CI=true (make test installs it).
package etcdtest

import (
	"crypto/tls"
	"fmt"
	"lazy/internal/testsvc"
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
	Endpoint string // host:port of the client URL (https://host:port with TLS)
	cmd      *exec.Cmd
	dir      string
	ready    func() error
	starts   int
}

// Start runs a fresh single-member etcd for t and stops it when t ends.
func Start(t testing.TB) *Server { return start(t, nil) }

// TLS is what an etcd serving https needs: its certificate and key, and
// the CA whose certificates it requires of every client.
type TLS struct {
	Cert, Key, CA string
	// Client is what the test's own readiness check presents
	Client *tls.Config
}

// StartTLS runs an etcd that serves https and takes only clients with a
// certificate of tc.CA; its Endpoint is then https://host:port.
func StartTLS(t testing.TB, tc *TLS) *Server { return start(t, tc) }

func start(t testing.TB, tc *TLS) *Server {
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
	hostport := fmt.Sprintf("127.0.0.1:%d", client)
	url, hc := "http://"+hostport, http.DefaultClient
	args := []string{"--name", "lazy-test", "--data-dir", filepath.Join(dir, "data"),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
		"--initial-cluster", fmt.Sprintf("lazy-test=http://127.0.0.1:%d", peer),
		"--logger", "zap", "--log-level", "warn"}
	s := &Server{Endpoint: hostport}
	if tc != nil {
		url = "https://" + hostport
		s.Endpoint = url
		args = append(args, "--cert-file", tc.Cert, "--key-file", tc.Key, "--client-cert-auth", "--trusted-ca-file", tc.CA)
		hc = &http.Client{Transport: &http.Transport{TLSClientConfig: tc.Client}}
	}
	args = append(args, "--listen-client-urls", url, "--advertise-client-urls", url)
	s.cmd = exec.Command(bin, args...)
	s.dir = dir
	s.ready = func() error {
		resp, err := hc.Get(url + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("health: %s", resp.Status)
		}
		return nil
	}
	s.starts = 1
	testsvc.Start(t, s.cmd, dir, "etcd", syscall.SIGTERM, s.ready)
	return s
}

// Restart starts a server that was stopped (Stop) again, on its own data
// and ports, and waits until it answers.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.cmd = exec.Command(s.cmd.Path, s.cmd.Args[1:]...)
	s.starts++
	testsvc.Start(t, s.cmd, s.dir, fmt.Sprintf("etcd-%d", s.starts), syscall.SIGTERM, s.ready)
}

// PID is the server's process.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Freeze stops the server's process (SIGSTOP) until Thaw: it answers
// nothing meanwhile, its connections stay open.
func (s *Server) Freeze() error { return s.cmd.Process.Signal(syscall.SIGSTOP) }

// Thaw lets a frozen server go on (SIGCONT).
func (s *Server) Thaw() error { return s.cmd.Process.Signal(syscall.SIGCONT) }

// Stop ends the server (a test may stop it early to see lazy without it).
func (s *Server) Stop() { testsvc.Stop(s.cmd, syscall.SIGTERM) }

// Pause stops the server's process for d and lets it go on (SIGSTOP, then
// SIGCONT): it answers nothing meanwhile, as when its disk or its machine
// stalls under load.
func (s *Server) Pause(d time.Duration) error {
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	time.Sleep(d)
	return s.cmd.Process.Signal(syscall.SIGCONT)
}
