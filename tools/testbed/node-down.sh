#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# Stops a real node started by node-up.sh: the module operator, then the namespaces' init (the kernel
# ends every process of the node with it, and its mounts and network go with the namespaces), then
# removes the node's cgroups from the machine's hierarchies.   node-down.sh [<node dir>|1.34|latest]
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
target="${1:-1.34}"
dir="$target"; [ -d "$dir" ] || dir="$repo/.testbed/node-$target"
[ -f "$dir/box-pid" ] || exit 0
if [ -f "$dir/outside-pids" ]; then
  while read -r pid _; do kill -TERM "$pid" 2>/dev/null; done < "$dir/outside-pids"
fi
box=$(cat "$dir/box-pid")
kill -TERM "$box" 2>/dev/null
for _ in $(seq 1 100); do kill -0 "$box" 2>/dev/null || break; sleep 0.1; done
kill -KILL "$box" 2>/dev/null
source "$dir/node.env"
# A cgroup is removable once its processes are gone (they were killed with the namespace).
for _ in $(seq 1 100); do
  left=0
  for hierarchy in /sys/fs/cgroup/*/; do
    [ -d "$hierarchy$CGROUP_ROOT" ] || continue
    find "$hierarchy$CGROUP_ROOT" -depth -type d -exec rmdir {} + 2>/dev/null
    [ -d "$hierarchy$CGROUP_ROOT" ] && left=1
  done
  [ $left = 0 ] && break; sleep 0.1
done
rm -f "$dir/box-pid" "$dir/outside-pids"
echo "stopped the real node in $dir" >&2
