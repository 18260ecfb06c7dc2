package agent

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lazy/api"
	"lazy/config"
	"lazy/proxy"
)

// goModuleProxy is a package registry of the test's own: a loopback server
// speaking the Go module proxy protocol (/<module>/@v/list, .info, .mod,
// .zip) for one module the test makes.
type goModuleProxy struct {
	srv  *httptest.Server
	hits atomic.Int64
}

func newGoModuleProxy(t *testing.T, module, version string, files map[string]string) *goModuleProxy {
	t.Helper()
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	for name, body := range files { // module zip: every path under module@version/
		w, err := zw.Create(module + "@" + version + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	m := &goModuleProxy{}
	base := "/" + module + "/@v/"
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.hits.Add(1)
		switch r.URL.Path {
		case base + "list":
			fmt.Fprintln(w, version)
		case base + version + ".info":
			fmt.Fprintf(w, `{"Version":%q,"Time":"2024-01-02T03:04:05Z"}`, version)
		case base + version + ".mod":
			fmt.Fprint(w, files["go.mod"])
		case base + version + ".zip":
			w.Header().Set("Content-Type", "application/zip")
			_, _ = w.Write(zb.Bytes())
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(m.srv.Close)
	return m
}

// TestSandboxBuildsGoThroughEgress: a Go project with a dependency builds
// and runs its tests inside the default sandbox, fetching the dependency
// from a registry of the test's own through the proxy (HTTP_PROXY → the
// forwarder → the task's socket → egress), because egress.allow lists the
// registry's exact host:port (it is on loopback). A name under a listed
// wildcard that resolves to loopback is refused (egress_private_address),
// a name not listed is refused (egress_not_allowed), and a tool that
// ignores the proxy variables reaches nothing: each refusal is a traffic
// line of the task.
func TestSandboxBuildsGoThroughEgress(t *testing.T) {
	requireBwrap(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain")
	}
	gr, err := exec.Command(goBin, "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	goroot := strings.TrimSpace(string(gr))

	reg := newGoModuleProxy(t, "example.org/greet", "v1.0.0", map[string]string{
		"go.mod":   "module example.org/greet\n\ngo 1.22\n",
		"greet.go": "// Package greet greets.\npackage greet\n\n// Hello greets who.\nfunc Hello(who string) string { return \"hello, \" + who }\n",
	})
	_, regPort, _ := net.SplitHostPort(reg.srv.Listener.Addr().String())
	registry := "registry.test:" + regPort

	// the proxy, as the daemon runs it, with names resolved by the test
	cfg := config.Defaults()
	cfg.Agent.Runner = config.RunnerBwrap
	cfg.Egress.Allow = []string{registry, "*.lab.test"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []api.Traffic
	var grants atomic.Pointer[proxy.Grants]
	grants.Store(&proxy.Grants{})
	loopback := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	prx, err := proxy.New(proxy.Options{Config: &cfg, Home: t.TempDir(), Grants: &grants,
		Publish: func(tr api.Traffic) { mu.Lock(); lines = append(lines, tr); mu.Unlock() },
		Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			switch host {
			case "registry.test", "sneaky.lab.test":
				return loopback, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}})
	if err != nil {
		t.Fatal(err)
	}
	sockets, err := proxy.NewSockets(prx, filepath.Join(shortTemp(t), "s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sockets.Close() })
	const taskID, ref = "0123456789abcdef0123456789abcdef", "gobuild"
	sock, release, err := sockets.Open(taskID, ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)

	wt := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":      "module example.com/app\n\ngo 1.22\n\nrequire example.org/greet v1.0.0\n",
		"app.go":      "package app\n\nimport \"example.org/greet\"\n\n// Greeting greets the world.\nfunc Greeting() string { return greet.Hello(\"world\") }\n",
		"app_test.go": "package app\n\nimport \"testing\"\n\nfunc TestGreeting(t *testing.T) {\n\tif got := Greeting(); got != \"hello, world\" {\n\t\tt.Fatal(got)\n\t}\n}\n",
	} {
		if err := os.WriteFile(filepath.Join(wt, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const port = 26011 // the forwarder's port on the sandbox's own loopback
	run := func(goproxy, script string) (string, error) {
		home := filepath.Join(t.TempDir(), "home")
		if err := os.MkdirAll(home, 0o700); err != nil {
			t.Fatal(err)
		}
		env := append([]string{"PATH=" + filepath.Join(goroot, "bin") + ":/usr/bin:/bin", "HOME=" + home,
			"GOMODCACHE=" + filepath.Join(home, "go", "pkg", "mod"), "GOCACHE=" + filepath.Join(home, ".cache", "go-build"),
			"GOPROXY=" + goproxy, "GOFLAGS=-mod=mod", "GONOSUMDB=*", "GONOSUMCHECK=1", "GOSUMDB=off", "GOTOOLCHAIN=local"},
			ProxyEnv(port)...)
		s := Spec{Command: []string{"/bin/sh", "-c", script}, Dir: wt, Home: home, Env: env,
			Timeout: 3 * time.Minute, Limits: Limits{OpenFiles: 4096, Procs: 2048, Memory: 8 << 30},
			ProxySocket: sock, ProxyPort: port, Self: self(t)[0]}
		if !underAny(goroot, SystemDirs) {
			s.Share = append(s.Share, goroot)
		}
		o, err := Bwrap{}.Run(context.Background(), s)
		return o.Combined(), err
	}
	taskLines := func(method, dest string) []api.Traffic {
		mu.Lock()
		defer mu.Unlock()
		var out []api.Traffic
		for _, tr := range lines {
			if tr.Egress && tr.TaskID == taskID && tr.Method == method && tr.Dest == dest {
				out = append(out, tr)
			}
		}
		return out
	}

	// the build, through egress
	out, err := run("http://"+registry, "go test -count=1 ./... 2>&1")
	if err != nil || !strings.Contains(out, "ok  \texample.com/app") {
		t.Fatalf("the build and tests inside the sandbox through egress: %v\n%s", err, out)
	}
	got := taskLines("GET", registry)
	if len(got) == 0 || reg.hits.Load() == 0 {
		t.Fatalf("no egress line for the registry (%d hits there)", reg.hits.Load())
	}
	for _, tr := range got {
		if tr.Status != 200 || tr.Refused != "" || tr.BytesDown == 0 {
			t.Fatalf("a registry call: %s", tr.Line())
		}
	}
	t.Logf("%d calls to the registry, e.g. %s", len(got), got[len(got)-1].Line())

	// a tool that ignores the proxy variables: nothing but loopback
	hits := reg.hits.Load()
	out, err = run("http://"+registry, "rm -f go.sum; unset HTTP_PROXY http_proxy HTTPS_PROXY https_proxy; go mod download -x example.org/greet 2>&1")
	if err == nil || reg.hits.Load() != hits {
		t.Fatalf("a fetch that ignores the proxy variables must reach nothing: %v\n%s", err, out)
	}

	// a name under the listed wildcard that resolves to loopback: refused
	sneaky := "sneaky.lab.test:" + regPort
	out, err = run("http://"+sneaky, "rm -f go.sum; go mod download example.org/greet 2>&1")
	if err == nil || !strings.Contains(out, "403") {
		t.Fatalf("a name resolving to loopback, not listed exactly: %v\n%s", err, out)
	}
	if got := taskLines("GET", sneaky); len(got) == 0 || got[0].Refused != proxy.CauseEgressPrivate || !strings.HasSuffix(got[0].Line(), " refused: egress_private_address") {
		t.Fatalf("want an egress_private_address line, got %v", got)
	}
	// a name not listed: refused
	other := "elsewhere.example:" + regPort
	out, err = run("http://"+other, "rm -f go.sum; go mod download example.org/greet 2>&1")
	if err == nil || !strings.Contains(out, "403") {
		t.Fatalf("a name not listed: %v\n%s", err, out)
	}
	if got := taskLines("GET", other); len(got) == 0 || got[0].Refused != proxy.CauseEgressNotAllowed {
		t.Fatalf("want an egress_not_allowed line, got %v", got)
	}
	if reg.hits.Load() != hits {
		t.Fatalf("a refused destination reached the registry")
	}
	// CONNECT to a name not listed, from curl inside the sandbox, if present
	if _, err := exec.LookPath("curl"); err == nil {
		out, err = run("off", "curl -sS -o /dev/null -w '%{http_code}' https://elsewhere.example/ 2>&1")
		if err == nil || !strings.Contains(out, "403") {
			t.Fatalf("curl CONNECT to a name not listed: %v\n%s", err, out)
		}
		if got := taskLines("CONNECT", "elsewhere.example:443"); len(got) == 0 || got[0].Refused != proxy.CauseEgressNotAllowed {
			t.Fatalf("want a CONNECT egress_not_allowed line, got %v", got)
		}
	}
}
