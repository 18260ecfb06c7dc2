package layers

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// deps lists what pkg (the last of args) compiles: itself and every
// package it imports, transitively (`go list -deps`), one line each.
func deps(t *testing.T, args ...string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go list needs the go command on PATH: %v", err)
	}
	out, err := exec.Command(goBin, append([]string{"list", "-deps"}, args...)...).Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
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

// clientMay is all of lazy the RPC client may compile besides itself: the
// wire types (api, where daemon.json and the auth token are among them),
// and what they are made of (review's threads and rules, task's refs and
// states, errkind's kinds: api imports review, review imports task and
// errkind, each on the standard library alone). Everything else it compiles
// must be the standard library: no other module (koanf, echo, GORM,
// protoactor, chroma) and no other package of lazy (config,
// store, actors, the daemon).
var clientMay = []string{"lazy/client", "lazy/api", "lazy/review", "lazy/task", "lazy/errkind"}

// outside is what pkg compiles that is neither the standard library nor
// one of allowed.
func outside(t *testing.T, pkg string, allowed []string) []string {
	t.Helper()
	var bad []string
	for _, line := range deps(t, "-f", "{{.ImportPath}} {{.Standard}}", pkg) {
		path, std, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("go list -deps -f: unexpected line %q", line)
		}
		if std != "true" && !slices.Contains(allowed, path) {
			bad = append(bad, path)
		}
	}
	return bad
}

// belowTheCommands is what the web layer must not reach: it calls typed
// commands (api.Cmd) and reads errors by their kind (errkind), so the task
// actors, git and storage stay the daemon's.
var belowTheCommands = []string{"lazy/actors", "lazy/gitx", "lazy/store", "lazy/daemon", "lazy/supervisor", "lazy/grain", "gorm.io", "github.com/asynkron/protoactor-go"}

func TestClientCompilesNoServer(t *testing.T) {
	if bad := outside(t, "lazy/client", clientMay); len(bad) > 0 {
		t.Errorf("lazy/client compiles %v: the client takes only package api (its types, and the state paths api.StatePaths) and the leaves api is made of, beside the standard library; never config (koanf) nor anything of the daemon", bad)
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
	// the client's rule: config is outside it, and koanf, a module of its
	// own, is not taken for the standard library
	bad := outside(t, "lazy/config", clientMay)
	for _, p := range []string{"lazy/config", "github.com/knadh/koanf/v2"} {
		if !slices.Contains(bad, p) {
			t.Errorf("outside(lazy/config) = %v, want %s among them: the client's rule cannot see it", bad, p)
		}
	}
	if bad := outside(t, "lazy/client", clientMay[:1]); !slices.Contains(bad, "lazy/api") {
		t.Errorf("outside(lazy/client) with only itself allowed = %v, want lazy/api among them", bad)
	}
}
