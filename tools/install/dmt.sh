#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# Installs the real dmt (Deckhouse Module Tool) and prints the binary's path: from its Go module where
# the Go module proxy serves it, else built from the source archives in tools/dmt (see its README).
# Cached under $GPU_CACHE. Usage: tools/install/dmt.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
vendor="$here/../dmt"
DMT_COMMIT=35998401
DMT_MODULE_VERSION=v0.1.105
KUBEDOG_COMMIT=ed58edf
dir="${GPU_CACHE:-$HOME/.cache/deckhouse-gpu}/tools/dmt-$DMT_COMMIT"
bin="$dir/dmt"
source "$here/cache-lock.sh"
[ -x "$bin" ] || cache_lock "$dir"
if [ ! -x "$bin" ]; then
  mkdir -p "$dir"
  t0=$(date +%s)
  if GOFLAGS=-mod=mod GOBIN="$dir" go install "github.com/deckhouse/dmt/cmd/dmt@$DMT_MODULE_VERSION" >&2 2>"$dir/go-install.log"; then
    echo "dmt $DMT_MODULE_VERSION installed from its Go module" >&2
  else
    echo "the Go module proxy does not serve github.com/deckhouse/dmt ($(tail -n1 "$dir/go-install.log")); building dmt $DMT_COMMIT from tools/dmt (first run only)" >&2
    (cd "$vendor" && sha256sum --check --quiet SHA256SUMS) >&2
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    tar -xzf "$vendor/dmt-$DMT_COMMIT.tar.gz" -C "$work"
    tar -xzf "$vendor/kubedog-$KUBEDOG_COMMIT.tar.gz" -C "$work"
    (cd "$work/dmt" && go mod edit -replace github.com/werf/kubedog="$work/kubedog" \
      && go build -trimpath -o "$bin.tmp" ./cmd/dmt) >&2
    mv "$bin.tmp" "$bin"
  fi
  echo "dmt ready in $(( $(date +%s) - t0 ))s" >&2
fi
echo "$bin"
