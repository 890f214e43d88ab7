#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# make demo: by default the module on the test bed's real node (tools/testbed/node-up.sh: a control
# plane, containerd, runc and the kubelet of K8S=1.34 or latest in namespaces of their own, the module
# installed from its chart as Deckhouse installs it), docs/examples applied, and what every container
# printed. DEMO=simulated: the control plane with three simulated GPU nodes (an A30 node, an 8 x H100
# node and an A30 node for MPS), the components as processes and the simulated kubelets. Prints the
# walkthrough and leaves everything running; `make demo-down` stops it.
# DEMO_NODE_ENV=<env file of a running real node> runs the demo on that node instead of starting one
# (what `make test` does with its real-node phase's node); nothing of it is stopped first.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
k8s="${K8S:-1.34}"
dir="$repo/.testbed/demo"
ws="$repo/images/gpu-artifact"

reuse="${DEMO_NODE_ENV:-}"
[ -n "$reuse" ] || "$here/demo-down.sh" >/dev/null 2>&1 || true
"$repo/tools/install/deps.sh"
if [ "${DEMO:-real}" != simulated ]; then
  if [ -n "$reuse" ]; then
    env_file="$reuse"
  else
    echo "== the real node (first run: Kubernetes node parts from Go modules, images, cargo; see README)" >&2
    env_file="$(NODE_DIR="$dir/node" "$repo/tools/testbed/node-up.sh" "$k8s")"
  fi
  target="${CARGO_TARGET_DIR:-$ws/target}"
  GPU_REALNODE_ENV="$env_file" "$target/debug/real-node-demo"
  node_dir="$(sed -n 's/^NODE_DIR=//p' "$env_file")"
  echo
  echo "kubeconfig: $(sed -n 's/^KUBECONFIG=//p' "$env_file")"
  echo "inside the node: tools/testbed/node-exec.sh $node_dir <command>   (e.g. ip route, ls /run/cdi)"
  echo "stop:       make demo-down"
  exit 0
fi
echo "== building the components and the demo (cargo, first run takes a few minutes)" >&2
( cd "$ws" && cargo build --locked --quiet -p gpu-node-agent -p gpu-handler -p gpu-controller -p mock-nvml \
    && cargo build --locked --quiet -p e2e --example demo )
echo "== starting the control plane (Kubernetes $k8s)" >&2
kubeconfig="$(TESTBED_DIR="$dir/cluster" "$repo/tools/testbed/cluster-up.sh" "$k8s")"

target="${CARGO_TARGET_DIR:-$ws/target}"
mkdir -p "$dir"
# Its own session, so demo-down can stop it and every component it started as one process group.
GPU_TESTBED_KUBECONFIG="$kubeconfig" CARGO_TARGET_DIR="$target" \
  setsid "$target/debug/examples/demo" >"$dir/demo.log" 2>&1 < /dev/null &
echo $! > "$dir/demo.pid"

shown=0
for _ in $(seq 1 1200); do
  lines=$(wc -l < "$dir/demo.log")
  if [ "$lines" -gt "$shown" ]; then sed -n "$((shown + 1)),${lines}p" "$dir/demo.log"; shown=$lines; fi
  if grep -q "^== DEMO READY" "$dir/demo.log"; then
    echo
    echo "kubeconfig: $kubeconfig"
    echo "try:        KUBECONFIG=$kubeconfig kubectl get physicalgpus,resourceslices,resourceclaims -A"
    echo "stop:       make demo-down"
    exit 0
  fi
  if ! kill -0 "$(cat "$dir/demo.pid")" 2>/dev/null; then
    sed -n "$((shown + 1)),\$p" "$dir/demo.log"
    echo "the demo stopped before it was ready; its log is $dir/demo.log" >&2
    exit 1
  fi
  sleep 0.5
done
echo "the demo was not ready after 10 minutes; its log is $dir/demo.log" >&2
exit 1
