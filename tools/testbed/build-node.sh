#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# Builds what a real node of the test bed runs and caches it; a second run with everything present does
# nothing. Prints nothing on stdout.
#   - kubelet and kube-proxy from the control plane's own wrapper module (build-control-plane.sh), so they
#     are the same Kubernetes release and share its Go build cache: $GPU_CACHE/k8s/<version>/bin;
#   - containerd 2.x (containerd, containerd-shim-runc-v2, ctr) from github.com/containerd/containerd/v2;
#   - the CNI plugins the node's network needs (bridge, host-local, loopback) from
#     github.com/containernetworking/plugins;
#   - kube-rbac-proxy for the module's sidecars (tools/testbed/kube-rbac-proxy, on the upstream packages);
#   - NVIDIA's driver validator from the GPU Operator's Go module (the module's validator DaemonSet);
#   - NVIDIA's container toolkit (nvidia-container-runtime, nvidia-ctk, nvidia-cdi-hook) from its Go module:
#     the real node runs it as containerd's default runtime, in CDI mode;
#   - runc, iptables and busybox-static from Debian's packages (tools/install/node-deps.sh).
#
#   build-node.sh [1.34|latest]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/versions.sh"
source "$here/node-versions.sh"
testbed_resolve "${1:-1.34}"
source "$here/../install/cache-lock.sh"

"$here/../install/node-deps.sh" >&2
"$here/build-control-plane.sh" "${1:-1.34}" >&2

export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
node_cache="$GPU_CACHE/node"

# 1. kubelet and kube-proxy, with the ldflags build-control-plane.sh gives the control plane.
stamp="$TESTBED_BIN/.node-complete"
if [ "$(cat "$stamp" 2>/dev/null)" != "$K8S_VERSION" ]; then
  cache_lock "$GPU_CACHE/k8s/$K8S_VERSION-node"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$K8S_VERSION" ]; then
    minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
    ldflags="-s -w"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldflags="$ldflags -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
      ldflags="$ldflags -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
    done
    echo "building kubelet, kube-proxy $K8S_VERSION" >&2
    t0=$(date +%s)
    ( cd "$GPU_CACHE/k8s/$K8S_VERSION/src/k8s" && go build -trimpath -ldflags "$ldflags" -o "$TESTBED_BIN/" \
        k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy ) >&2
    echo "$K8S_VERSION" > "$stamp"
    echo "kubelet, kube-proxy built in $(( $(date +%s) - t0 ))s" >&2
  fi
  exec 8>&-
fi

# go install of one module at one version into a cache directory, once (under its lock).
install_once() { # dir ldflags packages...
  local dir=$1 ldflags=$2; shift 2
  [ -f "$dir/.complete" ] && return 0
  cache_lock "$dir"
  if [ ! -f "$dir/.complete" ]; then
    echo "building $* (first run only)" >&2
    local t0; t0=$(date +%s)
    mkdir -p "$dir/bin"
    GOBIN="$dir/bin" go install -trimpath -ldflags "$ldflags" "$@" >&2
    touch "$dir/.complete"
    echo "built in $(( $(date +%s) - t0 ))s" >&2
  fi
  exec 8>&-
}

# 2. containerd: CDI is on by default in 2.x. btrfs and devmapper need cgo and are left out with it.
v=$CONTAINERD_VERSION
install_once "$node_cache/containerd-$v" "-s -w -X github.com/containerd/containerd/v2/version.Version=$v" \
  "github.com/containerd/containerd/v2/cmd/containerd@$v" \
  "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$v" \
  "github.com/containerd/containerd/v2/cmd/ctr@$v"

# 3. CNI plugins.
v=$CNI_PLUGINS_VERSION
install_once "$node_cache/cni-plugins-$v" "-s -w" \
  "github.com/containernetworking/plugins/plugins/main/bridge@$v" \
  "github.com/containernetworking/plugins/plugins/main/loopback@$v" \
  "github.com/containernetworking/plugins/plugins/ipam/host-local@$v"

# 4. kube-rbac-proxy: our main over the upstream packages (its go.mod pins the version), behaving as
#    Deckhouse's common image does (KUBE_RBAC_PROXY_CONFIG with upstreams and excludePaths, --livez-path).
dir="$node_cache/kube-rbac-proxy-$KUBE_RBAC_PROXY_VERSION-$(cat "$here/kube-rbac-proxy/"{go.mod,main.go} | sha1sum | cut -c1-8)"
if [ ! -f "$dir/.complete" ]; then
  cache_lock "$dir"
  if [ ! -f "$dir/.complete" ]; then
    echo "building kube-rbac-proxy (first run only)" >&2
    mkdir -p "$dir/bin"
    ( cd "$here/kube-rbac-proxy" && go build -trimpath -ldflags "-s -w" -o "$dir/bin/kube-rbac-proxy" . ) >&2
    touch "$dir/.complete"
  fi
  exec 8>&-
fi

# 5. nvidia-validator: the GPU Operator publishes no Go module versions for its release tags (v25.x is not
#    semver-compatible with its module path), so the newest commit the Go proxy serves is built.
dir="$node_cache/nvidia-validator-$NVIDIA_VALIDATOR_VERSION"
if [ ! -f "$dir/.complete" ]; then
  cache_lock "$dir"
  if [ ! -f "$dir/.complete" ]; then
    echo "building nvidia-validator $NVIDIA_VALIDATOR_VERSION (first run only)" >&2
    mkdir -p "$dir/bin" "$dir/src"
    cat > "$dir/src/go.mod" <<GOMOD
module gpu.deckhouse.io/testbed/nvidia-validator

go 1.24.0

require github.com/NVIDIA/gpu-operator $NVIDIA_VALIDATOR_VERSION
GOMOD
    ( cd "$dir/src" && go build -trimpath -ldflags "-s -w" -o "$dir/bin/nvidia-validator" \
        github.com/NVIDIA/gpu-operator/validator ) >&2
    touch "$dir/.complete"
  fi
  exec 8>&-
fi

# 6. NVIDIA's container toolkit: the runtime, the CLI that writes its CDI spec over NVML (go-nvml opens
#    libnvidia-ml.so.1 at run time, through cgo) and the hook its CDI spec runs.
v=$NVIDIA_CONTAINER_TOOLKIT_VERSION
CGO_ENABLED=1 install_once "$node_cache/nvidia-container-toolkit-$v" "-s -w" \
  "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-container-runtime@$v" \
  "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-ctk@$v" \
  "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook@$v"
