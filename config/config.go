// Package config loads a project's settings: built-in defaults, then
// <root>/.lazy/config.toml, then environment overrides LAZY_<SECTION>__<KEY>,
// into one typed Config, and validates it so that a bad key is named at start.
//
// Where things live (the service home and the per-project state directory)
// is package api's (api.StatePaths), which the RPC client reads without koanf. config
// reads no environment of its own; callers pass the environment in. Other
// packages receive plain values from here and never import koanf.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"

	"lazy/api"
)

// Config is the whole of a project's settings.
type Config struct {
	Daemon      Daemon      `koanf:"daemon"`
	Agent       Agent       `koanf:"agent"`
	Credentials Credentials `koanf:"credentials"`
	Proxy       Proxy       `koanf:"proxy"`
	Models      Models      `koanf:"models"`
	Protect     Protect     `koanf:"protect"`
	Storage     Storage     `koanf:"storage"`
	Cluster     Cluster     `koanf:"cluster"`
	Sandbox     Sandbox     `koanf:"sandbox"`
	Setup       Setup       `koanf:"setup"`
	Egress      Egress      `koanf:"egress"`
	Tasks       Tasks       `koanf:"tasks"`
	Notify      Notify      `koanf:"notify"`
	Review      Review      `koanf:"review"`
}

// Review is the reviewer. Author ("Name <email>") is who an applied
// suggestion's commit is by; empty: the project's git user.name and
// user.email.
type Review struct {
	Author string `koanf:"author"`
}

// Tasks is what happens to tasks once they end (accepted or cancelled):
// their worktrees go at once; their branches stay KeepBranches (a
// duration, "168h" a week; "0s": none kept), then go too, their commits
// kept under refs/lazy/ended/ for the tasks' review pages.
type Tasks struct {
	KeepBranches string `koanf:"keep_branches"`
}

// Cluster makes several daemons one: a shared PostgreSQL store, membership
// through etcd, task actors as cluster grains (CONTRACT §11). Empty name: a
// single daemon.
type Cluster struct {
	Name string   `koanf:"name"`
	Etcd []string `koanf:"etcd"`
	// Advertise is HOST:PORT other members reach this one at (port 0: any
	// free port, fine when every member is on this machine)
	Advertise string `koanf:"advertise"`
	// Remote is the git remote task branches travel through
	Remote string `koanf:"remote"`
	// TLSCert, TLSKey and TLSCA (PEM files) make the links between members
	// mutual TLS: all three, or none (plaintext links)
	TLSCert string `koanf:"tls_cert"`
	TLSKey  string `koanf:"tls_key"`
	TLSCA   string `koanf:"tls_ca"`
}

// TLS reports whether the member links are mutual TLS.
func (c Cluster) TLS() bool { return c.TLSCert != "" }

// EtcdTLS reports whether etcd is reached over TLS (its endpoints are
// https://, and the member's certificate is its client certificate).
func (c Cluster) EtcdTLS() bool {
	for _, e := range c.Etcd {
		if strings.HasPrefix(e, "https://") {
			return true
		}
	}
	return false
}

// Enabled reports a cluster member.
func (c Cluster) Enabled() bool { return c.Name != "" }

// Daemon holds where the daemon listens.
type Daemon struct {
	PortWindow      []int  `koanf:"port_window"`
	DashboardPort   int    `koanf:"dashboard_port"`
	DashboardListen string `koanf:"dashboard_listen"`
	ProxyListen     string `koanf:"proxy_listen"`
}

// Agent selects how agent turns run.
type Agent struct {
	Driver         string `koanf:"driver"`
	Command        string `koanf:"command"`
	Runner         string `koanf:"runner"`
	PermissionMode string `koanf:"permission_mode"`
	// ClientStream has the claude-code driver read claude's own stream
	// (`--output-format stream-json --verbose`) as the turn runs: tool
	// results and files written join the live transcript. Off (the
	// default) keeps CONTRACT §5's `--output-format json`.
	ClientStream bool   `koanf:"client_stream"`
	AskTimeout   string `koanf:"ask_timeout"`
	TurnTimeout  string `koanf:"turn_timeout"`
	DockerImage  string `koanf:"docker_image"`
	// MaxConcurrent bounds the agent processes running at once; more turns wait.
	MaxConcurrent int `koanf:"max_concurrent"`
	// BudgetTokens is a new task's token budget (input + output; 0: none).
	BudgetTokens int64 `koanf:"budget_tokens"`
}

