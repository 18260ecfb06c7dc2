#!/usr/bin/env bash
# Runs every fuzz target of the project from the committed corpus in
# testdata/fuzz, each for a fixed number of executions sized to about 10 s on
# the 2-core build machine (FUZZTIME=30s or FUZZTIME=1000000x overrides that
# for every target). With SAVE=1 it copies what the fuzzer found interesting
# into testdata/fuzz, to be committed.
#
# Why counts, not seconds: with a duration, go1.26's fuzz coordinator can
# report its own deadline as a failure ("context deadline exceeded" at
# fuzztime + a few ms, no input written: golang/go#75804, fixed in go1.27). A
# count has no deadline to race. Should such a bare report still come, the
# target is fuzzed once more.
#
# A failure prints the fuzzer's whole report. Go's fuzzing coordinator can
# report a worker that merely died or stalled ("fuzzing process hung or
# terminated unexpectedly", golang/go#56238 and #52569) as a failure; such a
# report is a finding only if its written input fails again on its own. So a
# failing input is re-run with `go test -run`: if it fails, the target fails
# and the input stays in testdata/fuzz to be committed as a regression case;
# if it passes, the report is the toolchain's, the input is dropped and the
# target is fuzzed once more (a second such report fails the run).
set -euo pipefail
targets=( # package:target:executions
  ./task:FuzzResolve:300000x
  ./gitx:FuzzParseDiff:250000x
  ./proxy:FuzzParseEditorRoute:100000x
  ./proxy:FuzzProxySubstitution:70000x
  ./proxy:FuzzParseCredential:100000x
  ./proxy:FuzzEchoingUpstream:30000x
  ./proxy:FuzzResponsesUsage:30000x
  ./proxy:FuzzGeminiUsage:50000x
  ./proxy:FuzzGeminiUsageOf:50000x
  ./proxy:FuzzResponsesEventUsage:50000x
  ./proxy:FuzzSSEFeed:30000x
  ./proxy:FuzzResponsesTranscript:30000x
  ./proxy:FuzzGeminiTranscript:30000x
  ./review:FuzzShellQuote:300000x
  ./review:FuzzParseRemedy:300000x
  ./httpapi:FuzzCommentJSON:15000x
  ./httpapi:FuzzReviewForms:8000x
  ./httpapi:FuzzSearch:15000x
  ./httpapi:FuzzFragments:8000x
  ./config:FuzzConfigLoad:15000x
  ./views:FuzzRenderLine:60000x
  ./views:FuzzMessageHTML:40000x
  ./store:FuzzFileStoreLoad:20000x
  ./grain:FuzzDecode:40000x
  ./agent:FuzzRestoreHome:40000x
  ./actors:FuzzParseHomeCwd:300000x
  ./actors:FuzzParseHeldEnd:35000x
  ./internal/logfile:FuzzTextAsSlog:200000x
  ./proxy:FuzzFastDelta:100000x
  ./proxy:FuzzFastResponsesDelta:100000x
  ./proxy:FuzzFastGeminiParts:60000x
  ./proxy:FuzzMaskAll:200000x
)
cache="$(go env GOCACHE)/fuzz/lazy"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT

# fuzz_once PKG NAME BUDGET: 0 when the target passed; 3 when its only
# report was the toolchain's (a worker crash whose input passes on its own, or
# the coordinator's deadline with no input); 1 on a real failure.
fuzz_once() {
  local pkg="$1" name="$2" budget="$3"
  if go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$budget" >"$out" 2>&1; then
    grep -E '^(ok|fuzz: elapsed.*new interesting)' "$out" | tail -2
    return 0
  fi
  echo "fuzz: $pkg $name reported a failure; the fuzzer printed:"
  sed 's/^/  | /' "$out" | tail -40
  local input
  input="$(sed -n 's/.*Failing input written to \(testdata\/fuzz\/[^ ]*\).*/\1/p' "$out" | head -1)"
  local crashed=0
  grep -q 'fuzzing process hung or terminated unexpectedly' "$out" && crashed=1
  if [[ -z "$input" ]]; then
    if [[ $crashed == 1 ]]; then
      echo "fuzz: the fuzzing worker crashed with no input to blame (golang/go#56238), not a finding"
      return 3
    fi
    if grep -qx '    context deadline exceeded' "$out"; then
      echo "fuzz: the coordinator reported its own deadline with no input (golang/go#75804), not a finding"
      return 3
    fi
    echo "fuzz: no failing input was written; rerun: go test $pkg -run '^\$' -fuzz '^$name\$' -fuzztime $budget"
    return 1
  fi
  if [[ $crashed == 0 ]]; then
    echo "fuzz: $pkg/$input fails: fix the code, then commit the input as a regression case"
    return 1
  fi
  local id="${input##*/}"
  if go test "$pkg" -count=1 -run "^${name}\$/^${id}\$" >/dev/null 2>&1; then
    echo "fuzz: $pkg/$input passes on its own: the report was the fuzzing worker's crash (golang/go#56238), not a finding; dropping it"
    rm -f "$pkg/$input"
    return 3
  fi
  echo "fuzz: $pkg/$input fails on its own: fix the code, then commit the input as a regression case"
  return 1
}

n=0
for t in "${targets[@]}"; do
  IFS=: read -r pkg name budget <<<"$t"
  budget="${FUZZTIME:-$budget}"
  n=$((n + 1))
  echo "fuzz: [$n/${#targets[@]}] $pkg $name for $budget"
  rc=0
  fuzz_once "$pkg" "$name" "$budget" || rc=$?
  if [[ $rc == 3 ]]; then
    echo "fuzz: [$n/${#targets[@]}] $pkg $name again for $budget"
    rc=0
    fuzz_once "$pkg" "$name" "$budget" || rc=$?
  fi
  if [[ $rc != 0 ]]; then
    echo "fuzz: FAILED at $pkg $name"
    exit 1
  fi
  if [[ "${SAVE:-}" == 1 ]]; then
    src="$cache/${pkg#./}/$name"
    dst="$pkg/testdata/fuzz/$name"
    if [[ -d "$src" ]]; then
      mkdir -p "$dst"
      ls "$src" | head -40 | while read -r f; do cp "$src/$f" "$dst/$f"; done
    fi
  fi
done
echo "fuzz: ${#targets[@]} targets: passed"
