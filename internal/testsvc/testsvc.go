// Package testsvc runs a server a test needs (PostgreSQL, etcd) as a child
// process: its output in a log file, started, waited for until it answers,
// and stopped when the test ends.
package testsvc

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Start runs cmd with its output in dir/name.log, stops it (sig, then a
// kill after 10 s) when t ends, and waits up to 30 s for ready to succeed.
func Start(t testing.TB, cmd *exec.Cmd, dir, name string, sig syscall.Signal, ready func() error) {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() { Stop(cmd, sig) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := ready()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("%s did not answer in 30 s: %v\n%s", name, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop ends a server started by Start (it may be stopped early).
func Stop(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd == nil || cmd.Process == nil || cmd.ProcessState != nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// FreePort is a TCP port on 127.0.0.1 free at the time of the call.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
