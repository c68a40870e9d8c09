#!/usr/bin/env bash
# Builds cmd/zaris as a static binary (no cgo, no dynamic loader) at the path given, ./zaris by default.
# The Dockerfile builds the image's binary with it and CI checks a binary built the same way.
set -euo pipefail

out=${1:-zaris}
case $out in /*) ;; *) out="$PWD/$out" ;; esac
mkdir -p "$(dirname "$out")"
cd "$(dirname "$0")/.."
CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags='-s -w' -o "$out" ./cmd/zaris
