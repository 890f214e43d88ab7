#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# Runs a command inside a real node's namespaces (network, mount, PID), e.g. a step of
# node/node-inside.sh.   node-exec.sh <node dir> <command> [args...]
set -euo pipefail
dir="$1"; shift
exec nsenter --target "$(cat "$dir/box-pid")" --net --mount --pid -- "$@"
