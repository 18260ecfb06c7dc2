package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Template is the commented config `lazy init` writes.
const Template = `# lazy project configuration. Every key can be overridden by an environment
# variable LAZY_<SECTION>__<KEY>, e.g. LAZY_AGENT__RUNNER=bwrap.

[daemon]
port_window = [26000, 26099]   # the dashboard and the proxy take free ports here unless pinned
# dashboard_port = 26010       # always 127.0.0.1
# proxy_listen = "127.0.0.1:26011"

[agent]
driver = "claude-code"          # claude-code | gemini | script
command = "claude"              # the executable the driver runs ("gemini" for driver = "gemini")
runner = "auto"                 # auto: bwrap sandbox when installed, else agents are refused |
                                # bwrap | docker | process (no sandbox: the agent can read your files)
# permission_mode = "acceptEdits"  # bypassPermissions only inside a sandbox (auto, bwrap, docker)
# client_stream = false            # claude-code: read claude's stream-json as it runs (tool results, files written in the live view)
ask_timeout = "10m"
# turn_timeout = "60m"
# max_concurrent = 8            # agent processes running at once; further turns wait
# budget_tokens = 0             # a new task's token budget (input + output); 0: none

[credentials.provider]          # the real provider credential; agents only ever see a placeholder
kind = "api_key"                # api_key | oauth | auth_token
# file = "~/.lazy/credentials/provider"   # bare token, or JSON {"token": "...", "expires_at": "RFC 3339"}
# [credentials.editor]          # the editor agent's real key
# file = "~/.lazy/credentials/editor"
# [credentials.gemini]          # the Gemini API key (AIza...) for driver = "gemini"
# file = "~/.lazy/credentials/gemini"

[proxy]
upstream = "https://api.anthropic.com"
credential = "provider"         # "provider" | "none"
no_grant = "passthrough"        # traffic with no placeholder: "passthrough" (as presented, nothing
                                # injected) | "refuse"

# [[proxy.fallback]]
# upstream = "https://fallback.example"
# credential = "provider"

# [proxy.gemini]                # the Gemini routes (/v1beta/models/...) of driver = "gemini"
# upstream = "https://generativelanguage.googleapis.com"
# credential = "provider"       # the key of [credentials.gemini] | "none"

# [models.roles.local]
# endpoint = "http://127.0.0.1:11434"
# credential = "none"
# local = true                  # placeholders minted over synthetic values

[protect]
paths = [".lazy/config.toml"]   # changes here need the approval passphrase

[storage]
backend = "sql"                 # sql | file | postgres (several daemons, one database)
sync = "full"                   # full: a 201 is on disk first | normal: no fsync per write
# dsn = "postgres://lazy@127.0.0.1:5432/lazy"   # backend = "postgres" only; its password in ~/.pgpass
#                               # (or the file PGPASSFILE names), never here: docs/GUIDE.md "Storage"

# [cluster]                     # several daemons, one project (docs/SCALE-OUT.md): remove the "# "
# name = "lazy-myproject"       # of these lines; needs backend = "postgres" and dsn in [storage] above
# etcd = ["127.0.0.1:2379"]
# advertise = "127.0.0.1:26500" # where the other members reach this one
# remote = "origin"             # the git remote task branches travel through

# [sandbox]                     # each task's limits
# max_connections = 256         # connections one task holds open to the proxy; more wait 1 s, then are refused

# [setup]                       # before a task's first work turn, in its sandbox and worktree
# run = ["make deps"]           # each with sh -c, in order; the first that fails fails the task
# [egress]                      # the hosts a sandboxed agent may reach, through the proxy (default: none)
# allow = ["your-registry.example", "*.your-mirror.example:443", "10.0.0.5:3128"]
#                               # a private or loopback address only when its exact host:port is listed
# [tasks]                       # once a task ends (accepted or cancelled) its worktree is removed
# keep_branches = "168h"        # its branch lazy/<ref> stays this long, then goes (its commits stay
#                               # under refs/lazy/ended/ for its review page); lazy task prune does it now
# [review]
# author = "Your Name <you@example.com>"   # who an applied suggestion is by (default: the project's git identity)
# [notify]                      # told when a task needs you (blocked, conflict), failed or tripped a wire:
# webhook = "https://hooks.example.com/lazy"   # POSTed {"event","task","status","url"} (http or https only)
# command = "/usr/local/bin/on-lazy-notice"  # run with the same JSON on its standard input; plain words run without a
#                               # shell, anything with quotes, $, |, ; ... with sh -c; 10 s a try, 5 tries
`

// WriteInit writes the commented config under root unless one exists.
// It reports whether it wrote the file.
func WriteInit(root string) (string, bool, error) {
	path := filepath.Join(root, FileName)
	if _, err := os.Stat(path); err == nil {
		return path, false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return path, false, fmt.Errorf("check %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return path, false, fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, []byte(Template), 0o644); err != nil {
		return path, false, fmt.Errorf("write %s: %w", path, err)
	}
	return path, true, nil
}
