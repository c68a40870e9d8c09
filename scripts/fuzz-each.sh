#!/usr/bin/env bash
# Runs every fuzz target of the module for a short time past its corpus (FUZZTIME, default 5s), one at a
# time, skipping those named in FUZZ_SKIP (a regular expression). Fails on the first target that fails.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}
skip=${FUZZ_SKIP:-'^$'}
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    if [[ "$target" =~ $skip ]]; then
      continue
    fi
    echo "-- $pkg $target"
    go test -count=1 -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -parallel 2 "$pkg" > /tmp/fuzz-each.log 2>&1 || {
      cat /tmp/fuzz-each.log
      exit 1
    }
  done
done