// Credentials names the files that hold the real credentials.
type Credentials struct {
	Provider ProviderCredential `koanf:"provider"`
	Editor   EditorCredential   `koanf:"editor"`
	// OpenAI is the OpenAI API key the codex driver's calls get
	OpenAI EditorCredential `koanf:"openai"`
	// Gemini is the Gemini API key the proxy puts on the gemini driver's
	// calls (CONTRACT §16); default file <home>/credentials/gemini.
	Gemini EditorCredential `koanf:"gemini"`
}

// ProviderCredential is the real model-provider credential.
type ProviderCredential struct {
	Kind string `koanf:"kind"`
	File string `koanf:"file"`
}

// EditorCredential is the editor agent's real key.
type EditorCredential struct {
	File string `koanf:"file"`
}

// Proxy is the primary upstream and its fallbacks.
type Proxy struct {
	Upstream   string     `koanf:"upstream"`
	Credential string     `koanf:"credential"`
	Fallback   []Fallback `koanf:"fallback"`
	// EditorUpstream is where the editor agent's /_svc/<agent>/... traffic goes.
	EditorUpstream string `koanf:"editor_upstream"`
	// NoGrant is what happens to traffic that presents no placeholder:
	// "passthrough" (to the primary with exactly what the client presented,
	// nothing injected) or "refuse".
	NoGrant string `koanf:"no_grant"`
	// OpenAI is where OpenAI Responses traffic (POST /v1/responses, the
	// codex driver) goes; its credential "provider" is [credentials.openai]
	OpenAI Upstream `koanf:"openai"`
	// Gemini is where the Gemini routes (/v1beta/models/..., the gemini
	// driver) go; its credential "provider" is [credentials.gemini]
	Gemini Upstream `koanf:"gemini"`
}

// Upstream is one provider's upstream and its credential setting.
type Upstream struct {
	Upstream   string `koanf:"upstream"`
	Credential string `koanf:"credential"`
}

// GeminiUpstream is the default of proxy.gemini.upstream.
const GeminiUpstream = "https://generativelanguage.googleapis.com"

// CredentialGemini is how Targets records proxy.gemini's "provider": the
// Gemini key, another secret than credentials.provider, so an origin
// shared with an Anthropic target is a collision.
const CredentialGemini = "gemini"

// proxy.no_grant values.
const (
	NoGrantPassthrough = "passthrough"
	NoGrantRefuse      = "refuse"
)

// Agent runners. RunnerAuto is bwrap when it is installed; with no sandbox
// the daemon refuses to launch agents rather than run them unsandboxed.
const (
	RunnerAuto    = "auto"
	RunnerBwrap   = "bwrap"
	RunnerDocker  = "docker"
	RunnerProcess = "process"
)

// Fallback is one [[proxy.fallback]] entry.
type Fallback struct {
	Upstream   string `koanf:"upstream"`
	Credential string `koanf:"credential"`
}

// Models holds the role table.
type Models struct {
	Roles map[string]Role `koanf:"roles"`
}

// Role is one [models.roles.NAME] entry.
type Role struct {
	Endpoint   string `koanf:"endpoint"`
	Credential string `koanf:"credential"`
	Local      bool   `koanf:"local"`
}

// Protect lists paths whose changes need the approval passphrase.
type Protect struct {
	Paths []string `koanf:"paths"`
}

// Storage selects the store backend.
type Storage struct {
	Backend string `koanf:"backend"`
	// Sync is "full" (the default: every acknowledged write is on disk first
	// and survives a power cut) or "normal" (no fsync per write: survives a
	// crash of lazy, not of the machine; for disks whose fsync is slow).
	Sync string `koanf:"sync"`
	// DSN is the PostgreSQL database of backend "postgres" (a postgres://
	// URL or key=value string). Keep its password out of the project's
	// files: ~/.pgpass (passfile=) or LAZY_STORAGE__DSN.
	DSN string `koanf:"dsn"`
}

