#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# Builds the real node's images (images.py) and imports them into the node's containerd.
#   images.sh <node dir> <node pid>
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
dir="$1"; box="$2"
source "$dir/node.env"
target="${CARGO_TARGET_DIR:-$repo/images/gpu-artifact/target}"
GPU_CACHE="${GPU_CACHE:-$HOME/.cache/deckhouse-gpu}" python3 "$here/images.py" "$dir" \
  "$target/x86_64-unknown-linux-gnu/debug" "$target/debug" "$dir/images"
for tar in "$dir"/images/*.tar; do
  nsenter --target "$box" --net --mount --pid -- "$CONTAINERD_BIN/ctr" --address /run/containerd/containerd.sock \
    -n k8s.io images import --platform linux/amd64 "$tar" > /dev/null
done
