package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSandboxBuildsGoOffline: a Go project with one dependency builds and
// runs its tests inside the default sandbox, with no network, when
// sandbox.read_only names a module cache filled beforehand; without the
// cache the same build fails for want of the module (so the cache is what
// made it work, not a way out).
func TestSandboxBuildsGoOffline(t *testing.T) {
	requireBwrap(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain")
	}
	env := func(k string) string {
		out, err := exec.Command(goBin, "env", k).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	modcache, goroot := env("GOMODCACHE"), env("GOROOT")
	// fill the cache beforehand, as a user would (`go mod download`)
	const dep = "golang.org/x/sync@v0.24.0"
	if out, err := exec.Command(goBin, "mod", "download", dep).CombinedOutput(); err != nil {
		t.Fatalf("fill the module cache: %v\n%s", err, out)
	}
	wt := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/app\n\ngo 1.22\n\nrequire golang.org/x/sync v0.24.0\n",
		"go.sum": "golang.org/x/sync v0.24.0 h1:iqiDrGoDgyuvAKrhLQthUEzU/R378N78gXbBjxed7oA=\n" +
			"golang.org/x/sync v0.24.0/go.mod h1:sUUOizhqBxiL6pEWpqNLUiaJn1ShEbZ6BBqskPbjZm0=\n",
		"app.go": "package app\n\nimport \"golang.org/x/sync/errgroup\"\n\n// Sum adds in parallel.\nfunc Sum(a, b int) int {\n\tvar g errgroup.Group\n" +
			"\tvar x, y int\n\tg.Go(func() error { x = a; return nil })\n\tg.Go(func() error { y = b; return nil })\n\t_ = g.Wait()\n\treturn x + y\n}\n",
		"app_test.go": "package app\n\nimport \"testing\"\n\nfunc TestSum(t *testing.T) {\n\tif Sum(2, 3) != 5 {\n\t\tt.Fatal(\"sum\")\n\t}\n}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(wt, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(share []string, modcache string) (string, error) {
		home := filepath.Join(t.TempDir(), "home")
		if modcache == "" {
			modcache = filepath.Join(home, "go", "pkg", "mod") // empty
		}
		if err := os.MkdirAll(home, 0o700); err != nil {
			t.Fatal(err)
		}
		e := newTurnEnv(t)
		s := Spec{Command: []string{"/bin/sh", "-c", "go test -count=1 ./... 2>&1"}, Dir: wt, Home: home,
			Env: []string{"PATH=" + filepath.Join(goroot, "bin") + ":/usr/bin:/bin", "HOME=" + home, "GOMODCACHE=" + modcache,
				"GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local", "GOCACHE=" + filepath.Join(home, ".cache", "go-build")},
			Share: share, Timeout: 3 * time.Minute, Limits: Limits{OpenFiles: 4096, Procs: 2048, Memory: 8 << 30},
			ProxySocket: e.socket, ProxyPort: e.port, Self: self(t)[0]}
		if !underAny(goroot, SystemDirs) {
			s.Share = append(s.Share, goroot)
		}
		out, err := Bwrap{}.Run(context.Background(), s)
		return out.Combined(), err
	}
	out, err := run([]string{modcache}, modcache)
	if err != nil || !strings.Contains(out, "ok  \texample.com/app") {
		t.Fatalf("the build and tests inside the sandbox: %v\n%s", err, out)
	}
	out, err = run(nil, "")
	if err == nil || !strings.Contains(out, "golang.org/x/sync") {
		t.Fatalf("without the shared cache the build must fail for want of the module: %v\n%s", err, out)
	}
}
