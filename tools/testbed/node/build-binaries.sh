#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# What cargo builds for the real node (CARGO_TARGET_DIR, else the workspace's target): the node's tools
# (fixture host, kernel emulation, module operator), the driver root's libraries and tools, and the
# module's binaries as werf.yaml builds them: gpu-handler dynamic, the others static (crt-static).
set -euo pipefail
ws="$(cd "$(dirname "$0")/../../../images/gpu-artifact" && pwd)"
cd "$ws"
cargo build --locked -p real-node -p driver-stand-ins -p mock-cuda -p mock-nvml -p gpu-handler
RUSTFLAGS="-C target-feature=+crt-static" cargo build --locked --target x86_64-unknown-linux-gnu \
  -p gpu-node-agent -p gpu-controller -p gpu-dra-controller -p gpu-module-hooks -p gpu-cdi-hook -p driver-tool
