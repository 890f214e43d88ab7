#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# Installs what `make test` and `make demo` need beyond Rust and Go, from Debian's packages.
# Idempotent: installs only what is missing.
set -euo pipefail
need=()
command -v openssl >/dev/null || need+=(openssl)
command -v curl >/dev/null || need+=(curl)
command -v python3 >/dev/null || need+=(python3)
command -v setsid >/dev/null || need+=(util-linux)
# The health ledger's durability test watches the system calls of a save.
command -v strace >/dev/null || need+=(strace)
# promtool checks the module's Prometheus rules (the package also ships a server we never start).
command -v promtool >/dev/null || need+=(prometheus)
# jq filters objects for the hooks' bindings in tests, as shell-operator does.
command -v jq >/dev/null || need+=(jq)
# The docs generator and the dashboard check read YAML.
python3 -c 'import yaml' 2>/dev/null || need+=(python3-yaml)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]} from Debian packages"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
for tool in cargo go; do
  command -v "$tool" >/dev/null || { echo "$tool is required (Rust and Go toolchains come with the machine)" >&2; exit 1; }
done
