# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# Sourced by the scripts that build into $GPU_CACHE: `cache_lock <dir>` waits until no other process
# (a parallel make test, a test starting its own control plane) is building into <dir>, and holds the
# lock until the calling script exits. The caller checks again after taking it: the other build may
# have finished what it was about to start.
cache_lock() {
  mkdir -p "$(dirname "$1")"
  exec 8>"$1.lock"
  flock 8
}
