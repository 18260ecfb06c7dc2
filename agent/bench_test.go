package agent

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkSandboxStart is the cost a turn pays to start its sandbox:
// lazy's sandbox (user namespace, seccomp, the allowlist with its masks,
// the forwarder), beside bwrap's old shape (the host read-only, no user
// namespace) and a plain process, each running /bin/true.
func BenchmarkSandboxStart(b *testing.B) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		b.Skip("no bwrap")
	}
	home, wt, sd := b.TempDir(), b.TempDir(), b.TempDir()
	ln, err := net.Listen("unix", filepath.Join(sd, "p.sock"))
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	spec := Spec{Command: []string{"/bin/true"}, Dir: wt, Home: home, Env: []string{"PATH=/usr/bin:/bin"}, Timeout: time.Minute,
		Limits: Limits{OpenFiles: 4096, Procs: 2048, Memory: 8 << 30}, ProxySocket: ln.Addr().String(), ProxyPort: 26001}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("lazy sandbox", func(b *testing.B) {
		s := spec
		s.Self = exe
		for b.Loop() {
			if out, err := (Bwrap{}).Run(context.Background(), s); err != nil {
				b.Fatalf("%v %s", err, out.Combined())
			}
		}
	})
	b.Run("bwrap, host read-only, as before this change", func(b *testing.B) {
		for b.Loop() {
			if out, err := exec.Command("bwrap", "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--new-session",
				"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/run", "--tmpfs", "/tmp", "--bind", wt, wt, "--bind", home, home,
				"--bind", spec.ProxySocket, "/run/lazy/proxy.sock", "--ro-bind", exe, "/run/lazy/lazy", "--chdir", wt, "--",
				"/run/lazy/lazy", "sandbox-exec", "--listen", "127.0.0.1:26001", "--socket", "/run/lazy/proxy.sock", "--", "/bin/true").CombinedOutput(); err != nil {
				b.Fatalf("%v %s", err, out)
			}
		}
	})
	b.Run("process", func(b *testing.B) {
		for b.Loop() {
			if out, err := (Process{}).Run(context.Background(), spec); err != nil {
				b.Fatalf("%v %s", err, out.Combined())
			}
		}
	})
}
