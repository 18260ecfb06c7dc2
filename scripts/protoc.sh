#!/usr/bin/env bash
# Generates Go code from a .proto file in the current directory with
# Debian's protoc and protoc-gen-go built from the version go.mod pins
# (run by `go generate ./...`).
set -euo pipefail
command -v protoc >/dev/null || { echo "protoc.sh: protoc is missing: apt-get install protobuf-compiler (scripts/deps.sh does)" >&2; exit 1; }
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$(dirname "$0")/.." && go build -o "$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go)
protoc --plugin=protoc-gen-go="$bin/protoc-gen-go" --go_out=. --go_opt=paths=source_relative "$@"
