#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# Starts etcd, kube-apiserver, kube-controller-manager and kube-scheduler on 127.0.0.1 with generated
# certificates, RBAC, service-account token signing and the DRA gates on; prints the admin kubeconfig path.
#
#   cluster-up.sh [1.34|latest]        TESTBED_DIR overrides where state, certs and logs live.
#   TESTBED_OWNER_PID=<pid>            tear the cluster down when that process exits (used by tests).
#   TESTBED_ADVERTISE_ADDRESS=<ip>     the real node's (node-up.sh): the API server listens on every
#                                      address of its network namespace (the node's, which has no route
#                                      out) and the `kubernetes` Service points at <ip>.
#   TESTBED_AUDIT_GROUP=<group>        audit log (Metadata level, <dir>/logs/audit.log) of the requests
#                                      of that group only, e.g. system:serviceaccounts:d8-gpu; the Events
#                                      it creates at the Request level (their reasons outlive their
#                                      namespaces: real-node tests/extended_resources.rs).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$here/versions.sh"
k8s="${1:-1.34}"
testbed_resolve "$k8s"
"$here/build-control-plane.sh" "$k8s" >&2

dir="${TESTBED_DIR:-$repo/.testbed/$k8s}"
if [ -f "$dir/pids" ]; then "$here/cluster-down.sh" "$dir" >&2 || true; fi
rm -rf "$dir"; mkdir -p "$dir/pki" "$dir/logs" "$dir/etcd"
pki="$dir/pki"

# The five ports stay held (hold-ports.py) from their choice until every server listens on its own, so no
# other process can take one in between. The holder reads fd 3 and ends when it closes: at the end of
# this script, or with it if it fails. Servers must not inherit fd 3 (see start).
exec 3> >(exec python3 "$here/hold-ports.py" 5 > "$dir/ports")
for _ in $(seq 1 200); do [ -s "$dir/ports" ] && break; sleep 0.05; done
read -r etcd_port etcd_peer api_port kcm_port sched_port < "$dir/ports"
[ -n "${sched_port:-}" ] || { echo "hold-ports.py printed no ports" >&2; exit 1; }

# --- certificates -------------------------------------------------------------------------------
openssl_quiet() { openssl "$@" 2>/dev/null; }
openssl_quiet req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=gpu-testbed-ca" \
  -keyout "$pki/ca.key" -out "$pki/ca.crt"
sign() { # name subject [san]
  local name=$1 subject=$2 san=${3:-}
  openssl_quiet req -newkey rsa:2048 -nodes -subj "$subject" -keyout "$pki/$name.key" -out "$pki/$name.csr"
  local ext="$pki/$name.ext"
  { echo "basicConstraints=CA:FALSE"; echo "keyUsage=digitalSignature,keyEncipherment"
    if [ -n "$san" ]; then echo "extendedKeyUsage=serverAuth,clientAuth"; echo "subjectAltName=$san"
    else echo "extendedKeyUsage=clientAuth"; fi; } > "$ext"
  openssl_quiet x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 3650 -extfile "$ext" -out "$pki/$name.crt"
}
advertise="${TESTBED_ADVERTISE_ADDRESS:-127.0.0.1}"
sign apiserver "/CN=kube-apiserver" "IP:127.0.0.1,IP:$advertise,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
sign admin "/O=system:masters/CN=testbed-admin"
sign kube-scheduler "/CN=system:kube-scheduler"
sign kube-controller-manager "/CN=system:kube-controller-manager"
openssl_quiet genrsa -out "$pki/sa.key" 2048
openssl_quiet rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub"

server="https://127.0.0.1:$api_port"
kubeconfig() { # name
  cat > "$dir/$1.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: testbed
  cluster: {server: "$server", certificate-authority: "$pki/ca.crt"}
users:
- name: $1
  user: {client-certificate: "$pki/$1.crt", client-key: "$pki/$1.key"}
contexts:
- name: testbed
  context: {cluster: testbed, user: $1}
current-context: testbed
KC
}
kubeconfig admin; kubeconfig kube-scheduler; kubeconfig kube-controller-manager

# Fast retries keep e2e tests short; everything else is the scheduler's default profile.
cat > "$dir/scheduler-config.yaml" <<CFG
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: "$dir/kube-scheduler.kubeconfig"}
leaderElection: {leaderElect: false}
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 2
CFG

# The DRA gates each release still has as gates (versions.sh); TESTBED_FEATURE_GATES overrides,
# e.g. to prove what the module does with a gate off.
gates="${TESTBED_FEATURE_GATES:-$TESTBED_GATES}"
runtime_config=()
if [ -n "$TESTBED_RUNTIME_CONFIG" ]; then runtime_config=(--runtime-config "$TESTBED_RUNTIME_CONFIG"); fi

