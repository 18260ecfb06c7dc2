// Package forwarder is `lazy sandbox-exec`, the first process inside an
// agent's sandbox.
package forwarder

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The forwarder runs first inside the sandbox (it is the lazy binary itself,
// `lazy sandbox-exec`). The sandbox has its own network namespace with only
// loopback, so the agent can reach nothing; the forwarder listens on the
// sandbox's loopback at the port ANTHROPIC_BASE_URL names and copies each
// connection to the proxy's Unix socket, bound into the sandbox. Then it runs
// the agent and exits with its status.

// Socket is where the proxy's Unix socket appears inside a sandbox,
// and Self where the lazy binary does.
const (
	Socket = "/run/lazy/proxy.sock"
	Self   = "/run/lazy/lazy"
)

// Args are the arguments after the binary: the forwarder's flags (the
// rlimits as NAME=VALUE, NAME one of nofile, nproc, as) and then the
// agent's argv.
func Args(port int, rlimits []string, argv []string) []string {
	args := []string{"sandbox-exec", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--socket", Socket}
	for _, r := range rlimits {
		args = append(args, "--rlimit", r)
	}
	return append(append(args, "--"), argv...)
}

// rlimitNames are the limits --rlimit sets.
var rlimitNames = map[string]int{"nofile": unix.RLIMIT_NOFILE, "nproc": unix.RLIMIT_NPROC, "as": unix.RLIMIT_AS}

// Main is `lazy sandbox-exec --listen ADDR --socket PATH [--rlimit NAME=N]... -- ARGV...`.
func Main(args []string, stderr io.Writer) int {
	var listen, socket string
	var argv []string
	type limit struct {
		res int
		n   uint64
	}
	var limits []limit
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--listen", "--socket", "--rlimit":
			if i+1 >= len(args) {
				fmt.Fprintf(stderr, "lazy sandbox-exec: %s needs a value\n", args[i])
				return 2
			}
			switch args[i] {
			case "--listen":
				listen = args[i+1]
			case "--socket":
				socket = args[i+1]
			default:
				name, val, _ := strings.Cut(args[i+1], "=")
				res, ok := rlimitNames[name]
				n, err := strconv.ParseUint(val, 10, 64)
				if !ok || err != nil {
					fmt.Fprintf(stderr, "lazy sandbox-exec: --rlimit %q: want nofile=N, nproc=N or as=N\n", args[i+1])
					return 2
				}
				limits = append(limits, limit{res, n})
			}
			i++
		case "--":
			argv = args[i+1:]
			i = len(args)
		default:
			fmt.Fprintf(stderr, "lazy sandbox-exec: unknown argument %q (want --listen ADDR --socket PATH -- ARGV)\n", args[i])
			return 2
		}
	}
	if listen == "" || socket == "" || len(argv) == 0 {
		fmt.Fprintln(stderr, "lazy sandbox-exec: want --listen ADDR --socket PATH -- ARGV (it is started by the daemon inside the sandbox)")
		return 2
	}
	// the limits bind the forwarder and everything it starts: set before
	// the agent exists, they cannot be raised from inside (no capability)
	for _, l := range limits {
		if err := unix.Setrlimit(l.res, &unix.Rlimit{Cur: l.n, Max: l.n}); err != nil {
			fmt.Fprintf(stderr, "lazy sandbox-exec: set the sandbox's limit %d to %d: %v\n", l.res, l.n, err)
			return 1
		}
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Fprintf(stderr, "lazy sandbox-exec: listen on %s inside the sandbox: %v\n", listen, err)
		return 1
	}
	go forward(ln, socket, stderr)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "lazy sandbox-exec: start %s: %v\n", argv[0], err)
		return 127
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		fmt.Fprintf(stderr, "lazy sandbox-exec: %v\n", err)
		return 1
	}
	return 0
}

func forward(ln net.Listener, socket string, stderr io.Writer) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("unix", socket)
			if err != nil {
				fmt.Fprintf(stderr, "lazy sandbox-exec: the proxy socket %s does not answer: %v\n", socket, err)
				return
			}
			defer u.Close()
			done := make(chan struct{}, 2)
			pipe := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				if cw, ok := dst.(interface{ CloseWrite() error }); ok {
					_ = cw.CloseWrite()
				}
				done <- struct{}{}
			}
			go pipe(u, c)
			go pipe(c, u)
			<-done
			<-done
		}()
	}
}
