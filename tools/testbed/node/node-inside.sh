#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# What runs inside a real node's namespaces (network, mount, PID; see ../node-up.sh), one step per call:
#   node-inside.sh <node dir> setup           network, the host's view (fixture host), devices, configs
#   node-inside.sh <node dir> start-node      containerd, kube-proxy, kubelet
#   node-inside.sh <node dir> stop-node       kills them and every container, unmounts what they mounted
#   node-inside.sh <node dir> restart-kubelet the kubelet process only (SIGTERM, then a new one)
#   node-inside.sh <node dir> reboot          stop-node, then what a reboot resets, a new boot id, start-node
# The node's settings come from <node dir>/node.env (written by node-up.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="$1"; step="$2"
source "$dir/node.env"
log() { echo "node: $*" >&2; }

# --- network: the node's address, the Pods' bridge (made by CNI), the Service range; no route out ------
setup_network() {
  ip link set lo up
  ip link add node0 type veth peer name node0-peer
  ip addr add "$NODE_IP/24" dev node0
  ip link set node0 up; ip link set node0-peer up
  # ClusterIPs need a route for the node's own connections before kube-proxy rewrites them; it stays
  # inside (nothing answers on node0's peer).
  ip route add "$SERVICE_CIDR" dev node0
}

# --- the host the node's Pods see through hostPath: the fixture host merged with the real kernel ----
# /sys: the fixture's tree, with every entry of the machine's /sys the fixture does not have bound back
# (cgroups, CPUs, memory), two levels deep: the fixture owns bus/pci, devices/pci0000:00,
# kernel/iommu_groups and class/dmi. Network devices come from a sysfs mounted in the node's network
# namespace, which shows the node's own.
setup_sys() {
  local fixture="$NODE_HOST/sys" netsys="$dir/run/net-sys"
  for top in /sys/*; do
    local name; name=$(basename "$top")
    if [ ! -e "$fixture/$name" ]; then
      placeholder "$top" "$fixture/$name"; mount --rbind "$top" "$fixture/$name"; continue
    fi
    [ -d "$top" ] && [ ! -L "$top" ] || continue
    for entry in "$top"/*; do
      local child; child=$(basename "$entry")
      { [ -e "$fixture/$name/$child" ] || [ -L "$fixture/$name/$child" ]; } && continue
      placeholder "$entry" "$fixture/$name/$child"; mount --rbind "$entry" "$fixture/$name/$child"
    done
  done
  mkdir -p "$netsys"; mount -t sysfs sysfs "$netsys"
  mount --rbind "$fixture" /sys
  mount --bind "$netsys/class/net" /sys/class/net
  mount --bind "$netsys/devices/virtual/net" /sys/devices/virtual/net
}
placeholder() { # real-entry fixture-path
  if [ -d "$1" ] && [ ! -L "$1" ]; then mkdir -p "$2"; else : > "$2"; fi
}

# /dev: a tmpfs of the node's own with the usual nodes and the fixture's NVIDIA nodes (mknod), so the
# machine's devtmpfs is never touched.
setup_dev() {
  mount -t tmpfs -o mode=755,nosuid tmpfs /dev
  make_standard_devices
  "$NODE_TOOLS/real-node-host" devices "$NODE_HOST" /dev
}
make_standard_devices() {
  mknod -m 666 /dev/null c 1 3; mknod -m 666 /dev/zero c 1 5; mknod -m 666 /dev/full c 1 7
  mknod -m 666 /dev/random c 1 8; mknod -m 666 /dev/urandom c 1 9; mknod -m 666 /dev/tty c 5 0
  mknod -m 600 /dev/kmsg c 1 11
  mkdir -p /dev/pts /dev/shm /dev/mqueue
  mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts /dev/pts
  ln -sf pts/ptmx /dev/ptmx
  mount -t tmpfs -o mode=1777,nosuid,nodev shm /dev/shm
  ln -sf /proc/self/fd /dev/fd; ln -sf /proc/self/fd/0 /dev/stdin
  ln -sf /proc/self/fd/1 /dev/stdout; ln -sf /proc/self/fd/2 /dev/stderr
}

setup_mounts() {
  mount --make-rshared /
  # /run and /var/lib: the node's own; what a node keeps on disk lives in the node directory.
  mount -t tmpfs -o mode=755 tmpfs /run
  mkdir -p /run/gpu-mock-nvml
  mount -t tmpfs -o mode=755 tmpfs /var/lib
  for d in kubelet containerd; do
    mkdir -p "/var/lib/$d" "$dir/disk/$d"; mount --bind "$dir/disk/$d" "/var/lib/$d"
  done
  mount --make-rshared /var/lib/kubelet
  # /usr: the driver installed on the host (nvidia-smi, the libraries) and pci.ids, over the machine's.
  mkdir -p "$dir/run/usr-work"
  mount -t overlay overlay -o "lowerdir=/usr,upperdir=$NODE_HOST/usr,workdir=$dir/run/usr-work" /usr
  # /etc: the machine's under an overlay of the node's own, so the kubelet's staticPodPath, Deckhouse's
  # /etc/kubernetes/manifests, is the node's and never the machine's.
  mkdir -p "$dir/run/etc-upper" "$dir/run/etc-work"
  mount -t overlay overlay -o "lowerdir=/etc,upperdir=$dir/run/etc-upper,workdir=$dir/run/etc-work" /etc
  mkdir -p /etc/kubernetes/manifests
  setup_sys
  # What the NVIDIA kernel module and the kernel publish in /proc, from the fixture.
  mount --bind "$NODE_HOST/proc/driver" /proc/driver
  mount --bind "$NODE_HOST/proc/devices" /proc/devices
  mount --bind "$NODE_HOST/proc/sys/kernel/random/boot_id" /proc/sys/kernel/random/boot_id
  setup_dev
}

# The kubelet places Pods under this cgroup of every hierarchy; it must exist first.
setup_cgroups() {
  for hierarchy in /sys/fs/cgroup/*/; do
    mkdir -p "$hierarchy$CGROUP_ROOT"
  done
  if [ -d /sys/fs/cgroup/cpuset ]; then
    cat /sys/fs/cgroup/cpuset/cpuset.cpus > "/sys/fs/cgroup/cpuset/$CGROUP_ROOT/cpuset.cpus"
    cat /sys/fs/cgroup/cpuset/cpuset.mems > "/sys/fs/cgroup/cpuset/$CGROUP_ROOT/cpuset.mems"
  fi
}

