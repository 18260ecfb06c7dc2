package forwarder

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// CgroupExec is `lazy cgroup-exec PROCS... -- ARGV`: the process joins each
// control group (its pid written into each cgroup.procs file) and execs
// ARGV, so everything ARGV starts is in the groups from its first
// instruction (the daemon starts bwrap this way; see agent/cgroup.go).
func CgroupExec(args []string, stderr io.Writer) int {
	var procs []string
	for i, a := range args {
		if a != "--" {
			procs = append(procs, a)
			continue
		}
		argv := args[i+1:]
		if len(argv) == 0 {
			break
		}
		pid := []byte(strconv.Itoa(os.Getpid()))
		for _, p := range procs {
			if err := os.WriteFile(p, pid, 0o644); err != nil {
				fmt.Fprintf(stderr, "lazy cgroup-exec: join %s: %v\n", p, err)
				return 126
			}
		}
		path, err := exec.LookPath(argv[0])
		if err == nil {
			err = syscall.Exec(path, argv, os.Environ())
		}
		fmt.Fprintf(stderr, "lazy cgroup-exec: exec %s: %v\n", argv[0], err)
		return 127
	}
	fmt.Fprintln(stderr, "lazy cgroup-exec: want CGROUP_PROCS_FILE... -- ARGV (it is started by the daemon)")
	return 2
}

// Alloc is `<test binary> sandbox-alloc MIB`: it allocates and touches MIB
// mebibytes, then prints "allocated"; tests use it to meet a memory bound.
func Alloc(args []string, stdout io.Writer) int {
	if len(args) != 1 {
		return 2
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 0 {
		return 2
	}
	keep := make([][]byte, 0, n)
	for i := 0; i < n; i++ {
		b := make([]byte, 1<<20)
		for j := range b {
			if j%4096 == 0 {
				b[j] = 1
			}
		}
		keep = append(keep, b)
	}
	fmt.Fprintf(stdout, "allocated %d MiB\n", len(keep))
	return 0
}
