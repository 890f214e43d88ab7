#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# `make bench`: benchmarks against the real control plane (release builds), each printing its
# numbers next to a baseline measured in the same run.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
k8s="${K8S:-1.34}"
"$repo/tools/install/deps.sh"
# On the real node (its own control plane, torn down when this script ends): a Pod asking for an H100
# as an extended resource with the webhook installed, beside the same Pod of a FirstFit class.
realnode="$(mktemp -d /tmp/gpu-bench-node.XXXXXX)"
env_file="$(NODE_DIR="$realnode" TESTBED_OWNER_PID=$$ "$repo/tools/testbed/node-up.sh" 1.34)"
( cd "$repo/images/gpu-artifact" && GPU_REALNODE_ENV="$env_file" cargo bench -p real-node --bench extended_resource_start )
"$repo/tools/testbed/node-down.sh" "$realnode"
kubeconfig="$("$repo/tools/testbed/cluster-up.sh" "$k8s")"
trap '"$repo/tools/testbed/cluster-down.sh" "$k8s"' EXIT
cd "$repo/images/gpu-artifact"
GPU_TESTBED_KUBECONFIG="$kubeconfig" cargo bench -p e2e --bench inventory_hotplug
GPU_TESTBED_KUBECONFIG="$kubeconfig" cargo bench -p e2e --bench node_prepare
# Best fit for gated Pods against the scheduler alone on a churn, and what the gate adds to a Pod's start.
GPU_TESTBED_KUBECONFIG="$kubeconfig" cargo bench -p e2e --bench allocation_churn
# What the gate adds to a Pod's creation-to-binding: 100 gated Pods beside the same 100 ungated, p50 and p99.
GPU_TESTBED_KUBECONFIG="$kubeconfig" cargo bench -p e2e --bench gate_cost
# A priority-1000 Pod preempting four MIG Pods for a whole card, beside the same Pod on an empty node.
GPU_TESTBED_KUBECONFIG="$kubeconfig" cargo bench -p e2e --bench preemption
# gpu-dra-controller's memory at 1,000 nodes x 8 GPUs and 10,000 claims, beside its idle memory, and what
# a user feels there. Last of the cluster's benches: the API server goes on deleting its 1,000 nodes and
# 10,000 claims long after it ends, and a bench started meanwhile saw no Pod scheduled for 60 s.
GPU_TESTBED_KUBECONFIG="$kubeconfig" cargo bench -p e2e --bench controller_memory
# Our allocation engine against the kube-scheduler's allocator (v1.37 and v1.34), in-process,
# same workloads; needs no cluster. Also topology: claims of 2 and 4 whole H100s on two-socket
# nodes, the share on one NUMA node and the nodes in use, ours against the scheduler's first fit.
cargo bench -p dra-allocator --bench allocator_vs_scheduler
# The engine's own heap at the same scale, beside the same slices held as API objects.
cargo bench -p dra-allocator --bench engine_memory
