package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"lazy/canary"
)

// Codex drives OpenAI's `codex` CLI (the npm package @openai/codex) in its
// non-interactive mode, `codex exec --json`, the prompt on standard input
// ("-"). The session is codex's thread: `thread.started` in its JSONL output
// names it, and `codex exec resume <id>` goes on with it in a later turn.
//
// codex ignores a base-URL variable; it is pointed at the proxy by its own
// configuration, which the daemon writes into the agent's home before every
// turn (Configure): a model provider whose base_url is the proxy and whose
// key is read from OPENAI_API_KEY, where the placeholder is.
type Codex struct {
	// Sandboxed: the runner is a sandbox (bwrap, docker). lazy's sandbox is
	// then the boundary and codex's own (Landlock, seccomp, its bubblewrap)
	// is turned off: it cannot be nested in lazy's user namespace. With no
	// sandbox (agent.runner = "process") codex keeps its own:
	// workspace-write in a work turn.
	Sandboxed bool
}

var (
	_ Driver     = Codex{}
	_ Configurer = Codex{}
)

// EnvOpenAIKey is the variable codex reads its key from; it holds the
// placeholder.
const EnvOpenAIKey = "OPENAI_API_KEY"

// Name is the driver's config name.
func (Codex) Name() string { return "codex" }

// common flags: JSONL events on stdout, no prompt for an approval (nobody
// answers one), no refusal outside a git repository (a task worktree is
// one, but its .git is a file codex may not follow inside a sandbox).
func (Codex) common() []string {
	return []string{"--json", "--skip-git-repo-check", "-c", `approval_policy="never"`}
}

// WorkArgv: `exec [resume SESSION] --json ... -`, the prompt on standard
// input. In a sandbox codex's own is bypassed (lazy's holds); with no
// sandbox codex's workspace-write sandbox stays on.
func (d Codex) WorkArgv(session string) []string {
	args := []string{"exec"}
	if session != "" {
		args = append(args, "resume")
	}
	args = append(args, d.common()...)
	if d.Sandboxed {
		args = append(args, "--dangerously-bypass-approvals-and-sandbox")
	} else {
		args = append(args, "-c", `sandbox_mode="workspace-write"`)
	}
	if session != "" {
		args = append(args, session)
	}
	return append(args, "-")
}

// AskArgv: `exec resume SESSION --json -c sandbox_mode="read-only" -`: codex
// is told it may only read, over a worktree lazy shows read-only anyway. In
// a sandbox codex cannot build its own (see Codex.Sandboxed), so a command
// it runs runs under lazy's, read-only worktree included.
func (d Codex) AskArgv(session string) []string {
	args := []string{"exec"}
	if session != "" {
		args = append(args, "resume")
	}
	args = append(args, d.common()...)
	// the policy stays in a sandbox too: the model is told it may only
	// read, and lazy's read-only worktree enforces it
	args = append(args, "-c", `sandbox_mode="read-only"`)
	if session != "" {
		args = append(args, session)
	}
	return append(args, "-")
}

// codexEvent is one line of `codex exec --json`.
type codexEvent struct {
	Type     string `json:"type"`
	ThreadID string `json:"thread_id"`
	Message  string `json:"message"`
	Item     *struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Message string `json:"message"`
	} `json:"item"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// ParseResult reads codex's JSONL events: the session from thread.started,
// the answer from the last agent_message, an error from turn.failed or a
// top-level error event. Lines that are not JSON events are skipped.
func (Codex) ParseResult(stdout []byte) (Result, error) {
	var r Result
	var failed, seen bool
	for _, l := range bytes.Split(stdout, []byte("\n")) {
		l = bytes.TrimSpace(l)
		if len(l) == 0 || l[0] != '{' {
			continue
		}
		var e codexEvent
		if json.Unmarshal(l, &e) != nil || e.Type == "" {
			continue
		}
		seen = true
		switch e.Type {
		case "thread.started":
			r.SessionID = e.ThreadID
		case "item.completed":
			if e.Item != nil && e.Item.Type == "agent_message" {
				r.Text = e.Item.Text
			}
		case "turn.completed":
			failed = false
		case "turn.failed":
			failed = true
			if e.Error != nil {
				r.Text = e.Error.Message
			}
		case "error":
			failed = true
			r.Text = e.Message
		}
	}
	if !seen {
		return Result{}, fmt.Errorf("codex printed no JSON events (%d bytes of output); see the turn's output", len(stdout))
	}
	r.IsError = failed
	return r, nil
}

// Configure: the turn's driver for its runner (see Codex.Sandboxed) and
// codex's configuration, $CODEX_HOME/config.toml: the model provider
// "lazy" at the proxy, its key from OPENAI_API_KEY (the placeholder), the
// Responses wire. No real credential is written.
func (d Codex) Configure(baseURL string, sandboxed bool) Client {
	return Client{Driver: d.InSandbox(sandboxed), Files: []canary.File{{Path: ".codex/config.toml", Body: []byte(CodexConfig(baseURL)), Mode: 0o600}}}
}

// WriteHome writes codex's configuration into home as the launcher does
// before a turn (over whatever the agent left there, following no link it
// planted).
func (d Codex) WriteHome(home, baseURL string) error {
	return WriteDecoys(home, d.Configure(baseURL, d.Sandboxed).Files)
}

// CodexConfig is $CODEX_HOME/config.toml pointing codex at the proxy.
func CodexConfig(baseURL string) string {
	var b strings.Builder
	b.WriteString("# Written by lazy before every turn: codex calls the model through lazy's proxy,\n")
	b.WriteString("# which holds the real key. Edits here are replaced.\n")
	b.WriteString("model_provider = \"lazy\"\n")
	b.WriteString("approval_policy = \"never\"\n")
	b.WriteString("check_for_update_on_startup = false\n\n")
	b.WriteString("[model_providers.lazy]\n")
	b.WriteString("name = \"lazy proxy\"\n")
	b.WriteString("base_url = " + strconv.Quote(strings.TrimRight(baseURL, "/")+"/v1") + "\n")
	b.WriteString("env_key = \"" + EnvOpenAIKey + "\"\n")
	b.WriteString("wire_api = \"responses\"\n\n")
	b.WriteString("[analytics]\nenabled = false\n")
	return b.String()
}

// InSandbox is the driver for turns run by a sandboxing runner or not.
func (d Codex) InSandbox(sandboxed bool) Driver {
	d.Sandboxed = sandboxed
	return d
}
