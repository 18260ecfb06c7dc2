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
	"syscall"
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

// Args are the arguments after the binary: the forwarder's flags
// and then the agent's argv.
func Args(port int, argv []string) []string {
	return append([]string{"sandbox-exec", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--socket", Socket, "--"}, argv...)
}

// Main is `lazy sandbox-exec --listen ADDR --socket PATH -- ARGV...`.
func Main(args []string, stderr io.Writer) int {
	var listen, socket string
	var argv []string
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--listen", "--socket":
			if i+1 >= len(args) {
				fmt.Fprintf(stderr, "lazy sandbox-exec: %s needs a value\n", args[i])
				return 2
			}
			if args[i] == "--listen" {
				listen = args[i+1]
			} else {
				socket = args[i+1]
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
