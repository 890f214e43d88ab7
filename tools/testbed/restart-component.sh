#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# Kills one server of a test bed started by cluster-up.sh and starts it again with the same command
# line, for outage tests:   restart-component.sh <testbed dir> <etcd|kube-apiserver|...> [SIGNAL] [down seconds]
# SIGNAL (default KILL) is sent to the server's process group; the server stays down `down seconds`
# (default 0) before it starts again. Prints nothing; its log goes on in logs/<name>.log.
set -euo pipefail
dir=$1 name=$2 signal=${3:-KILL} down=${4:-0}
[ -f "$dir/cmd/$name" ] || { echo "no command line recorded for $name in $dir" >&2; exit 1; }
pid=$(awk -v n="$name" '$2==n {print $1}' "$dir/pids")
[ -n "$pid" ] || { echo "$name is not in $dir/pids" >&2; exit 1; }
kill "-$signal" -- "-$pid" 2>/dev/null || kill "-$signal" "$pid" 2>/dev/null || true
for _ in $(seq 1 100); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.1; done
kill -KILL -- "-$pid" 2>/dev/null || true
sleep "$down"
mapfile -t command < "$dir/cmd/$name"
setsid "$(dirname "$0")/supervise.sh" "${command[@]}" >> "$dir/logs/$name.log" 2>&1 < /dev/null &
new=$!
awk -v n="$name" -v p="$new" '$2==n {$1=p} {print}' "$dir/pids" > "$dir/pids.new" && mv "$dir/pids.new" "$dir/pids"
