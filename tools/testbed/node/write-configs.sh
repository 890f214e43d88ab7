#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# The real node's configuration files, from <node dir>/node.env: containerd (CRI with CDI, NVIDIA's
# runtime as the default over runc with cgroupfs, the kernel's oom_score_adj rule of this machine), the
# base OCI spec every container starts from, NVIDIA's container toolkit, CNI (one bridge), the kubelet
# and kube-proxy.   write-configs.sh <node dir>
set -euo pipefail
dir="$1"
source "$dir/node.env"
config="$dir/config"
mkdir -p "$config/cni"

# Every container starts from containerd's default spec plus what stands in for the GPU machine's
# kernel and hardware: the createContainer hook shows the fixture's /proc/driver and boot_id in the
# container's /proc (runc refuses mounts inside /proc), and the mock NVML's machine and state are at one
# path in every container, as a real GPU's state is reachable from every process.
"$CONTAINERD_BIN/ctr" oci spec > "$config/default-spec.json"
python3 - "$config/default-spec.json" "$config/base-spec.json" "$NODE_TOOLS/real-node-host" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
spec.setdefault("hooks", {}).setdefault("createContainer", []).append(
    {"path": sys.argv[3], "args": ["real-node-host", "proc-hook"], "timeout": 10})
spec["mounts"].append({"destination": "/run/gpu-mock-nvml", "type": "bind", "source": "/run/gpu-mock-nvml",
                       "options": ["rbind", "rw"]})
spec["process"].setdefault("env", []).extend(["MOCK_NVML_MACHINE=/run/gpu-mock-nvml/machine.yaml",
                           "MOCK_NVML_STATE=/run/gpu-mock-nvml/state.json"])
json.dump(spec, open(sys.argv[2], "w"), indent=1)
PY

# NVIDIA's container toolkit as an admin installs it on a GPU node for CDI (nvidia-ctk runtime configure
# --set-as-default, mode "cdi"): nvidia-container-runtime is containerd's default runtime, its hook is in
# the host's /usr/bin, its configuration in the host's /etc (the fixture host's: containerd is started with
# NVIDIA_CTK_CONFIG_FILE_PATH naming it). Nothing here refuses GPUs asked for by NVIDIA_VISIBLE_DEVICES:
# that is the module's NodeGroupConfiguration gpu-nvidia-runtime-envvar.sh, which the test bed's module
# operator runs on the node as bashible would.
toolkit_conf="$NODE_HOST/etc/nvidia-container-runtime/config.toml"
mkdir -p "$(dirname "$toolkit_conf")" "$NODE_HOST/usr/bin"
install -m 755 "$NVIDIA_TOOLKIT_BIN/nvidia-cdi-hook" "$NODE_HOST/usr/bin/nvidia-cdi-hook"
cat > "$toolkit_conf" <<TOML
[nvidia-container-runtime]
mode = "cdi"
runtimes = ["$(command -v runc)"]
debug = "$dir/logs/nvidia-container-runtime.log"
log-level = "debug"
TOML

cat > "$config/containerd.toml" <<TOML
version = 3
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "registry.k8s.io/pause:3.10"
[plugins.'io.containerd.cri.v1.runtime']
  enable_cdi = true
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
  # root here lacks CAP_SYS_RESOURCE: a negative oom_score_adj would be refused.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "nvidia"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
      base_runtime_spec = "$config/base-spec.json"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia.options]
        BinaryName = "$NVIDIA_TOOLKIT_BIN/nvidia-container-runtime"
        SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      base_runtime_spec = "$config/base-spec.json"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["$CNI_BIN"]
    conf_dir = "$config/cni"
TOML

cat > "$config/cni/10-realnode.conflist" <<JSON
{"cniVersion": "1.0.0", "name": "realnode", "plugins": [{
  "type": "bridge", "bridge": "cni0", "isGateway": true, "isDefaultGateway": true, "ipMasq": false,
  "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]]}}]}
JSON
: > "$config/resolv.conf"

{
  cat <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$dir/cluster/pki/ca.crt"}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_ROOT
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
# This machine runs cgroup v1; a kubelet of 1.35+ refuses it unless told.
failCgroupV1: false
failSwapOn: false
resolvConf: "$config/resolv.conf"
tlsCertFile: "$config/kubelet-serving.crt"
tlsPrivateKeyFile: "$config/kubelet-serving.key"
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
# The machine is shared (its disk may be nearly full with other work): no eviction for its disk or
# memory, and the imported images are never collected.
evictionHard: {memory.available: "1Mi", nodefs.available: "0%", imagefs.available: "0%", nodefs.inodesFree: "0%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
syncFrequency: 10s
# Deckhouse's nodes run static Pods from here (bashible's kubelet configuration); gpu-handler puts the
# MPS control daemons there.
staticPodPath: /etc/kubernetes/manifests
featureGates:
YAML
  echo "$FEATURE_GATES" | tr ',' '\n' | sed 's/^\(.*\)=\(.*\)$/  \1: \2/'
} > "$config/kubelet.yaml"

cat > "$config/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$config/kube-proxy.kubeconfig"}
mode: iptables
hostnameOverride: $NODE_NAME
clusterCIDR: $POD_CIDR
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# conntrack limits are the machine's (the node is a network namespace of it): leave them.
conntrack: {maxPerCore: 0, min: 0}
YAML