# The mock NVML's machine and state: what plays the GPUs' own state, in every container at one path.
setup_mock_nvml() {
  cp "$NODE_HOST"/mock-nvml/*.yaml /run/gpu-mock-nvml/   # machine.yaml and the model files it includes
  [ -f "$dir/disk/mock-nvml-state.json" ] && cp "$dir/disk/mock-nvml-state.json" /run/gpu-mock-nvml/state.json
  true
}

start() { # name args...
  local name=$1; shift
  setsid "$@" > "$dir/logs/$name.log" 2>&1 < /dev/null &
  echo "$! $name" >> "$dir/node-pids"
}

start_node() {
  export PATH="$CONTAINERD_BIN:$PATH"
  # The kernel's side of the GPUs: a node start is a boot (sysfs as after boot, bindings emulated).
  start kernel-emulator "$NODE_TOOLS/real-node-host" kernel "$NODE_HOST" /dev
  wait_for "kernel emulation" grep -q running "$dir/logs/kernel-emulator.log"
  # The CDI spec of NVIDIA's runtime, written over NVML as the toolkit's nvidia-cdi-refresh unit writes it
  # at boot (index and UUID names, and `all`), and the runtime's configuration for containerd's shims.
  MOCK_NVML_MACHINE=/run/gpu-mock-nvml/machine.yaml MOCK_NVML_STATE=/run/gpu-mock-nvml/state.json \
    "$NVIDIA_TOOLKIT_BIN/nvidia-ctk" cdi generate --driver-root=/ --nvidia-cdi-hook-path=/usr/bin/nvidia-cdi-hook \
    --output=/var/run/cdi/nvidia.yaml > "$dir/logs/nvidia-ctk-cdi-generate.log" 2>&1
  export NVIDIA_CTK_CONFIG_FILE_PATH="$NODE_HOST/etc/nvidia-container-runtime/config.toml"
  start containerd "$CONTAINERD_BIN/containerd" --config "$dir/config/containerd.toml"
  wait_for "containerd socket" test -S /run/containerd/containerd.sock
  start kube-proxy "$K8S_BIN/kube-proxy" --config "$dir/config/kube-proxy.yaml" --v=2
  start kubelet "$K8S_BIN/kubelet" --config "$dir/config/kubelet.yaml" \
    --kubeconfig "$dir/config/kubelet.kubeconfig" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --v=2
  wait_for "kubelet healthz" curl -fsS --max-time 2 http://127.0.0.1:10248/healthz
}

wait_for() { # what command...
  local what=$1; shift
  for _ in $(seq 1 600); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  log "$what not there after 120s; last log lines:"; tail -n 30 "$dir"/logs/*.log >&2; return 1
}

# Every process of the node's workload: the daemons, the shims and the containers (their cgroups are
# under the node's cgroup root). PIDs as this namespace numbers them; the control plane, the box's init
# and whoever called this are kept.
node_processes() {
  local pid
  while read -r pid _; do echo "$pid"; done < "$dir/node-pids"
  for pid in /proc/[0-9]*; do
    pid=${pid#/proc/}
    # (if, not &&: a last test that fails would fail the pipeline under pipefail)
    if grep -q "$CGROUP_ROOT" "/proc/$pid/cgroup" 2>/dev/null; then echo "$pid"; fi
    if [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$CONTAINERD_BIN/containerd-shim-runc-v2" ]; then echo "$pid"; fi
  done | sort -u
}

stop_node() {
  local pids; pids=$(node_processes | tr '\n' ' ')
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null || true
  for _ in $(seq 1 100); do
    local alive=0
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break; sleep 0.1
  done
  : > "$dir/node-pids"
  # What the runtime and the kubelet mounted (container roots, volumes) goes, as at power-off.
  awk '{print $5}' /proc/self/mountinfo | grep -E '^(/run/containerd/|/run/netns/|/var/lib/kubelet/pods/)' \
    | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  ip link del cni0 2>/dev/null || true
}

reboot_node() {
  stop_node
  # tmpfs and device nodes do not survive; the disk (kubelet's and containerd's directories) does.
  cp /run/gpu-mock-nvml/state.json "$dir/disk/mock-nvml-state.json" 2>/dev/null || true
  umount -R -l /run; mount -t tmpfs -o mode=755 tmpfs /run; mkdir -p /run/gpu-mock-nvml
  umount -R -l /dev; setup_dev
  rm -rf /var/lib/cni
  "$NODE_TOOLS/real-node-host" reboot "$NODE_HOST" "$dir/disk/mock-nvml-state.json"
  setup_mock_nvml
  start_node
}

case "$step" in
  setup) setup_network; setup_mounts; setup_cgroups; setup_mock_nvml ;;
  start-node) start_node ;;
  stop-node) stop_node ;;
  restart-kubelet)
    pid=$(awk '$2=="kubelet" {print $1}' "$dir/node-pids")
    kill -TERM "$pid"; for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    sed -i '/ kubelet$/d' "$dir/node-pids"
    start kubelet "$K8S_BIN/kubelet" --config "$dir/config/kubelet.yaml" \
      --kubeconfig "$dir/config/kubelet.kubeconfig" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --v=2
    wait_for "kubelet healthz" curl -fsS --max-time 2 http://127.0.0.1:10248/healthz ;;
  reboot) reboot_node ;;
  *) echo "unknown step $step" >&2; exit 2 ;;
esac
