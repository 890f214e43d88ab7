#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# The two Kubernetes releases the test bed runs, and the etcd each one pairs with
# (from that release's hack/lib/etcd.sh and build/dependencies.yaml).
# K8S=1.34 is our floor: v1.34.5 exists, but a dozen of its staging modules (k8s.io/kube-scheduler@v0.34.5, ...)
# are not served by the Go module proxy, so v1.34.4 is the newest 1.34 patch that builds from Go modules.
# K8S=1.34 is our floor; K8S=latest is the newest release published as Go modules.

testbed_resolve() {
  case "${1:-1.34}" in
    # DRADeviceTaints (device taints, their scheduling and NoExecute eviction) and ResourceHealthStatus
    # (allocatedResourcesStatus kept in Pod status) are alpha in 1.34; on 1.37 both are on by default.
    # With DRADeviceTaints on, the 1.34 scheduler and controller-manager watch DeviceTaintRules, served
    # only by resource.k8s.io/v1alpha3: without that API their caches never sync and nothing schedules.
    1.34) K8S_VERSION=v1.34.4; ETCD_VERSION=v3.6.5
      TESTBED_GATES=DRAPartitionableDevices=true,DRAConsumableCapacity=true,DRAExtendedResource=true,DRADeviceTaints=true,ResourceHealthStatus=true
      TESTBED_RUNTIME_CONFIG=resource.k8s.io/v1alpha3=true ;;
    # 1.37: DRAExtendedResource is GA and locked on (setting it only warns), the other two are beta.
    latest|1.37) K8S_VERSION=v1.37.2; ETCD_VERSION=v3.7.0
      TESTBED_GATES=DRAPartitionableDevices=true,DRAConsumableCapacity=true
      TESTBED_RUNTIME_CONFIG= ;;
    *) echo "unknown K8S=$1 (use 1.34 or latest)" >&2; return 1 ;;
  esac
  GPU_CACHE="${GPU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deckhouse-gpu}"
  TESTBED_BIN="$GPU_CACHE/k8s/$K8S_VERSION/bin"
  export K8S_VERSION ETCD_VERSION TESTBED_GATES TESTBED_RUNTIME_CONFIG GPU_CACHE TESTBED_BIN
}
