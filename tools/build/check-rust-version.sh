#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# Fails at once unless the Rust compiler (${RUSTC:-rustc}) is at least the workspace's `rust-version`,
# before any build starts: run by the werf build (images/gpu-artifact/werf.inc.yaml) and by `make test`.
# Usage: check-rust-version.sh <workspace Cargo.toml>
set -euo pipefail
manifest=${1:?usage: check-rust-version.sh <workspace Cargo.toml>}
want=$(sed -n 's/^rust-version *= *"\([0-9][0-9.]*\)".*/\1/p' "$manifest" | head -n1)
[ -n "$want" ] || { echo "$manifest has no rust-version" >&2; exit 1; }
have=$("${RUSTC:-rustc}" --version | awk '{print $2}')
[ -n "$have" ] || { echo "${RUSTC:-rustc} --version printed no version" >&2; exit 1; }
if [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -n1)" != "$want" ]; then
  echo "rustc $have is older than the workspace's rust-version $want ($manifest): install Rust $want or newer" >&2
  exit 1
fi
echo "rustc $have >= rust-version $want"
