// Package agenttest lets a test binary play the scripted agent, so tests of
// packages that launch agents need no lazy binary.
package agenttest

import (
	"os"
	"testing"

	"lazy/agent/forwarder"
	"lazy/agent/inventory"
	"lazy/scriptagent"
)

// Main is a TestMain: run as `<test binary> script-agent ...` it is the
// scripted agent, as `<test binary> sandbox-exec ...` the sandbox's
// forwarder, as `<test binary> sandbox-inventory` the sandbox inventory; otherwise it runs the tests.
func Main(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "script-agent" {
		os.Exit(scriptagent.Main(os.Args[2:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "sandbox-exec" {
		os.Exit(forwarder.Main(os.Args[2:], os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "cgroup-exec" {
		os.Exit(forwarder.CgroupExec(os.Args[2:], os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "sandbox-alloc" {
		os.Exit(forwarder.Alloc(os.Args[2:], os.Stdout))
	}
	if len(os.Args) > 1 && os.Args[1] == "sandbox-inventory" {
		if err := inventory.Take(os.Args[2:]...).Write(os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
