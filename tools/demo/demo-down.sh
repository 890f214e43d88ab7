#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# make demo-down: stops the demo: the real node, or (DEMO=simulated) its process group: the simulated nodes and every component) and its
# control plane.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dir="$repo/.testbed/demo"
if [ -f "$dir/demo.pid" ]; then
  pid="$(cat "$dir/demo.pid")"
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$dir/demo.pid"
fi
"$repo/tools/testbed/cluster-down.sh" "$dir/cluster"
"$repo/tools/testbed/node-down.sh" "$dir/node" 2>/dev/null
echo "demo stopped"