start() { # name args...
  local name=$1; shift
  setsid "$here/supervise.sh" "$TESTBED_BIN/$name" "$@" > "$dir/logs/$name.log" 2>&1 < /dev/null 3>&- &
  echo "$! $name" >> "$dir/pids"
  # The command line, one argument a line, for restart-component.sh (outage tests).
  mkdir -p "$dir/cmd"; printf '%s\n' "$TESTBED_BIN/$name" "$@" > "$dir/cmd/$name"
}
wait_healthy() { # name url [curl args]
  local name=$1 url=$2; shift 2
  for _ in $(seq 1 600); do
    if curl -fsS --max-time 2 "$@" "$url" > /dev/null 2>&1; then return 0; fi
    if ! kill -0 "$(awk -v n="$name" '$2==n {print $1}' "$dir/pids")" 2>/dev/null; then   # its supervise.sh gave up
      echo "$name exited; last log lines:" >&2; tail -n 30 "$dir/logs/$name.log" >&2; return 1
    fi
    sleep 0.2
  done
  echo "$name not healthy at $url after 120s; last log lines:" >&2; tail -n 30 "$dir/logs/$name.log" >&2; return 1
}

start etcd --data-dir "$dir/etcd" --listen-client-urls "http://127.0.0.1:$etcd_port" \
  --advertise-client-urls "http://127.0.0.1:$etcd_port" --listen-peer-urls "http://127.0.0.1:$etcd_peer" \
  --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" --initial-cluster "default=http://127.0.0.1:$etcd_peer" \
  --unsafe-no-fsync --quota-backend-bytes 4294967296
wait_healthy etcd "http://127.0.0.1:$etcd_port/health"

audit=()
if [ -n "${TESTBED_AUDIT_GROUP:-}" ]; then
  cat > "$dir/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Request
  userGroups: ["$TESTBED_AUDIT_GROUP"]
  verbs: ["create"]
  resources: [{group: "", resources: ["events"]}, {group: "events.k8s.io", resources: ["events"]}]
- level: Metadata
  userGroups: ["$TESTBED_AUDIT_GROUP"]
- level: None
EOF
  audit=(--audit-policy-file "$dir/audit-policy.yaml" --audit-log-path "$dir/logs/audit.log")
fi
if [ "$advertise" = 127.0.0.1 ]; then apiserver_address=(--bind-address 127.0.0.1 --endpoint-reconciler-type none)
else
  # The real node: reach its kubelet (logs, exec) at the node's address; there is no DNS for its name.
  apiserver_address=(--bind-address 0.0.0.0 --endpoint-reconciler-type lease --kubelet-preferred-address-types InternalIP)
fi
start kube-apiserver --etcd-servers "http://127.0.0.1:$etcd_port" "${apiserver_address[@]}" ${audit[@]+"${audit[@]}"} \
  --advertise-address "$advertise" --secure-port "$api_port" --cert-dir "$pki" \
  --kubelet-client-certificate "$pki/admin.crt" --kubelet-client-key "$pki/admin.key" \
  --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" --client-ca-file "$pki/ca.crt" \
  --authorization-mode Node,RBAC --service-cluster-ip-range 10.0.0.0/24 --allow-privileged=true \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --requestheader-client-ca-file "$pki/ca.crt" --requestheader-allowed-names front-proxy-client \
  --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
  --requestheader-extra-headers-prefix X-Remote-Extra- \
  --feature-gates "$gates" "${runtime_config[@]}" --profiling=false --enable-priority-and-fairness=false
admin_curl=(--cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key")
wait_healthy kube-apiserver "$server/readyz" "${admin_curl[@]}"

start kube-controller-manager --kubeconfig "$dir/kube-controller-manager.kubeconfig" \
  --authentication-kubeconfig "$dir/kube-controller-manager.kubeconfig" \
  --authorization-kubeconfig "$dir/kube-controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$kcm_port" --leader-elect=false \
  --use-service-account-credentials=true --service-account-private-key-file "$pki/sa.key" \
  --root-ca-file "$pki/ca.crt" --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
  --node-monitor-grace-period 20s --node-monitor-period 2s \
  --controllers '*' --feature-gates "$gates" --profiling=false
wait_healthy kube-controller-manager "https://127.0.0.1:$kcm_port/healthz" -k

start kube-scheduler --config "$dir/scheduler-config.yaml" \
  --authentication-kubeconfig "$dir/kube-scheduler.kubeconfig" \
  --authorization-kubeconfig "$dir/kube-scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$sched_port" --feature-gates "$gates" --profiling=false
wait_healthy kube-scheduler "https://127.0.0.1:$sched_port/healthz" -k

exec 3>&-   # every server listens: release the held ports

if [ -n "${TESTBED_OWNER_PID:-}" ]; then
  # The owner (a test process) may die without cleaning up; nothing of ours outlives it.
  setsid bash -c "while kill -0 $TESTBED_OWNER_PID 2>/dev/null; do sleep 1; done; '$here/cluster-down.sh' '$dir'" \
    > /dev/null 2>&1 < /dev/null &
fi

cat > "$dir/env" <<ENV
K8S_VERSION=$K8S_VERSION
ETCD_VERSION=$ETCD_VERSION
KUBECONFIG=$dir/admin.kubeconfig
FEATURE_GATES=$gates
ENV
echo "control plane $K8S_VERSION (etcd $ETCD_VERSION) is up; logs in $dir/logs" >&2
echo "$dir/admin.kubeconfig"