// Credential settings of an upstream target.
const (
	CredentialProvider = "provider"
	CredentialNone     = "none"
	// CredentialOpenAI is a target's credential in the origin map when it
	// is [credentials.openai] ([proxy.openai] credential = "provider")
	CredentialOpenAI = "openai"
)

// Provider credential kinds.
const (
	KindAPIKey    = "api_key"
	KindOAuth     = "oauth"
	KindAuthToken = "auth_token"
)

// Defaults returns the built-in settings every file and env var overrides:
// the one list of defaults (Load decodes the file and the environment onto
// it; TestDefaultsThroughLoad checks each arrives).
func Defaults() Config {
	return Config{
		Daemon: Daemon{PortWindow: []int{26000, 26099}},
		Agent: Agent{
			Driver:         "claude-code",
			Command:        "claude",
			Runner:         RunnerAuto,
			PermissionMode: "acceptEdits",
			AskTimeout:     "10m",
			TurnTimeout:    "60m",
			DockerImage:    "lazy-agent:latest",
			MaxConcurrent:  8,
		},
		Credentials: Credentials{Provider: ProviderCredential{Kind: KindAPIKey}},
		Proxy: Proxy{Upstream: "https://api.anthropic.com", Credential: CredentialNone, EditorUpstream: "https://api2.cursor.sh", NoGrant: NoGrantPassthrough,
			OpenAI: Upstream{Upstream: "https://api.openai.com", Credential: CredentialNone},
			Gemini: Upstream{Upstream: GeminiUpstream, Credential: CredentialNone}},
		Storage: Storage{Backend: "sql", Sync: "full"},
		Cluster: Cluster{Etcd: []string{"127.0.0.1:2379"}, Advertise: "127.0.0.1:0", Remote: "origin"},
		Protect: Protect{Paths: []string{".lazy/config.toml"}},
		Sandbox: SandboxDefaults,
		Tasks:   Tasks{KeepBranches: "168h"},
	}
}

// FileName is the project config path relative to the project root.
const FileName = ".lazy/config.toml"

