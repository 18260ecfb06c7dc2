#!/usr/bin/env bash
# Runs every fuzz target of the project for FUZZTIME each (default 10s), with
# the committed corpus in testdata/fuzz as its start. With SAVE=1 it copies
# what the fuzzer found interesting into testdata/fuzz, to be committed.
set -euo pipefail
FUZZTIME="${FUZZTIME:-10s}"
targets=(
  ./task:FuzzResolve
  ./gitx:FuzzParseDiff
  ./proxy:FuzzParseEditorRoute
  ./proxy:FuzzProxySubstitution
  ./proxy:FuzzParseCredential
  ./review:FuzzShellQuote
  ./review:FuzzParseRemedy
  ./httpapi:FuzzCommentJSON
  ./httpapi:FuzzReviewForms
  ./config:FuzzConfigLoad
  ./store:FuzzFileStoreLoad
)
cache="$(go env GOCACHE)/fuzz/lazy"
n=0
for t in "${targets[@]}"; do
  pkg="${t%%:*}" name="${t##*:}"
  n=$((n + 1))
  echo "fuzz: [$n/${#targets[@]}] $pkg $name for $FUZZTIME"
  go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" 2>&1 | grep -E '^(ok|FAIL|---|\s+.*_test.go|fuzz: elapsed.*new interesting)' | tail -3
  if [[ "${SAVE:-}" == 1 ]]; then
    src="$cache/${pkg#./}/$name"
    dst="$pkg/testdata/fuzz/$name"
    if [[ -d "$src" ]]; then
      mkdir -p "$dst"
      ls "$src" | head -40 | while read -r f; do cp "$src/$f" "$dst/$f"; done
    fi
  fi
done
echo "fuzz: ${#targets[@]} targets, $FUZZTIME each: passed"
