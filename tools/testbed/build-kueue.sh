#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# Builds Kueue's controller-manager from its Go module sigs.k8s.io/kueue (the project publishes no
# binary the Go module proxy serves) and caches it, with the module's CRDs and webhook manifests
# beside it, under $GPU_CACHE/kueue/<version>; prints that directory. A second run with the build
# present does nothing. The e2e test bed runs it as the other actor that holds Pods with its own
# scheduling gate (plain-Pod integration), issue 31.
set -euo pipefail
version="${KUEUE_VERSION:-v0.17.0}"
dir="${GPU_CACHE:-$HOME/.cache/deckhouse-gpu}/kueue/$version"
source "$(dirname "$0")/../install/cache-lock.sh"
built() { [ -x "$dir/kueue" ] && [ -f "$dir/.complete" ]; }
built || cache_lock "$dir"
if ! built; then
  mkdir -p "$dir/crds"
  echo "building kueue $version from sigs.k8s.io/kueue (first run only)" >&2
  t0=$(date +%s)
  export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
  GOBIN="$dir" go install -trimpath -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$version" \
    "sigs.k8s.io/kueue/cmd/kueue@$version" >&2
  src="$(go mod download -json "sigs.k8s.io/kueue@$version" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')"
  cp "$src"/config/components/crd/bases/*.yaml "$dir/crds/"
  cp "$src/config/components/webhook/manifests.yaml" "$dir/webhooks.yaml"
  chmod -R u+w "$dir"
  touch "$dir/.complete"
  echo "kueue $version built in $(( $(date +%s) - t0 ))s" >&2
fi
echo "$dir"
