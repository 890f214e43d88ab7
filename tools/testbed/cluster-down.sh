#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# Stops a test bed started by cluster-up.sh.   cluster-down.sh [1.34|latest|<testbed dir>]
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
target="${1:-}"
dirs=()
if [ -n "$target" ] && [ -d "$target" ]; then dirs=("$target")
elif [ -n "$target" ]; then dirs=("$repo/.testbed/$target")
else for d in "$repo"/.testbed/*/; do [ -d "$d" ] && dirs+=("${d%/}"); done; fi

for dir in "${dirs[@]}"; do
  [ -f "$dir/pids" ] || continue
  # Reverse start order: scheduler and controller-manager first, etcd last.
  tac "$dir/pids" | while read -r pid name; do
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  done
  for _ in $(seq 1 50); do
    alive=0
    # The process group: the server outlives its supervise.sh while it shuts down.
    while read -r pid _; do kill -0 -- "-$pid" 2>/dev/null && alive=1; done < "$dir/pids"
    [ $alive = 0 ] && break; sleep 0.2
  done
  while read -r pid _; do kill -KILL -- "-$pid" 2>/dev/null || true; done < "$dir/pids"
  rm -f "$dir/pids"
  echo "stopped test bed in $dir" >&2
done
