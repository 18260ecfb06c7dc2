// Package agent runs agent turns. A Driver builds the argv of a work turn or a
// read-only ask turn and parses the agent's result; a Runner starts that argv
// in the task's worktree with the placeholder environment (process, bwrap
// sandbox, or docker). It never sees a real credential: the env it is given
// holds placeholders only.
package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Result is what the agent reported at the end of a turn.
type Result struct {
	Text      string `json:"result"`
	SessionID string `json:"session_id"`
	IsError   bool   `json:"is_error"`
	// Driver and Command are the agent the launcher ran; Notice says why
	// the turn started a new conversation ("" : it resumed, or it was the
	// first). Set by the launcher, not parsed.
	Driver  string `json:"-"`
	Command string `json:"-"`
	Notice  string `json:"-"`
}

// Driver builds argv for one agent CLI and parses its result.
type Driver interface {
	Name() string
	// WorkArgv is a work turn; session is "" for the first turn. The
	// prompt goes on standard input: one argv string is capped at 128 KiB.
	WorkArgv(session string) []string
	// AskArgv is a read-only ask turn resuming session; the question goes
	// on standard input.
	AskArgv(session string) []string
	ParseResult(stdout []byte) (Result, error)
}

// ClaudeCode drives the `claude` CLI (and anything speaking its argv contract,
// such as the project's scripted agent).
type ClaudeCode struct {
	PermissionMode string // work turns; default acceptEdits
	// StreamJSON reads the client's own stream as the turn runs
	// (agent.client_stream): argv `--output-format stream-json --verbose`
	// instead of CONTRACT §5's `--output-format json`
	StreamJSON bool
}

var _ Driver = ClaudeCode{}

// Name is the driver's config name.
func (ClaudeCode) Name() string { return "claude-code" }

// WorkArgv: -p --output-format json [--resume S] --permission-mode MODE
// (CONTRACT §5), the prompt on standard input. With StreamJSON the format
// is `stream-json --verbose`: it ends in the same result object and before
// it reports the turn as it runs (tool results, files written), which the
// launcher reads as it arrives (Stream); `--verbose` is what claude
// requires of stream-json in print mode.
func (d ClaudeCode) WorkArgv(session string) []string {
	mode := d.PermissionMode
	if mode == "" {
		mode = "acceptEdits"
	}
	return claudeArgv(session, mode, d.StreamJSON)
}

// AskArgv: -p --output-format json --resume S --permission-mode plan (or
// stream-json as WorkArgv), the question on standard input.
func (d ClaudeCode) AskArgv(session string) []string {
	return claudeArgv(session, "plan", d.StreamJSON)
}

func claudeArgv(session, mode string, stream bool) []string {
	args := []string{"-p", "--output-format", "json"}
	if stream {
		args = []string{"-p", "--output-format", "stream-json", "--verbose"}
	}
	if session != "" {
		args = append(args, "--resume", session)
	}
	return append(args, "--permission-mode", mode)
}

var _ Streamer = ClaudeCode{}

// Stream reads the turn's stream-json as it arrives (stream.go); nil
// without StreamJSON (the JSON result is read when the turn ends).
func (d ClaudeCode) Stream(worktree string, ev ClientEvents) Stream {
	if !d.StreamJSON {
		return nil
	}
	return newClaudeStream(worktree, ev)
}

// ParseResult takes the last line of stdout that is a JSON object with a
// session id or result and is no other stream event than the result: the
// real client may print notices before it, and a stream read whole holds
// the session id on every event.
func (ClaudeCode) ParseResult(stdout []byte) (Result, error) {
	return parseLastJSON(stdout)
}

func parseLastJSON(stdout []byte) (Result, error) {
	lines := bytes.Split(stdout, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		l := bytes.TrimSpace(lines[i])
		if len(l) == 0 || l[0] != '{' {
			continue
		}
		var r Result
		var probe map[string]json.RawMessage
		if json.Unmarshal(l, &probe) != nil {
			continue
		}
		if t, ok := probe["type"]; ok && string(t) != `"result"` {
			continue // a stream event before the result
		}
		if _, ok := probe["session_id"]; !ok {
			if _, ok := probe["result"]; !ok {
				continue
			}
		}
		if err := json.Unmarshal(l, &r); err != nil {
			continue
		}
		return r, nil
	}
	return Result{}, fmt.Errorf("the agent printed no JSON result (%d bytes of output); see the turn's output", len(stdout))
}

// Script is the project's scripted agent: the same argv contract as
// claude-code, played by `lazy script-agent`.
type Script struct{ ClaudeCode }

// Name is the driver's config name.
func (Script) Name() string { return "script" }