// Load reads defaults, the project's config file (if present) and the
// LAZY_<SECTION>__<KEY> variables of environ, then validates the result.
func Load(root string, environ []string) (*Config, error) {
	k := koanf.New(".")
	path := filepath.Join(root, FileName)
	if _, err := os.Stat(path); err == nil {
		if err := k.Load(file.Provider(path), toml.Parser()); err != nil {
			return nil, fmt.Errorf("read %s: %w (fix the TOML syntax there)", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if err := k.Load(env.Provider(".", env.Opt{
		Prefix:        "LAZY_",
		TransformFunc: envKey,
		EnvironFunc:   func() []string { return environ },
	}), nil); err != nil {
		return nil, fmt.Errorf("read LAZY_ environment: %w", err)
	}
	// the file and the environment are decoded onto the defaults: a key
	// neither sets keeps its default
	cfg := Defaults()
	dc := &mapstructure.DecoderConfig{
		Result:           &cfg,
		TagName:          "koanf",
		WeaklyTypedInput: true,
		ErrorUnused:      false,
		Metadata:         &mapstructure.Metadata{},
		DecodeHook:       mapstructure.StringToSliceHookFunc(","),
	}
	if err := k.UnmarshalWithConf("", &cfg, koanf.UnmarshalConf{Tag: "koanf", DecoderConfig: dc}); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	unused := dc.Metadata.Unused
	if len(unused) > 0 {
		sort.Strings(unused)
		return nil, fmt.Errorf("config: unknown key %q in %s or LAZY_ env (known sections: daemon, agent, credentials, proxy, models, protect, storage, cluster, sandbox, setup, egress, tasks, notify)", unused[0], path)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// envKey maps LAZY_AGENT__ASK_TIMEOUT to agent.ask_timeout. Variables with no
// "__" (LAZY_HOME) are not settings and are skipped.
func envKey(k, v string) (string, any) {
	k = strings.TrimPrefix(k, "LAZY_")
	if !strings.Contains(k, "__") {
		return "", nil
	}
	key := strings.ToLower(strings.ReplaceAll(k, "__", "."))
	switch key {
	case "daemon.port_window", "protect.paths", "sandbox.read_only", "egress.allow":
		parts := strings.Split(v, ",")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		return key, parts
	}
	return key, v
}

// Validate checks every value and names the key that is wrong.
func (c *Config) Validate() error {
	if a := strings.TrimSpace(c.Review.Author); a != "" {
		if _, err := mail.ParseAddress(a); err != nil {
			return bad("review.author", "%q is not \"Name <email>\": %v", a, err)
		}
	}
	if len(c.Daemon.PortWindow) != 2 || c.Daemon.PortWindow[0] < 1 || c.Daemon.PortWindow[1] > 65535 || c.Daemon.PortWindow[0] > c.Daemon.PortWindow[1] {
		return bad("daemon.port_window", "want two ports [low, high] with 1 <= low <= high <= 65535, got %v", c.Daemon.PortWindow)
	}
	if c.Daemon.DashboardPort < 0 || c.Daemon.DashboardPort > 65535 {
		return bad("daemon.dashboard_port", "%d is not a port number", c.Daemon.DashboardPort)
	}
	if c.Daemon.DashboardListen != "" {
		if err := loopbackAddr(c.Daemon.DashboardListen); err != nil {
			return bad("daemon.dashboard_listen", "%v: the review surface has no authentication and binds to loopback only; use 127.0.0.1:PORT", err)
		}
	}
	if c.Daemon.ProxyListen != "" {
		if err := loopbackAddr(c.Daemon.ProxyListen); err != nil {
			return bad("daemon.proxy_listen", "%v: the proxy spends the real credential for whoever reaches it and binds to loopback only (sandboxed agents reach it through a Unix socket); use 127.0.0.1:PORT", err)
		}
	}
	if !KnownDriver(c.Agent.Driver) {
		return bad("agent.driver", "%q is not a driver; use %s", c.Agent.Driver, strings.Join(Drivers, ", "))
	}
	switch c.Agent.Runner {
	case RunnerAuto, RunnerBwrap, RunnerDocker, RunnerProcess:
	default:
		return bad("agent.runner", "%q is not a runner; use auto (bwrap when installed), bwrap, docker or process (no sandbox)", c.Agent.Runner)
	}
	switch c.Agent.PermissionMode {
	case "acceptEdits", "default", "plan":
	case "bypassPermissions":
		if c.Agent.Runner == RunnerProcess {
			return bad("agent.permission_mode", "bypassPermissions is allowed only inside a sandboxing runner; set agent.runner to auto, bwrap or docker")
		}
	default:
		return bad("agent.permission_mode", "%q is not a permission mode; use acceptEdits, default, plan or bypassPermissions", c.Agent.PermissionMode)
	}
	if c.Agent.MaxConcurrent < 1 || c.Agent.MaxConcurrent > 1024 {
		return bad("agent.max_concurrent", "%d is out of range: run between 1 and 1024 agents at once", c.Agent.MaxConcurrent)
	}
	if c.Agent.BudgetTokens < 0 {
		return bad("agent.budget_tokens", "%d is negative: give 0 (no budget) or the tokens a task may spend", c.Agent.BudgetTokens)
	}
	for key, v := range map[string]string{"agent.ask_timeout": c.Agent.AskTimeout, "agent.turn_timeout": c.Agent.TurnTimeout} {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return bad(key, "%q is not a positive duration (write it like \"10m\" or \"90s\")", v)
		}
	}
	if d, err := time.ParseDuration(c.Tasks.KeepBranches); err != nil || d < 0 {
		return bad("tasks.keep_branches", "%q is not a duration (write it like \"168h\" for a week, or \"0s\" to delete an ended task's branch at once)", c.Tasks.KeepBranches)
	}
	switch c.Credentials.Provider.Kind {
	case KindAPIKey, KindOAuth, KindAuthToken:
	default:
		return bad("credentials.provider.kind", "%q is not a credential kind; use api_key, oauth or auth_token", c.Credentials.Provider.Kind)
	}
	if err := checkUpstream("proxy.upstream", c.Proxy.Upstream, c.Proxy.Credential, "proxy.credential"); err != nil {
		return err
	}
	if err := checkUpstream("proxy.gemini.upstream", c.Proxy.Gemini.Upstream, c.Proxy.Gemini.Credential, "proxy.gemini.credential"); err != nil {
		return err
	}
	if err := checkUpstream("proxy.editor_upstream", c.Proxy.EditorUpstream, "", ""); err != nil {
		return err
	}
	if err := checkUpstream("proxy.openai.upstream", c.Proxy.OpenAI.Upstream, c.Proxy.OpenAI.Credential, "proxy.openai.credential"); err != nil {
		return err
	}
	switch c.Proxy.NoGrant {
	case NoGrantPassthrough, NoGrantRefuse:
	default:
		return bad("proxy.no_grant", "%q is not a setting; use \"passthrough\" (traffic with no placeholder goes to the primary as presented, nothing injected) or \"refuse\"", c.Proxy.NoGrant)
	}
	for i, f := range c.Proxy.Fallback {
		if err := checkUpstream(fmt.Sprintf("proxy.fallback[%d].upstream", i), f.Upstream, f.Credential, fmt.Sprintf("proxy.fallback[%d].credential", i)); err != nil {
			return err
		}
	}
	for name, r := range c.Models.Roles {
		if err := checkUpstream("models.roles."+name+".endpoint", r.Endpoint, r.Credential, "models.roles."+name+".credential"); err != nil {
			return err
		}
	}
	switch c.Storage.Backend {
	case "sql", "file":
		if c.Storage.DSN != "" {
			return bad("storage.dsn", "is read only with backend = \"postgres\" (backend is %q): remove it or set the backend", c.Storage.Backend)
		}
	case "postgres":
		if strings.TrimSpace(c.Storage.DSN) == "" {
			return bad("storage.dsn", "is empty: backend \"postgres\" needs the database, e.g. postgres://lazy@127.0.0.1:5432/lazy (the password in ~/.pgpass or LAZY_STORAGE__DSN, not in this file)")
		}
		if _, err := pgconn.ParseConfig(c.Storage.DSN); err != nil {
			// pgconn's parse errors carry no password
			return bad("storage.dsn", "is not a PostgreSQL connection string: %v", err)
		}
	default:
		return bad("storage.backend", "%q is not a backend; use sql, file or postgres", c.Storage.Backend)
	}
	if err := c.Cluster.validate(c.Storage.Backend); err != nil {
		return err
	}
	switch c.Storage.Sync {
	case "full", "normal":
	default:
		return bad("storage.sync", "%q is not a sync mode; use full (survives a power cut) or normal (survives a crash of lazy only)", c.Storage.Sync)
	}
	if err := c.Sandbox.validate(); err != nil {
		return err
	}
	if err := c.Setup.validate(); err != nil {
		return err
	}
	if err := c.Egress.validate(); err != nil {
		return err
	}
	if err := c.Notify.validate(); err != nil {
		return err
	}
	if _, err := c.Targets(); err != nil {
		return err
	}
	return nil
}

func checkUpstream(key, raw, cred, credKey string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("config: %s: %q is not an http(s) URL like https://api.example.com", key, raw)
	}
	switch cred {
	case "", CredentialNone, CredentialProvider:
	default:
		return fmt.Errorf("config: %s: %q is not a credential setting; use \"provider\" or \"none\"", credKey, cred)
	}
	return nil
}

func (cl Cluster) validate(backend string) error {
	if !cl.Enabled() {
		return nil
	}
	if !clusterName.MatchString(cl.Name) {
		return bad("cluster.name", "%q: use letters, digits, '-' and '_' (up to 64)", cl.Name)
	}
	if backend != "postgres" {
		return bad("cluster.name", "a cluster shares one store: set storage.backend = \"postgres\" and storage.dsn on every member")
	}
	if len(cl.Etcd) == 0 {
		return bad("cluster.etcd", "is empty: list the etcd endpoints, e.g. [\"127.0.0.1:2379\"]")
	}
	for _, e := range cl.Etcd {
		hp, secure := strings.CutPrefix(e, "https://")
		if _, _, err := net.SplitHostPort(hp); err != nil {
			return bad("cluster.etcd", "%q is not HOST:PORT or https://HOST:PORT", e)
		}
		if secure && cl.TLSCert == "" {
			return bad("cluster.etcd", "%q: a member reaches an https etcd with its own certificate: set cluster.tls_cert, tls_key and tls_ca (`lazy cluster cert` makes them)", e)
		}
	}
	host, port, err := net.SplitHostPort(cl.Advertise)
	if err != nil || host == "" {
		return bad("cluster.advertise", "%q is not HOST:PORT (the address other members reach this one at)", cl.Advertise)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return bad("cluster.advertise", "port %q is not a port", port)
	}
	if strings.TrimSpace(cl.Remote) == "" {
		return bad("cluster.remote", "is empty: name the git remote task branches travel through (default origin)")
	}
	set := 0
	for _, f := range []string{cl.TLSCert, cl.TLSKey, cl.TLSCA} {
		if f != "" {
			set++
		}
	}
	if set != 0 && set != 3 {
		return bad("cluster.tls_cert", "tls_cert, tls_key and tls_ca go together: set all three (`lazy cluster cert` makes them) or none")
	}
	for key, f := range map[string]string{"cluster.tls_cert": cl.TLSCert, "cluster.tls_key": cl.TLSKey, "cluster.tls_ca": cl.TLSCA} {
		if f == "" {
			continue
		}
		if !filepath.IsAbs(f) {
			return bad(key, "%q: give an absolute path (each member keeps its own files)", f)
		}
		if _, err := os.Stat(f); err != nil {
			return bad(key, "%v", err)
		}
	}
	return nil
}

// bad is a refused setting: the key, then what is wrong and what to do.
func bad(key, format string, a ...any) error {
	return fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, a...))
}

var clusterName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// CheckLoopback refuses a HOST:PORT that is not on the loopback interface.
func CheckLoopback(hostport string) error { return loopbackAddr(hostport) }

func loopbackAddr(hostport string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("%q is not HOST:PORT", hostport)
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address", host)
	}
	return nil
}

