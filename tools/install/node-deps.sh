#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# What the real node of the test bed needs from Debian's packages: runc (the OCI runtime containerd
# runs), iptables (kube-proxy's rules), busybox-static (the shell of the test bed's images) and kmod
# (depmod: the fixture host's module index).
# Idempotent: installs only what is missing.
set -euo pipefail
need=()
command -v runc >/dev/null || need+=(runc)
command -v iptables >/dev/null || need+=(iptables)
[ -x /bin/busybox ] || need+=(busybox-static)
command -v depmod >/dev/null || [ -x /usr/sbin/depmod ] || need+=(kmod)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]} from Debian packages"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