// NewDriver returns the driver named in config.
func NewDriver(name, permissionMode string, clientStream bool) (Driver, error) {
	switch name {
	case "claude-code":
		return ClaudeCode{PermissionMode: permissionMode, StreamJSON: clientStream}, nil
	case "script":
		return Script{ClaudeCode{PermissionMode: permissionMode, StreamJSON: clientStream}}, nil
	case "codex":
		return Codex{}, nil
	case "gemini":
		return Gemini{PermissionMode: permissionMode}, nil
	}
	return nil, fmt.Errorf("agent.driver: unknown driver %q; use claude-code, codex, gemini or script", name)
}

// Errors runners return.
var (
	ErrTimeout     = errors.New("turn timed out")
	ErrUnavailable = errors.New("runner unavailable")
)

// Placeholder env vars, by credential kind (CONTRACT §5).
const (
	EnvOAuth     = "CLAUDE_CODE_OAUTH_TOKEN"
	EnvAPIKey    = "ANTHROPIC_API_KEY"
	EnvAuthToken = "ANTHROPIC_AUTH_TOKEN"
	EnvEditor    = "CURSOR_API_KEY"
	EnvBaseURL   = "ANTHROPIC_BASE_URL"
)

// passed are the only variables of the daemon's own env an agent gets.
var passed = []string{"PATH", "USER", "LANG", "TZ", "TERM"}

// Env builds an agent's whole environment: PATH, USER, LANG, TZ, TERM from
// the daemon's env, HOME = the per-task home, the proxy base URL, and the
// placeholders. Nothing else of daemonEnv passes.
func Env(daemonEnv []string, home, baseURL string, placeholders map[string]string) []string {
	var env []string
	for _, kv := range daemonEnv {
		k, _, _ := strings.Cut(kv, "=")
		for _, p := range passed {
			if k == p {
				env = append(env, kv)
			}
		}
	}
	env = append(env,
		"HOME="+home,
		"TMPDIR="+home+"/tmp",
		EnvBaseURL+"="+baseURL,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
	)
	keys := make([]string, 0, len(placeholders))
	for k := range placeholders {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+placeholders[k])
	}
	return env
}

// ProxyEnv points a sandboxed agent's tools at the proxy for egress
// (CONTRACT §15): the forwarder listens at port on the sandbox's own
// loopback, and the proxy lets a task reach only the hosts egress.allow
// lists. The model (ANTHROPIC_BASE_URL, on loopback) stays direct. A tool
// that ignores these variables reaches nothing: the sandbox's network
// namespace holds only its loopback.
func ProxyEnv(port int) []string {
	u := fmt.Sprintf("http://127.0.0.1:%d", port)
	return []string{"HTTPS_PROXY=" + u, "HTTP_PROXY=" + u, "https_proxy=" + u, "http_proxy=" + u,
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost"}
}

// Spec is one turn to run.
type Spec struct {
	Name     string   // e.g. "fix-login-3", for container names and logs
	Command  []string // executable and fixed leading args
	Args     []string // the driver's argv
	Stdin    []byte   // the prompt
	Dir      string   // the task worktree (cwd)
	Home     string   // the per-task HOME
	Env      []string // the whole environment (see Env)
	Timeout  time.Duration
	Ask      bool          // an ask turn: a sandbox shows the worktree read-only
	Share    []string      // host paths every sandbox shows read-only (sandbox.read_only)
	Limits   Limits        // the sandbox's limits (config [sandbox])
	Visible  []string      // further paths a sandbox shows read-only: the project's objects (the task repository's alternates, gitx.ForSandbox)
	Writable []string      // further paths a sandbox must leave writable (bound after Visible): the task repository in a work turn
	ReadOnly []string      // paths that stay read-only inside the writable ones (bound last): its config, hooks, info, alternates
	Hide     []string      // directories a sandbox hides even where a shown path holds them (lazy home, state dir)
	HideFile []string      // files a sandbox hides even where a shown path holds them (credential files)
	OnStart  func(pid int) // called with the agent's pid once it runs
	// Stdout, when set, also gets the agent's standard output as it
	// arrives (a streaming driver's Stream); it must not block.
	Stdout io.Writer
	// ProxySocket is the host path of the proxy's Unix socket; a sandbox
	// binds it in and runs the forwarder (Self, `lazy sandbox-exec`) that
	// listens on the sandbox's own loopback at ProxyPort.
	ProxySocket string
	ProxyPort   int
	Self        string
}

// Outcome is how a turn's process ended.
type Outcome struct {
	Stdout, Stderr []byte
	ExitCode       int
}

// Combined is stdout then stderr, for the turn record.
func (o Outcome) Combined() string {
	if len(o.Stderr) == 0 {
		return string(o.Stdout)
	}
	return string(o.Stdout) + "\n--- stderr ---\n" + string(o.Stderr)
}