// AskTimeoutDuration is agent.ask_timeout as a duration (validated by Load).
func (c *Config) AskTimeoutDuration() time.Duration {
	d, _ := time.ParseDuration(c.Agent.AskTimeout)
	return d
}

// KeepBranchesDuration is tasks.keep_branches as a duration (validated by
// Load).
func (c *Config) KeepBranchesDuration() time.Duration {
	d, _ := time.ParseDuration(c.Tasks.KeepBranches)
	return d
}

// TurnTimeoutDuration is agent.turn_timeout as a duration (validated by Load).
func (c *Config) TurnTimeoutDuration() time.Duration {
	d, _ := time.ParseDuration(c.Agent.TurnTimeout)
	return d
}

// Target is one upstream origin the proxy may call, with its credential setting.
type Target struct {
	Origin     string // scheme://host:port
	URL        *url.URL
	Credential string // provider | none
	Source     string // the config key that declared it
}

// Origin returns scheme://host:port of raw, with the default port made explicit,
// so that two upstreams differing only in path are the same target.
func Origin(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(host, port), nil
}

// Targets builds the origin → credential map from the primary, the fallbacks
// and the role endpoints. An origin declared "none" that collides with an
// already-credentialed one is refused: there is no silent inheritance.
func (c *Config) Targets() (map[string]Target, error) {
	out := map[string]Target{}
	add := func(source, raw, cred string) error {
		if cred == "" {
			cred = CredentialNone
		}
		o, err := Origin(raw)
		if err != nil {
			return fmt.Errorf("config: %s: %w", source, err)
		}
		u, _ := url.Parse(raw)
		if prev, ok := out[o]; ok {
			if prev.Credential != cred {
				return fmt.Errorf("config: %s declares credential = %q for %s, but %s already declares credential = %q for the same origin; give both the same credential setting (there is no silent inheritance)", source, cred, o, prev.Source, prev.Credential)
			}
			return nil
		}
		out[o] = Target{Origin: o, URL: u, Credential: cred, Source: source}
		return nil
	}
	if err := add("proxy.upstream", c.Proxy.Upstream, c.Proxy.Credential); err != nil {
		return nil, err
	}
	openai := c.Proxy.OpenAI.Credential
	if openai == CredentialProvider {
		openai = CredentialOpenAI // that section's own credential
	}
	if err := add("proxy.openai", c.Proxy.OpenAI.Upstream, openai); err != nil {
		return nil, err
	}
	for i, f := range c.Proxy.Fallback {
		if err := add(fmt.Sprintf("proxy.fallback[%d]", i), f.Upstream, f.Credential); err != nil {
			return nil, err
		}
	}
	gcred := c.Proxy.Gemini.Credential
	if gcred == CredentialProvider {
		gcred = CredentialGemini
	}
	if err := add("proxy.gemini", c.Proxy.Gemini.Upstream, gcred); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(c.Models.Roles))
	for n := range c.Models.Roles {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		r := c.Models.Roles[n]
		if err := add("models.roles."+n, r.Endpoint, r.Credential); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ExpandPath resolves a leading "~/" against the user's home directory.
// An empty path stays empty.
func ExpandPath(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, rest)
		}
	}
	return p
}

