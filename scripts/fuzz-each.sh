#!/usr/bin/env bash
# Runs every fuzz target of the module for a short time past its corpus (FUZZTIME, default 5s), one at a
# time, only those matching FUZZ_ONLY and skipping those matching FUZZ_SKIP (regular expressions). Fails on
# the first target that finds a failing input.
#
# Go's fuzzing coordinator can end a run with a bare "context deadline exceeded" when -fuzztime expires
# while a worker is still busy (go.dev/issue/75804, fixed in Go 1.27). Such a run found nothing: it wrote
# no failing input and its last line before FAIL is that message alone. It is reported and counted as a
# pass; any other failure, or a failing input written under testdata/fuzz, fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}
only=${FUZZ_ONLY:-'.'}
skip=${FUZZ_SKIP:-'^$'}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# deadlineOnly says whether a failed run's log shows the coordinator's deadline and nothing else.
deadlineOnly() {
  local target=$1
  grep -q "^--- FAIL: ${target} " "$log" &&
    grep -qx '    context deadline exceeded' "$log" &&
    ! grep -q 'Failing input written to' "$log" &&
    [ "$(grep -c '^    ' "$log")" -eq 1 ]
}

for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    if [[ ! "$target" =~ $only ]] || [[ "$target" =~ $skip ]]; then
      continue
    fi
    echo "-- $pkg $target"
    before=$(ls "$dir/testdata/fuzz/$target" 2>/dev/null | sort || true)
    if go test -count=1 -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -parallel 2 "$pkg" >"$log" 2>&1; then
      continue
    fi
    after=$(ls "$dir/testdata/fuzz/$target" 2>/dev/null | sort || true)
    if [ "$before" = "$after" ] && deadlineOnly "$target"; then
      echo "   the fuzzing coordinator's deadline ended the run, with no failing input found:"
      tail -3 "$log" | sed 's/^/   | /'
      continue
    fi
    cat "$log"
    exit 1
  done
done
