package layers

import (
	"os/exec"
	"strings"
	"testing"
)

// deps lists what pkg compiles: itself and every package it imports,
// transitively (`go list -deps`).
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go list needs the go command on PATH: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}

// forbidden is what of deps falls under one of the prefixes.
func forbidden(deps, prefixes []string) []string {
	var bad []string
	for _, d := range deps {
		for _, p := range prefixes {
			if d == p || strings.HasPrefix(d, p+"/") {
				bad = append(bad, d)
				break
			}
		}
	}
	return bad
}

// theServer is what a process that only calls the daemon must not
// compile: the web framework, the ORM, the actor system, the highlighter
// and the daemon's own packages.
var theServer = []string{
	"github.com/labstack/echo", "gorm.io", "github.com/asynkron/protoactor-go", "github.com/alecthomas/chroma",
	"lazy/actors", "lazy/store", "lazy/httpapi", "lazy/daemon", "lazy/supervisor", "lazy/gitx", "lazy/grain", "lazy/views",
}

// belowTheCommands is what the web layer must not reach: it calls typed
// commands (api.Cmd) and reads errors by their kind (errkind), so the task
// actors, git and storage stay the daemon's.
var belowTheCommands = []string{"lazy/actors", "lazy/gitx", "lazy/store", "lazy/daemon", "lazy/supervisor", "lazy/grain", "gorm.io", "github.com/asynkron/protoactor-go"}

func TestClientCompilesNoServer(t *testing.T) {
	if bad := forbidden(deps(t, "lazy/client"), theServer); len(bad) > 0 {
		t.Errorf("lazy/client compiles server packages %v: the client takes only package api's types (wire types and errkind), never the daemon's", bad)
	}
}

func TestHTTPAPIReachesNoDomain(t *testing.T) {
	if bad := forbidden(deps(t, "lazy/httpapi"), belowTheCommands); len(bad) > 0 {
		t.Errorf("lazy/httpapi compiles %v: pages call typed commands through api.Caller and map errors by errkind; conversions from rows belong to the daemon", bad)
	}
}

// TestTheRulesSeeImports: the same check over the daemon, which compiles
// all of it, finds what the rules forbid (a rule that matched nothing would
// pass whatever came back).
func TestTheRulesSeeImports(t *testing.T) {
	d := deps(t, "lazy/daemon")
	for _, p := range []string{"github.com/labstack/echo", "gorm.io", "github.com/asynkron/protoactor-go", "github.com/alecthomas/chroma",
		"lazy/actors", "lazy/store", "lazy/httpapi", "lazy/gitx"} {
		if len(forbidden(d, []string{p})) == 0 {
			t.Errorf("lazy/daemon compiles nothing under %s: the rule cannot see it", p)
		}
	}
}