// ProviderCredentialFile is the configured provider credential file, or
// <home>/credentials/provider when none is configured.
func (c *Config) ProviderCredentialFile(home string) string {
	if c.Credentials.Provider.File != "" {
		return ExpandPath(c.Credentials.Provider.File)
	}
	return filepath.Join(api.CredentialsDir(home), "provider")
}

// EditorCredentialFile is the configured editor key file, or
// <home>/credentials/editor when none is configured.
func (c *Config) EditorCredentialFile(home string) string {
	if c.Credentials.Editor.File != "" {
		return ExpandPath(c.Credentials.Editor.File)
	}
	return filepath.Join(api.CredentialsDir(home), "editor")
}

// OpenAICredentialFile is the configured OpenAI key file, or
// <home>/credentials/openai when none is configured.
func (c *Config) OpenAICredentialFile(home string) string {
	if c.Credentials.OpenAI.File != "" {
		return ExpandPath(c.Credentials.OpenAI.File)
	}
	return filepath.Join(api.CredentialsDir(home), "openai")
}

// Drivers are the agent drivers (agent.driver, lazy task new --driver).
var Drivers = []string{"claude-code", "codex", "gemini", "script"}

// KnownDriver reports a driver name lazy has.
func KnownDriver(name string) bool {
	for _, d := range Drivers {
		if d == name {
			return true
		}
	}
	return false
}

