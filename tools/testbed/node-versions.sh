# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# What the real node of the test bed runs besides the Kubernetes release of versions.sh (sourced).
# containerd 2.2: CDI on by default; cgroup v1 still supported (deprecated in 2.2, kept until 2029).
CONTAINERD_VERSION=v2.2.9
CNI_PLUGINS_VERSION=v1.9.1
# The upstream kube-rbac-proxy packages our stand-in for Deckhouse's common image is built on.
KUBE_RBAC_PROXY_VERSION=v0.19.1
# The GPU Operator's validator (the module pins NVIDIA's v25.3.1 image; the Go proxy serves no module
# version for the v25 tags, so this is the newest commit it serves, from September 2025).
NVIDIA_VALIDATOR_VERSION=v0.0.0-20250917190837-d73a0086a6ba
# NVIDIA's container toolkit (nvidia-container-runtime in CDI mode, nvidia-ctk, nvidia-cdi-hook): the
# runtime a GPU node may have as containerd's default; CDI mode needs no libnvidia-container.
NVIDIA_CONTAINER_TOOLKIT_VERSION=v1.20.2
export CONTAINERD_VERSION CNI_PLUGINS_VERSION KUBE_RBAC_PROXY_VERSION NVIDIA_VALIDATOR_VERSION NVIDIA_CONTAINER_TOOLKIT_VERSION
