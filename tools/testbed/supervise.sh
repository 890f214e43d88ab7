#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# Runs one control-plane server and starts it again when it exits, as a node's kubelet restarts a
# control-plane static Pod:   supervise.sh <server binary> [args...]
# A real cluster's kube-controller-manager that panics is back within seconds; without this, one
# panic of an upstream server (kube-controller-manager v1.34.4's ResourceSlice tracker, 2026-11-30)
# failed every later test of the run. Each exit is a line in the server's log (stdout here).
# It gives up after three runs in a row that each ended within 10 s of their start (a wrong flag, a
# port taken), so cluster-up.sh's health wait fails at once instead of waiting out its bound.
# Signals to the process group (cluster-down.sh, restart-component.sh) stop this loop and the server.
set -u
quick=0
while :; do
  started=$SECONDS
  "$@"
  status=$?
  if [ $((SECONDS - started)) -lt 10 ]; then quick=$((quick + 1)); else quick=0; fi
  if [ "$quick" -ge 3 ]; then
    echo "testbed: $(basename "$1") exited with status $status, the third time in a row within 10 s of its start; not starting it again"
    exit "$status"
  fi
  echo "testbed: $(date -u +%FT%TZ) $(basename "$1") exited with status $status; starting it again in 1 s"
  sleep 1
done