// GeminiCredentialFile is the configured Gemini key file, or
// <home>/credentials/gemini when none is configured.
func (c *Config) GeminiCredentialFile(home string) string {
	if c.Credentials.Gemini.File != "" {
		return ExpandPath(c.Credentials.Gemini.File)
	}
	return filepath.Join(api.CredentialsDir(home), "gemini")
}

// PortRange returns the port window as numbers.
func (c *Config) PortRange() (int, int) { return c.Daemon.PortWindow[0], c.Daemon.PortWindow[1] }

// Changed lists the keys (section.key, as in the file) whose values differ
// between a and b, in the order of the Config struct.
func Changed(a, b *Config) []string {
	var out []string
	var walk func(prefix string, x, y reflect.Value)
	walk = func(prefix string, x, y reflect.Value) {
		if x.Kind() != reflect.Struct {
			if !reflect.DeepEqual(x.Interface(), y.Interface()) {
				out = append(out, prefix)
			}
			return
		}
		for i := 0; i < x.NumField(); i++ {
			key := x.Type().Field(i).Tag.Get("koanf")
			if prefix != "" {
				key = prefix + "." + key
			}
			walk(key, x.Field(i), y.Field(i))
		}
	}
	walk("", reflect.ValueOf(*a), reflect.ValueOf(*b))
	return out
}

// LiveKey reports whether a running daemon can apply a change of key to
// its next turn or request. The rest (where it listens, its store, its
// slot count) take a restart.
func LiveKey(key string) bool {
	switch {
	case strings.HasPrefix(key, "daemon."), strings.HasPrefix(key, "storage."), strings.HasPrefix(key, "cluster."), key == "agent.max_concurrent":
		return false
	}
	return true
}
