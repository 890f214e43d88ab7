#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# Builds the differential allocator harness against k8s.io/dynamic-resource-allocation at one
# release of the test bed: build.sh <0.34.4|0.37.2>. Prints the binary's path. A binary already
# built from the same sources is reused.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="${1:?usage: build.sh <0.34.4|0.37.2>}"
case "$version" in
  0.34.4) tag=k8s_v034 ;;
  0.37.2) tag=k8s_v037 ;;
  *) echo "unsupported version $version (use 0.34.4 or 0.37.2)" >&2; exit 1 ;;
esac
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
cache="${GPU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deckhouse-gpu}/allocator-harness/$version"
bin="$cache/allocator-harness"
sources_hash="$(cat "$here"/*.go "$here/build.sh" | sha256sum | cut -d' ' -f1)"
fresh() { [ -x "$bin" ] && [ "$(cat "$cache/.sources" 2>/dev/null)" = "$sources_hash" ]; }
source "$here/../install/cache-lock.sh"
fresh || cache_lock "$cache"
if fresh; then echo "$bin"; exit 0; fi
src="$cache/src"; mkdir -p "$src"
rm -f "$src"/*.go
cp "$here"/*.go "$src/"
go_version="$(go env GOVERSION)"; go_version="${go_version#go}"
cat > "$src/go.mod" <<GOMOD
module gpu.deckhouse.io/tools/allocator-harness

go ${go_version%.*}

require (
	k8s.io/api v$version
	k8s.io/apimachinery v$version
	k8s.io/apiserver v$version
	k8s.io/client-go v$version
	k8s.io/component-base v$version
	k8s.io/component-helpers v$version
	k8s.io/dynamic-resource-allocation v$version
	k8s.io/kubelet v$version
)
GOMOD
( cd "$src" && go mod tidy >&2 && go build -trimpath -tags "$tag" -o "$bin.tmp" . >&2 )
mv "$bin.tmp" "$bin"
echo "$sources_hash" > "$cache/.sources"
echo "$bin"
