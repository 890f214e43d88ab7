#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# Builds etcd, kube-apiserver, kube-scheduler and kube-controller-manager from their Go modules
# and caches them under $GPU_CACHE/k8s/<version>/bin. A second run with the binaries present does nothing.
#
# k8s.io/kubernetes publishes a go.mod whose staging modules are required at v0.0.0, so a wrapper
# module must `replace` every k8s.io/* staging module with its published v0.X.Y twin.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/versions.sh"
testbed_resolve "${1:-1.34}"

source "$here/../install/cache-lock.sh"

stamp="$TESTBED_BIN/.complete"
built() { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$K8S_VERSION $ETCD_VERSION" ]; }
built || { cache_lock "$GPU_CACHE/k8s/$K8S_VERSION"; }
if built; then
  echo "control plane $K8S_VERSION already built in $TESTBED_BIN"
  exit 0
fi

export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
work="$GPU_CACHE/k8s/$K8S_VERSION/src"
mkdir -p "$work/k8s" "$work/etcd" "$TESTBED_BIN"

minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
staging_version="v0.${K8S_VERSION#v1.}"

# 1. Kubernetes: require k8s.io/kubernetes, replace every staging module at v0.X.Y.
kmod="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
{
  echo "module gpu.deckhouse.io/testbed/k8s"
  echo
  echo "go $(sed -n 's/^go //p' "$kmod")"
  echo
  echo "require k8s.io/kubernetes $K8S_VERSION"
  echo
  grep -E '^\s+k8s\.io/[a-z0-9-]+ v0\.0\.0$' "$kmod" | awk -v v="$staging_version" '{print "replace " $1 " => " $1 " " v}'
} > "$work/k8s/go.mod"

ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags="$ldflags -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags="$ldflags -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

echo "building kube-apiserver, kube-scheduler, kube-controller-manager $K8S_VERSION"
( cd "$work/k8s" && go build -trimpath -ldflags "$ldflags" -o "$TESTBED_BIN/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kube-controller-manager )

# 2. etcd: its server module carries replace lines to sibling modules, so it needs a wrapper too.
cat > "$work/etcd/go.mod" <<GOMOD
module gpu.deckhouse.io/testbed/etcd

go 1.24

require go.etcd.io/etcd/server/v3 $ETCD_VERSION

replace (
	go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/pkg/v3 => go.etcd.io/etcd/client/pkg/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 $ETCD_VERSION
	go.etcd.io/etcd/pkg/v3 => go.etcd.io/etcd/pkg/v3 $ETCD_VERSION
)
GOMOD
echo "building etcd $ETCD_VERSION"
( cd "$work/etcd" && go build -trimpath -ldflags "-s -w" -o "$TESTBED_BIN/etcd" go.etcd.io/etcd/server/v3 )

echo "$K8S_VERSION $ETCD_VERSION" > "$stamp"
echo "control plane $K8S_VERSION built in $TESTBED_BIN"
