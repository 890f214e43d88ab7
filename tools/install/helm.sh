#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# Builds the real helm from its Go module (only the Go module proxy is reachable, so no release
# tarball) and caches it; prints the binary's path. Usage: tools/install/helm.sh
set -euo pipefail
version="${HELM_VERSION:-v3.21.4}"
dir="${GPU_CACHE:-$HOME/.cache/deckhouse-gpu}/tools/helm-$version"
bin="$dir/helm"
source "$(dirname "$0")/cache-lock.sh"
[ -x "$bin" ] || cache_lock "$dir"
if [ ! -x "$bin" ]; then
  mkdir -p "$dir"
  echo "building helm $version from helm.sh/helm/v3 (first run only)" >&2
  t0=$(date +%s)
  # Helm's version string is set by its Makefile through ldflags; keep it truthful here too.
  GOFLAGS=-mod=mod GOBIN="$dir" CGO_ENABLED=0 go install \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$version" \
    "helm.sh/helm/v3/cmd/helm@$version" >&2
  echo "helm $version built in $(( $(date +%s) - t0 ))s" >&2
fi
echo "$bin"
