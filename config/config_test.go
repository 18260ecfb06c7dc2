package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ".lazy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, FileName), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestLoadLayers(t *testing.T) {
	root := writeConfig(t, `
[agent]
driver = "script"
runner = "bwrap"
[models.roles.local]
endpoint = "http://127.0.0.1:11434"
local = true
`)
	cfg, err := Load(root, []string{"LAZY_AGENT__ASK_TIMEOUT=90s", "LAZY_HOME=/x", "LAZY_DAEMON__PORT_WINDOW=27000,27010", "LAZY_SANDBOX__MAX_CONNECTIONS=32"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Agent.Driver != "script" || cfg.Agent.Runner != "bwrap" {
		t.Errorf("file layer: got %+v", cfg.Agent)
	}
	if cfg.Agent.AskTimeout != "90s" || cfg.AskTimeoutDuration().Seconds() != 90 {
		t.Errorf("env layer: got ask_timeout %q", cfg.Agent.AskTimeout)
	}
	if cfg.Agent.Command != "claude" || cfg.Proxy.Upstream != "https://api.anthropic.com" {
		t.Errorf("defaults lost: %+v %+v", cfg.Agent, cfg.Proxy)
	}
	if got := cfg.Daemon.PortWindow; len(got) != 2 || got[0] != 27000 || got[1] != 27010 {
		t.Errorf("port window from env: got %v", got)
	}
	if cfg.Sandbox.MaxConnections != 32 {
		t.Errorf("sandbox.max_connections from env: got %d, want 32", cfg.Sandbox.MaxConnections)
	}
	if d := Defaults(); d.Sandbox.MaxConnections != 256 {
		t.Errorf("default sandbox.max_connections: got %d, want 256", d.Sandbox.MaxConnections)
	}
	if r := cfg.Models.Roles["local"]; !r.Local || r.Endpoint != "http://127.0.0.1:11434" {
		t.Errorf("role: got %+v", r)
	}
}

func TestLoadInitTemplate(t *testing.T) {
	root := t.TempDir()
	path, wrote, err := WriteInit(root)
	if err != nil || !wrote {
		t.Fatalf("WriteInit: %v %v", wrote, err)
	}
	if _, err := Load(root, nil); err != nil {
		t.Fatalf("the template must load: %v", err)
	}
	if _, wrote, _ := WriteInit(root); wrote {
		t.Errorf("second init overwrote %s", path)
	}
}

func TestLoadRefusals(t *testing.T) {
	cases := []struct {
		name, file string
		env        []string
		want       string
	}{
		{"unknown key", "[agent]\ndrivr = \"script\"\n", nil, `"agent.drivr"`},
		{"unknown section", "[agnet]\ndriver = \"script\"\n", nil, `"agnet"`},
		{"unknown env key", "", []string{"LAZY_AGENT__NOPE=1"}, `"agent.nope"`},
		{"bad duration", "[agent]\nask_timeout = \"ten minutes\"\n", nil, "agent.ask_timeout"},
		{"bad duration env", "", []string{"LAZY_AGENT__TURN_TIMEOUT=-1s"}, "agent.turn_timeout"},
		{"bad url", "[proxy]\nupstream = \"ftp://x\"\n", nil, "proxy.upstream"},
		{"bad role url", "[models.roles.coder]\nendpoint = \"not a url\"\n", nil, "models.roles.coder.endpoint"},
		{"bad driver", "[agent]\ndriver = \"gpt\"\n", nil, "agent.driver"},
		{"bad runner", "[agent]\nrunner = \"vm\"\n", nil, "agent.runner"},
		{"bad sync", "[storage]\nsync = \"sometimes\"\n", nil, "storage.sync"},
		{"bad sync env", "", []string{"LAZY_STORAGE__SYNC=off"}, "storage.sync"},
		{"dashboard not loopback", "[daemon]\ndashboard_listen = \"0.0.0.0:26010\"\n", nil, "loopback"},
		{"bypass without sandbox", "[agent]\nrunner = \"process\"\npermission_mode = \"bypassPermissions\"\n", nil, "sandboxing runner"},
		{"proxy not loopback", "[daemon]\nproxy_listen = \"0.0.0.0:26011\"\n", nil, "daemon.proxy_listen"},
		{"proxy on a LAN address", "", []string{"LAZY_DAEMON__PROXY_LISTEN=192.168.1.5:26011"}, "daemon.proxy_listen"},
		{"max_connections zero", "[sandbox]\nmax_connections = 0\n", nil, "sandbox.max_connections"},
		{"max_connections env", "", []string{"LAZY_SANDBOX__MAX_CONNECTIONS=1000000"}, "sandbox.max_connections"},
		{"bad no_grant", "[proxy]\nno_grant = \"inject\"\n", nil, "proxy.no_grant"},
		{"empty setup command", "[setup]\nrun = [\"make deps\", \"  \"]\n", nil, "setup.run: command 2 is empty"},
		{"egress URL", "[egress]\nallow = [\"ok.example\", \"https://reg.example/x\"]\n", nil, "egress.allow[1]"},
		{"egress bad port", "[egress]\nallow = [\"reg.example:99999\"]\n", nil, "egress.allow[0]"},
		{"egress wildcard TLD", "[egress]\nallow = [\"*.com\"]\n", nil, "top-level domain"},
		{"egress mid wildcard", "", []string{"LAZY_EGRESS__ALLOW=a.*.example"}, "egress.allow[0]"},
		{"collision", "[proxy]\nupstream = \"https://api.example.com/v1\"\ncredential = \"provider\"\n[[proxy.fallback]]\nupstream = \"https://api.example.com:443/other\"\ncredential = \"none\"\n", nil, "proxy.fallback[0]"},
		{"notify file URL", "[notify]\nwebhook = \"file:///etc/passwd\"\n", nil, "notify.webhook: scheme \"file\" is not http or https"},
		{"notify javascript URL", "", []string{"LAZY_NOTIFY__WEBHOOK=javascript:alert(1)"}, "notify.webhook"},
		{"notify no host", "[notify]\nwebhook = \"https:///s3cret\"\n", nil, "notify.webhook: names no host"},
		{"notify bad URL", "[notify]\nwebhook = \"https://h/%zz-s3cret\"\n", nil, "notify.webhook: is not a URL"},
		{"notify blank command", "[notify]\ncommand = \"   \"\n", nil, "notify.command"},
		{"toml syntax", "[agent\n", nil, "TOML"},
		{"postgres without dsn", "[storage]\nbackend = \"postgres\"\n", nil, "storage.dsn"},
		{"dsn without postgres", "[storage]\ndsn = \"postgres://lazy@db/lazy\"\n", nil, "storage.dsn"},
		{"bad dsn", "", []string{"LAZY_STORAGE__BACKEND=postgres", "LAZY_STORAGE__DSN=postgres://lazy:s3cret@db:notaport/lazy"}, "storage.dsn"},
		{"bad backend", "[storage]\nbackend = \"mongo\"\n", nil, "sql, file or postgres"},
		{"cluster without postgres", "[cluster]\nname = \"c1\"\n", nil, "storage.backend = \"postgres\""},
		{"cluster bad name", "[cluster]\nname = \"a b\"\n", nil, "cluster.name"},
		{"cluster bad etcd", "[storage]\nbackend = \"postgres\"\ndsn = \"postgres://x@h/d\"\n[cluster]\nname = \"c\"\netcd = [\"nohostport\"]\n", nil, "cluster.etcd"},
		{"cluster bad advertise", "", []string{"LAZY_STORAGE__BACKEND=postgres", "LAZY_STORAGE__DSN=postgres://x@h/d", "LAZY_CLUSTER__NAME=c", "LAZY_CLUSTER__ADVERTISE=:1"}, "cluster.advertise"},
		{"cluster https etcd without tls", "", []string{"LAZY_STORAGE__BACKEND=postgres", "LAZY_STORAGE__DSN=postgres://x@h/d", "LAZY_CLUSTER__NAME=c", "LAZY_CLUSTER__ETCD=https://10.0.0.9:2379"}, "its own certificate"},
		{"cluster etcd url path", "", []string{"LAZY_STORAGE__BACKEND=postgres", "LAZY_STORAGE__DSN=postgres://x@h/d", "LAZY_CLUSTER__NAME=c", "LAZY_CLUSTER__ETCD=http://10.0.0.9:2379"}, "https://HOST:PORT"},
		{"cluster tls half set", "", []string{"LAZY_STORAGE__BACKEND=postgres", "LAZY_STORAGE__DSN=postgres://x@h/d", "LAZY_CLUSTER__NAME=c", "LAZY_CLUSTER__TLS_CERT=/etc/hostname"}, "set all three"},
		{"cluster tls relative", "", []string{"LAZY_STORAGE__BACKEND=postgres", "LAZY_STORAGE__DSN=postgres://x@h/d", "LAZY_CLUSTER__NAME=c",
			"LAZY_CLUSTER__TLS_CERT=m.pem", "LAZY_CLUSTER__TLS_KEY=/etc/hostname", "LAZY_CLUSTER__TLS_CA=/etc/hostname"}, "absolute path"},
		{"cluster tls missing", "", []string{"LAZY_STORAGE__BACKEND=postgres", "LAZY_STORAGE__DSN=postgres://x@h/d", "LAZY_CLUSTER__NAME=c",
			"LAZY_CLUSTER__TLS_CERT=/nowhere/m.pem", "LAZY_CLUSTER__TLS_KEY=/etc/hostname", "LAZY_CLUSTER__TLS_CA=/etc/hostname"}, "cluster.tls_cert"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := writeConfig(t, tc.file)
			_, err := Load(root, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %s", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

func TestOriginAndTargets(t *testing.T) {
	a, _ := Origin("https://API.example.com/v1")
	b, _ := Origin("https://api.example.com:443/v2")
	if a != b || a != "https://api.example.com:443" {
		t.Errorf("got %q and %q, want the same origin", a, b)
	}
	cfg := Defaults()
	cfg.Proxy.Credential = CredentialProvider
	cfg.Models.Roles = map[string]Role{"coder": {Endpoint: "https://api.anthropic.com/x", Credential: CredentialProvider}}
	ts, err := cfg.Targets()
	if err != nil || len(ts) != 3 || ts["https://api.anthropic.com:443"].Credential != CredentialProvider {
		t.Fatalf("got %v %v, want one shared Anthropic target beside [proxy.openai]'s and [proxy.gemini]'s own", ts, err)
	}
}

// TestGeminiOriginCollision: proxy.gemini's "provider" is the Gemini key,
// another secret than credentials.provider, so it may not share an origin
// with a target that carries the Anthropic credential or none.
func TestGeminiOriginCollision(t *testing.T) {
	for _, cred := range []string{CredentialProvider, CredentialNone} {
		cfg := Defaults()
		cfg.Proxy.Upstream, cfg.Proxy.Credential = "http://127.0.0.1:9", cred
		cfg.Proxy.Gemini = Upstream{Upstream: "http://127.0.0.1:9/", Credential: CredentialProvider}
		if _, err := cfg.Targets(); err == nil || !strings.Contains(err.Error(), "proxy.gemini") {
			t.Errorf("proxy.upstream credential %q on the Gemini origin: got %v, want a collision naming proxy.gemini", cred, err)
		}
	}
	cfg := Defaults()
	cfg.Proxy.Gemini = Upstream{Upstream: "http://127.0.0.1:9", Credential: CredentialNone}
	cfg.Proxy.Upstream = "http://127.0.0.1:9"
	if _, err := cfg.Targets(); err != nil {
		t.Errorf("both none on one origin: got %v, want no collision", err)
	}
}

// FuzzConfigLoad loads arbitrary config files: an error or a config that
// validates, never a panic.
func FuzzConfigLoad(f *testing.F) {
	f.Add(Template)
	f.Add("[agent]\ndriver = \"script\"\n")
	f.Add("[[proxy.fallback]]\nupstream = \"http://x:1\"\ncredential = \"none\"\n")
	f.Add("[models.roles.a]\nendpoint = 1\n")
	f.Add("[daemon]\nport_window = [\"a\"]\n")
	f.Fuzz(func(t *testing.T, body string) {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, ".lazy"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, FileName), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(root, nil)
		if err == nil {
			if verr := cfg.Validate(); verr != nil {
				t.Fatalf("Load accepted a config Validate refuses: %v", verr)
			}
		}
	})
}

func TestChanged(t *testing.T) {
	a, b := Defaults(), Defaults()
	if got := Changed(&a, &b); len(got) != 0 {
		t.Fatalf("equal configs differ in %v", got)
	}
	b.Agent.Command = "other"
	b.Daemon.DashboardPort = 1
	b.Proxy.Fallback = []Fallback{{Upstream: "http://127.0.0.1:1"}}
	b.Credentials.Provider.Kind = KindOAuth
	b.Models.Roles = map[string]Role{"fast": {Endpoint: "http://127.0.0.1:2"}}
	got := strings.Join(Changed(&a, &b), " ")
	if want := "daemon.dashboard_port agent.command credentials.provider.kind proxy.fallback models.roles"; got != want {
		t.Fatalf("changed: %s, want %s", got, want)
	}
	for key, live := range map[string]bool{"agent.command": true, "proxy.upstream": true, "models.roles": true,
		"daemon.proxy_listen": false, "storage.backend": false, "agent.max_concurrent": false} {
		if LiveKey(key) != live {
			t.Errorf("LiveKey(%s) = %v", key, !live)
		}
	}
}

// uncommentCluster is the template with [cluster] switched on the way its
// comment (and docs/SCALE-OUT.md) says: the postgres backend with its dsn,
// and the "# " removed from the [cluster] block's lines.
func uncommentCluster(t *testing.T, tmpl string) string {
	t.Helper()
	lines := strings.Split(tmpl, "\n")
	in, found := false, false
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "backend = \"sql\""):
			lines[i] = strings.Replace(l, `"sql"`, `"postgres"`, 1)
		case strings.HasPrefix(l, "# dsn = "):
			lines[i] = strings.TrimPrefix(l, "# ")
		case strings.HasPrefix(l, "# [cluster]"):
			in, found = true, true
			lines[i] = strings.TrimPrefix(l, "# ")
		case in && strings.HasPrefix(l, "# "):
			lines[i] = strings.TrimPrefix(l, "# ")
		default:
			in = false
		}
	}
	if !found {
		t.Fatal("the template has no commented [cluster] block")
	}
	return strings.Join(lines, "\n")
}

// TestInitTemplateClusterUncommented: every key of the template sits
// under its own section, so [cluster] switched on as documented loads
// (sync once sat under the commented [cluster], and uncommenting it made
// "unknown key cluster.sync").
func TestInitTemplateClusterUncommented(t *testing.T) {
	body := uncommentCluster(t, Template)
	cfg, err := Load(writeConfig(t, body), nil)
	if err != nil {
		t.Fatalf("the template with [cluster] uncommented does not load: %v\n%s", err, body)
	}
	if !cfg.Cluster.Enabled() || cfg.Storage.Backend != "postgres" || cfg.Storage.Sync != "full" {
		t.Fatalf("got cluster %+v, storage %+v", cfg.Cluster, cfg.Storage)
	}
}

// TestNotifyCommandArgv: plain words run without a shell; a character a
// shell gives meaning to makes it sh -c.
func TestNotifyCommandArgv(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		want []string
	}{
		{"", nil},
		{"/usr/local/bin/on-notice --quiet", []string{"/usr/local/bin/on-notice", "--quiet"}},
		{"  tee  /tmp/n.json ", []string{"tee", "/tmp/n.json"}},
		{"cat >> ~/notices", []string{"sh", "-c", "cat >> ~/notices"}},
		{"curl -d @- \"$HOOK\"", []string{"sh", "-c", "curl -d @- \"$HOOK\""}},
		{"a; b", []string{"sh", "-c", "a; b"}},
	} {
		if got := (Notify{Command: tc.cmd}).CommandArgv(); !slices.Equal(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.cmd, got, tc.want)
		}
	}
}

// TestOpenAIUpstream: [proxy.openai] joins the origin map with its own
// credential ("openai"), and an origin another section declares with
// another credential is refused.
func TestOpenAIUpstream(t *testing.T) {
	c := Defaults()
	c.Agent.Driver = "codex"
	c.Proxy.OpenAI = Upstream{Upstream: "http://127.0.0.1:9999/", Credential: CredentialProvider}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	targets, err := c.Targets()
	if err != nil {
		t.Fatal(err)
	}
	if got := targets["http://127.0.0.1:9999"].Credential; got != CredentialOpenAI {
		t.Errorf("credential %q, want %q", got, CredentialOpenAI)
	}
	c.Proxy.Upstream, c.Proxy.Credential = "http://127.0.0.1:9999", CredentialProvider
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "proxy.openai") {
		t.Errorf("one origin with the Anthropic and the OpenAI key: %v", err)
	}
	c = Defaults()
	c.Proxy.OpenAI.Credential = "mine"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "proxy.openai.credential") {
		t.Errorf("a bad credential setting: %v", err)
	}
	if got := c.OpenAICredentialFile("/h"); got != "/h/credentials/openai" {
		t.Errorf("default OpenAI key file %s", got)
	}
}
