package agent

import (
	"bytes"
	"encoding/json"
	"fmt"

	"lazy/canary"
)

// Gemini drives Google's gemini CLI (npm @google/gemini-cli, checked with
// 0.61.0) headless: `gemini -p "" --output-format stream-json --approval-mode MODE
// [--resume SESSION]`, the prompt on standard input (-p's text is appended
// to standard input; an empty one adds nothing). The client is pointed at
// the proxy by its own configuration: GOOGLE_GEMINI_BASE_URL, API-key
// auth selected in $HOME/.gemini/settings.json (written by the daemon
// before every turn), and the placeholder in GEMINI_API_KEY. It keeps its
// sessions under $HOME/.gemini/tmp, so --resume with the session id of the
// stream's init event carries the conversation across turns; the stream
// reports its tool results and files written as the turn runs
// (gemini_stream.go).
type Gemini struct {
	PermissionMode string // work turns, in claude-code's words (agent.permission_mode)
}

var (
	_ Driver     = Gemini{}
	_ Configurer = Gemini{}
)

// Gemini's variables (CONTRACT §16).
const (
	EnvGeminiAPIKey  = "GEMINI_API_KEY"
	EnvGeminiBaseURL = "GOOGLE_GEMINI_BASE_URL"
)

// Name is the driver's config name.
func (Gemini) Name() string { return "gemini" }

// approvalMode maps agent.permission_mode to gemini's --approval-mode:
// acceptEdits (the default) → auto_edit, bypassPermissions (allowed only
// inside a sandbox) → yolo, default → default, plan → plan.
func (d Gemini) approvalMode() string {
	switch d.PermissionMode {
	case "bypassPermissions":
		return "yolo"
	case "default":
		return "default"
	case "plan":
		return "plan"
	}
	return "auto_edit"
}

func geminiArgs(mode, session string) []string {
	args := []string{"-p", "", "--output-format", "stream-json", "--approval-mode", mode}
	if session != "" {
		args = append(args, "--resume", session)
	}
	return args
}

// WorkArgv: -p "" --output-format stream-json --approval-mode MODE [--resume S].
func (d Gemini) WorkArgv(session string) []string { return geminiArgs(d.approvalMode(), session) }

// AskArgv: the same in plan mode (gemini's read-only mode), on top of the
// read-only worktree of an ask turn.
func (Gemini) AskArgv(session string) []string { return geminiArgs("plan", session) }

// ClientEnv points the client at the proxy and trusts the worktree (a
// headless run in an untrusted folder stops to ask).
func (Gemini) ClientEnv(baseURL string) []string {
	return []string{EnvGeminiBaseURL + "=" + baseURL, "GEMINI_CLI_TRUST_WORKSPACE=true", "NO_COLOR=1"}
}

// GeminiSettings is $HOME/.gemini/settings.json: API-key auth (the key is
// the placeholder in GEMINI_API_KEY; a Google login is never offered), no
// usage statistics, telemetry or update checks (they would go to Google's
// own hosts, which the sandbox does not reach).
const GeminiSettings = `{
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false},
  "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false}
}
`

// Configure: the client's variables and its settings file.
func (d Gemini) Configure(baseURL string, _ bool) Client {
	return Client{Env: d.ClientEnv(baseURL), Files: d.HomeFiles()}
}

// HomeFiles is the client's settings file.
func (Gemini) HomeFiles() []canary.File {
	return []canary.File{{Path: ".gemini/settings.json", Body: []byte(GeminiSettings), Mode: 0o600}}
}

// geminiResult is the JSON object `--output-format json` prints.
type geminiResult struct {
	SessionID string          `json:"session_id"`
	Response  *string         `json:"response"`
	Error     json.RawMessage `json:"error"`
}

// ParseResult reads the stream-json events (parseGeminiStream: the
// session id of init, the assistant's message deltas joined, the result's
// status and error); an output of `--output-format json` instead is the
// one JSON object the client prints (indented, over several lines), with
// notices before it skipped: the object is the last line starting with
// '{' from which a whole object decodes.
func (Gemini) ParseResult(stdout []byte) (Result, error) {
	if res, ok := parseGeminiStream(stdout); ok {
		return res, nil
	}
	for end := len(stdout); end > 0; {
		i := bytes.LastIndex(stdout[:end], []byte("\n{"))
		start := i + 1
		if i < 0 {
			start = bytes.IndexByte(stdout, '{')
			if start < 0 {
				break
			}
		}
		var r geminiResult
		if json.Unmarshal(bytes.TrimSpace(stdout[start:]), &r) == nil && (r.SessionID != "" || r.Response != nil || len(r.Error) > 0) {
			res := Result{SessionID: r.SessionID}
			if r.Response != nil {
				res.Text = *r.Response
			}
			if len(r.Error) > 0 && string(r.Error) != "null" {
				var e struct {
					Message string `json:"message"`
				}
				_ = json.Unmarshal(r.Error, &e)
				res.IsError, res.Text = true, e.Message
				if res.Text == "" {
					res.Text = string(r.Error)
				}
			}
			return res, nil
		}
		if i < 0 {
			break
		}
		end = i
	}
	return Result{}, fmt.Errorf("gemini printed no JSON result (%d bytes of output); see the turn's output", len(stdout))
}
