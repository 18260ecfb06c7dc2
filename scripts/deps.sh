#!/usr/bin/env bash
# Installs what the tests need, when it is missing: Debian's bubblewrap,
# chromium, postgresql, etcd-server and protobuf-compiler, the npm packages @anthropic-ai/claude-code,
# @openai/codex and @google/gemini-cli (into cache dirs outside the repo), and staticcheck. Idempotent; prints what it does.
set -euo pipefail

CLAUDE_DIR="${CLAUDE_DIR:-$HOME/.cache/lazy/claude-code}"
CLAUDE_VERSION="${CLAUDE_VERSION:-2.1.328}"
# the other agent clients lazy drives (issue 28), pinned like claude
AGENTS_DIR="${AGENTS_DIR:-$HOME/.cache/lazy/agents}"
CODEX_VERSION="${CODEX_VERSION:-0.169.0}"
GEMINI_VERSION="${GEMINI_VERSION:-0.61.0}"

need_apt=()
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v git >/dev/null 2>&1 || need_apt+=(git)
# PostgreSQL server binaries (the tests start their own server from them)
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || need_apt+=(postgresql)
# etcd (cluster membership; the tests start their own) and protoc (the task
# grains' wire, checked fresh by a test)
command -v etcd >/dev/null 2>&1 || need_apt+=(etcd-server)
command -v protoc >/dev/null 2>&1 || need_apt+=(protobuf-compiler)
if ((${#need_apt[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "deps: missing ${need_apt[*]}: run 'sudo apt-get install -y ${need_apt[*]}' (tests that need them skip, or fail when CI=true)" >&2
  else
    echo "deps: installing ${need_apt[*]} with apt-get (about a minute)..."
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
    echo "deps: installed ${need_apt[*]}"
  fi
fi

if [[ ! -x "$CLAUDE_DIR/node_modules/.bin/claude" ]]; then
  if command -v npm >/dev/null 2>&1; then
    echo "deps: installing @anthropic-ai/claude-code@$CLAUDE_VERSION into $CLAUDE_DIR (about 10 s)..."
    mkdir -p "$CLAUDE_DIR"
    (cd "$CLAUDE_DIR" && npm install --no-audit --no-fund --loglevel=error "@anthropic-ai/claude-code@$CLAUDE_VERSION" >/dev/null)
    echo "deps: claude $("$CLAUDE_DIR/node_modules/.bin/claude" --version 2>/dev/null || echo '(version unknown)')"
  else
    echo "deps: npm is missing: install Node.js and npm for the real-client tests" >&2
  fi
fi

for pkg in "@openai/codex@$CODEX_VERSION:codex" "@google/gemini-cli@$GEMINI_VERSION:gemini"; do
  spec="${pkg%:*}" bin="${pkg##*:}"
  if [[ ! -x "$AGENTS_DIR/node_modules/.bin/$bin" ]] && command -v npm >/dev/null 2>&1; then
    echo "deps: installing $spec into $AGENTS_DIR (about 20 s)..."
    mkdir -p "$AGENTS_DIR"
    (cd "$AGENTS_DIR" && npm install --no-audit --no-fund --loglevel=error "$spec" >/dev/null)
    echo "deps: $bin $("$AGENTS_DIR/node_modules/.bin/$bin" --version 2>/dev/null || echo '(version unknown)')"
  fi
done

if ! command -v staticcheck >/dev/null 2>&1 && [[ ! -x "$(go env GOPATH)/bin/staticcheck" ]]; then
  echo "deps: installing staticcheck..."
  go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
fi
echo "deps: ready"
