#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# Starts the test bed's real node: a control plane, containerd + runc, the kubelet and kube-proxy, all
# in network, mount and PID namespaces of their own (nothing can leave the machine: the node's network
# has no route out), on a fixture host with 8 x H100 SXM5 and an A30 (device nodes made with mknod, the
# driver's libraries and nvidia-smi in /usr, the mock NVML's state in /run/gpu-mock-nvml); then the
# module's images, built from the workspace, imported into containerd, and the module installed by
# tools/testbed/node/module-operator (hooks + helm, as Deckhouse does) unless NODE_MODULE=0.
# Prints the path of an env file: KUBECONFIG (reachable from the machine through a loopback forward),
# NODE_NAME, NODE_DIR, NODE_HOST (the fixture host), NODE_PID (the namespaces' init).
#
#   node-up.sh [1.34|latest]      NODE_DIR (default .testbed/node-<version>), TESTBED_OWNER_PID
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$here/versions.sh"
source "$here/node-versions.sh"
k8s="${1:-1.34}"
testbed_resolve "$k8s"
t_start=$(date +%s)
"$here/build-node.sh" "$k8s"
t_built=$(date +%s)

dir="${NODE_DIR:-$repo/.testbed/node-$k8s}"
if [ -f "$dir/box-pid" ]; then "$here/node-down.sh" "$dir" >&2 || true; fi
rm -rf "$dir"; mkdir -p "$dir/logs" "$dir/config" "$dir/disk" "$dir/run"
dir="$(cd "$dir" && pwd)"

# --- what cargo builds: the node's tools (fixture host, operator, stand-ins) and the images' binaries ---
ws="$repo/images/gpu-artifact"
target="${CARGO_TARGET_DIR:-$ws/target}"
echo "== building the node's tools and the module's binaries (cargo)" >&2
"$here/node/build-binaries.sh" >&2
tools="$target/debug"

# --- the node's settings --------------------------------------------------------------------------
id=$(printf '%s' "$dir" | sha1sum | cut -c1-8)
cat > "$dir/node.env" <<ENV
NODE_NAME=realnode
NODE_IP=10.77.0.2
POD_CIDR=10.77.1.0/24
SERVICE_CIDR=10.0.0.0/24
NODE_HOST=$dir/host
NODE_TOOLS=$tools
CGROUP_ROOT=gpu-realnode-$id
CONTAINERD_BIN=$GPU_CACHE/node/containerd-$CONTAINERD_VERSION/bin
CNI_BIN=$GPU_CACHE/node/cni-plugins-$CNI_PLUGINS_VERSION/bin
NVIDIA_TOOLKIT_BIN=$GPU_CACHE/node/nvidia-container-toolkit-$NVIDIA_CONTAINER_TOOLKIT_VERSION/bin
K8S_BIN=$TESTBED_BIN
K8S_VERSION=$K8S_VERSION
FEATURE_GATES=$TESTBED_GATES
ENV
source "$dir/node.env"
"$tools/real-node-host" build "$NODE_HOST"

# --- the namespaces: init reaps orphans; when it ends every process of the node ends --------------
setsid unshare --net --mount --pid --fork --mount-proc --propagation private \
  python3 "$here/node/box-init.py" > "$dir/logs/box-init.log" 2>&1 < /dev/null &
unshare_pid=$!
box=""
for _ in $(seq 1 100); do
  box=$(cat "/proc/$unshare_pid/task/$unshare_pid/children" 2>/dev/null | awk '{print $1}')
  [ -n "$box" ] && break; sleep 0.05
done
[ -n "$box" ] || { echo "the node's namespaces did not start" >&2; exit 1; }
echo "$box" > "$dir/box-pid"
inside() { nsenter --target "$box" --net --mount --pid -- "$@"; }

# The owner's pid means nothing inside the node's PID namespace: what runs there (cluster-up.sh) must
# not see it, or it would take its process for gone and stop at once; node-down.sh stops it all.
owner="${TESTBED_OWNER_PID:-}"; unset TESTBED_OWNER_PID
if [ -n "$owner" ]; then
  setsid bash -c "while kill -0 $owner 2>/dev/null; do sleep 1; done; '$here/node-down.sh' '$dir'" \
    > /dev/null 2>&1 < /dev/null &
fi

"$here/node/write-configs.sh" "$dir"
inside "$here/node/node-inside.sh" "$dir" setup

# --- control plane, inside: the node and its Pods reach it at the node's address ------------------
echo "== control plane $K8S_VERSION inside the node's network" >&2
TESTBED_DIR="$dir/cluster" TESTBED_ADVERTISE_ADDRESS="$NODE_IP" TESTBED_AUDIT_GROUP=system:serviceaccounts:d8-gpu inside "$here/cluster-up.sh" "$k8s" > /dev/null
api_port=$(awk '{print $3}' "$dir/cluster/ports")
"$here/node/node-certs.sh" "$dir" "$api_port"

# The machine reaches the API server through a loopback forward into the node's network.
exec 4< <(OWNER_PID="$box" setsid python3 "$here/node/netns-forward.py" "$box" "127.0.0.1:$api_port" 2>>"$dir/logs/forward.log")
read -r forward_port <&4
sed "s#server: \"https://127.0.0.1:$api_port\"#server: \"https://127.0.0.1:$forward_port\"#" \
  "$dir/cluster/admin.kubeconfig" > "$dir/admin.kubeconfig"
export KUBECONFIG="$dir/admin.kubeconfig"

echo "== containerd $CONTAINERD_VERSION, kubelet and kube-proxy $K8S_VERSION" >&2
inside "$here/node/node-inside.sh" "$dir" start-node
t_node=$(date +%s)
echo "== images: built from the workspace, imported into containerd" >&2
"$here/node/images.sh" "$dir" "$box"
t_images=$(date +%s)
"$tools/real-node-host" wait-node-ready "$NODE_NAME" 120 >&2

if [ "${NODE_MODULE:-1}" != 0 ]; then
  echo "== the module, installed by the test bed's module operator (hooks + helm + apply)" >&2
  HELM_BIN="${HELM_BIN:-$("$repo/tools/install/helm.sh")}" OWNER_PID="$box" setsid "$tools/module-operator" \
    --chart "$repo" --images "$dir/images.json" \
    --hooks "$target/x86_64-unknown-linux-gnu/debug/gpu-module-hooks" --node-host "$NODE_HOST" \
    > "$dir/logs/module-operator.log" 2>&1 < /dev/null &
  echo "$! module-operator" >> "$dir/outside-pids"
fi

cat > "$dir/env" <<ENV
KUBECONFIG=$dir/admin.kubeconfig
NODE_NAME=$NODE_NAME
NODE_DIR=$dir
NODE_HOST=$NODE_HOST
NODE_PID=$box
K8S_VERSION=$K8S_VERSION
ENV
echo "real node up (parts built in $((t_built - t_start))s, node in $((t_node - t_built))s," \
  "images in $((t_images - t_node))s); logs in $dir/logs" >&2
echo "$dir/env"
