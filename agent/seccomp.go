package agent

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"sync"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/net/bpf"
)

// The sandbox's seccomp filter. Allow by default, refuse what no coding
// agent needs and every way back to privilege or out of the sandbox: the
// same ground as Docker's and Flatpak's default profiles (mounts, new
// namespaces, keyrings, BPF, perf, ptrace and cross-process memory, kernel
// modules, clocks, io_uring, whose operations bypass seccomp). A refused
// call fails with EPERM, as an unprivileged user's would, so tools fall
// back instead of crashing.
//
// The filter is built with github.com/elastic/go-seccomp-bpf: pure Go (no
// cgo, no libseccomp on the build machine), kept by Elastic for Beats,
// where it guards production agents; it knows every architecture's
// syscall table and filters out the x32 ABI. lazy adds one guard the
// library leaves open under a default-allow policy: a call made through
// another architecture's ABI (int 0x80 on x86-64) is killed, not passed.

// refusedSyscalls fail with EPERM inside a sandbox.
var refusedSyscalls = []string{
	// filesystems and mounts
	"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
	"fsmount", "fspick", "mount_setattr", "quotactl", "quotactl_fd", "swapon", "swapoff",
	"open_by_handle_at", "name_to_handle_at",
	// namespaces
	"unshare", "setns",
	// keyrings
	"keyctl", "add_key", "request_key",
	// kernel interfaces an agent has no business with
	"bpf", "perf_event_open", "userfaultfd", "fanotify_init", "lookup_dcookie", "syslog",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot", "acct",
	"iopl", "ioperm", "vhangup",
	// other processes
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
	// clocks and names
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname",
	// io_uring runs operations outside this filter
	"io_uring_setup", "io_uring_enter", "io_uring_register",
}

// newNamespaceFlags are clone's CLONE_NEW* bits: a clone that asks for any
// is refused (threads and plain forks pass).
const newNamespaceFlags = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

// auditArchX8664 and auditArchAArch64 are the kernel's AUDIT_ARCH values.
const (
	auditArchX8664   = 0xc000003e
	auditArchAArch64 = 0xc00000b7
)

var (
	filterOnce sync.Once
	filterProg []byte
	filterErr  error
)

// SeccompProgram is the sandbox's filter as the kernel's sock_filter array
// (what `bwrap --seccomp FD` reads), built once.
func SeccompProgram() ([]byte, error) {
	filterOnce.Do(func() { filterProg, filterErr = buildSeccomp() })
	return filterProg, filterErr
}

func buildSeccomp() ([]byte, error) {
	var archID uint32
	switch runtime.GOARCH {
	case "amd64":
		archID = auditArchX8664
	case "arm64":
		archID = auditArchAArch64
	default:
		return nil, fmt.Errorf("no seccomp filter for %s: run agents with agent.runner = \"docker\" there", runtime.GOARCH)
	}
	policy := seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Names: refusedSyscalls, Action: seccomp.ActionErrno},
			{NamesWithCondtions: []seccomp.NameWithConditions{{Name: "clone", Conditions: seccomp.ArgumentConditions{
				{Argument: 0, Operation: seccomp.BitsSet, Value: newNamespaceFlags}}}}, Action: seccomp.ActionErrno},
			// clone3 passes its flags in memory a filter cannot read:
			// ENOSYS makes the C library fall back to clone, checked above
			{Names: []string{"clone3"}, Action: seccomp.ActionErrno | seccomp.Action(38)},
		},
	}
	body, err := policy.Assemble()
	if err != nil {
		return nil, fmt.Errorf("build the sandbox's seccomp filter: %w", err)
	}
	// a call through another architecture's ABI is killed before the
	// library's program, whose default for it is the policy's default
	prog := append([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: archID, SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionKillProcess)},
	}, body...)
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("assemble the sandbox's seccomp filter: %w", err)
	}
	out := make([]byte, 0, 8*len(raw))
	for _, in := range raw {
		out = binary.NativeEndian.AppendUint16(out, in.Op)
		out = append(out, in.Jt, in.Jf)
		out = binary.NativeEndian.AppendUint32(out, in.K)
	}
	return out, nil
}

// seccompFile is a pipe whose read end holds the filter, for bwrap's
// --seccomp; the caller closes it once bwrap has started.
func seccompFile() (*os.File, error) {
	prog, err := SeccompProgram()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("seccomp filter pipe: %w", err)
	}
	// a pipe holds 64 KiB before a write blocks; the filter is a few KiB
	if _, err := w.Write(prog); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("write the seccomp filter: %w", err)
	}
	w.Close()
	return r, nil
}
