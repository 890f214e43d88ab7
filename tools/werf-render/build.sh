#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# Builds werf-render and prints the binary's path; a binary built from the same sources is reused.
# `build.sh --test` runs its Go tests instead (among them the self-test that breaks a copy of the
# repository's werf.yaml on purpose). Modules come from the Go module cache; a cold machine fetches the
# versions go.mod/go.sum pin through GOPROXY (proxy.golang.org by default).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export GOFLAGS="-mod=mod -buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0
cd "$here"
if [ "${1:-}" = "--test" ]; then
  go mod download >&2
  exec go test -count=1 .
fi
cache="${GPU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deckhouse-gpu}/werf-render"
bin="$cache/werf-render"
sources_hash="$(cat "$here"/*.go "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -d' ' -f1)"
fresh() { [ -x "$bin" ] && [ "$(cat "$cache/.sources" 2>/dev/null)" = "$sources_hash" ]; }
source "$here/../install/cache-lock.sh"
fresh || cache_lock "$cache"
if fresh; then echo "$bin"; exit 0; fi
mkdir -p "$cache"
go mod download >&2
go build -trimpath -o "$bin.tmp" . >&2
mv "$bin.tmp" "$bin"
echo "$sources_hash" > "$cache/.sources"
echo "$bin"
