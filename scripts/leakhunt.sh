#!/usr/bin/env bash
# The leak hunt over everything the test suite left in DIR (make test sets
# LAZY_TEST_ARTIFACTS=DIR): state dirs, daemon logs, SQLite files, grant
# registries, worktrees, agent homes, recovery files, saved pages and traffic
# streams. The real credentials the tests use and the approval passphrase
# must appear nowhere but in the credential files themselves.
set -euo pipefail
dir="${1:?usage: leakhunt.sh DIR}"
secrets=("REALSECRET" "correct horse battery" "wrong horse battery")
files=$(find "$dir" -type f -not -path '*/credentials/*' | wc -l)
if (( files < 200 )); then
  echo "leak hunt: only $files files under $dir: the suite did not leave its artifacts (is LAZY_TEST_ARTIFACTS set?)" >&2
  exit 1
fi
pages=$(find "$dir" -type f -name 'seen-*' | wc -l)
hits=0
for s in "${secrets[@]}"; do
  found=$(grep -rla --exclude-dir=credentials -F "$s" "$dir" || true)
  if [[ -n "$found" ]]; then
    echo "leak hunt: \"$s\" found in:" >&2
    echo "$found" | head -20 >&2
    hits=$((hits + $(echo "$found" | wc -l)))
  fi
done
if (( hits > 0 )); then
  echo "leak hunt: $hits files hold a secret" >&2
  exit 1
fi
echo "leak hunt: $files files ($pages saved pages and streams) searched for ${#secrets[@]} secrets: 0 hits"
